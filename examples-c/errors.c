/* C11 test of the error paths reachable on the CPU: one bad call per validation rule. Each must
 * return its exact status, leave a non-empty ccv1d_last_error() that names the field, and leave
 * every buffer (inputs and outputs) byte-identical. Also: ccv1d_status_string for every code.
 * WORKSPACE is GPU-only (the CPU backend needs no workspace: checked here as size 0 and a
 * 1-byte workspace accepted). Without a GPU, the GPU backend and the memory functions answer
 * NO_DEVICE; on a GPU machine those checks are replaced by WRONG_DEVICE for host pointers.
 * Build: cc -std=c11 -I include examples-c/errors.c -L target/release -lcausal_conv1d */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "causal_conv1d.h"

enum { B = 2, D = 3, L = 5, W = 4, K = W - 1, SLOTS = 2, SL = 4, S = 2 };

/* Every buffer lives in one arena so "nothing changed" is one memcmp. */
static union {
  float f[4096];
  int32_t i[4096];
} arena;
static unsigned char before[sizeof arena];
static size_t used;
static int failures, checks;

static void *take(size_t bytes) {
  void *p = (unsigned char *)&arena + used;
  used += (bytes + 15) / 16 * 16;
  if (used > sizeof arena) abort();
  return p;
}

static ccv1d_tensor f32(float *p, int64_t s0, int64_t s1, int64_t s2) {
  ccv1d_tensor t = {p, CCV1D_DTYPE_F32, {s0, s1, s2}};
  return t;
}
static ccv1d_tensor i32(int32_t *p) {
  ccv1d_tensor t = {p, CCV1D_DTYPE_I32, {1, 0, 0}};
  return t;
}

static float *x, *weight, *bias, *out, *states, *states2, *dout, *dx, *dweight, *dbias, *conv_state, *ux, *uout;
static int32_t *cu, *slot_of_seq, *slot_of_row;

static void setup(void) {
  x = take(sizeof(float) * B * D * L), out = take(sizeof(float) * B * D * L);
  weight = take(sizeof(float) * D * W), bias = take(sizeof(float) * D);
  states = take(sizeof(float) * SLOTS * D * K), states2 = take(sizeof(float) * SLOTS * D * K);
  dout = take(sizeof(float) * B * D * L), dx = take(sizeof(float) * B * D * L);
  dweight = take(sizeof(float) * D * W), dbias = take(sizeof(float) * D);
  conv_state = take(sizeof(float) * SLOTS * D * SL);
  ux = take(sizeof(float) * B * D * S), uout = take(sizeof(float) * B * D * S);
  cu = take(sizeof(int32_t) * 3), slot_of_seq = take(sizeof(int32_t) * 2), slot_of_row = take(sizeof(int32_t) * B);
  for (size_t k = 0; k < used / 4; k++) arena.f[k] = (float)((k * 37) % 101) / 50.0f - 1.0f;
  cu[0] = 0, cu[1] = 2, cu[2] = L; /* two packed sequences over seqlen L */
  slot_of_seq[0] = 1, slot_of_seq[1] = 0;
  slot_of_row[0] = 1, slot_of_row[1] = -1;
}

/* A valid forward call: channel-first, bias, states (rows mode). */
static ccv1d_fwd_params fwd_ok(void) {
  ccv1d_fwd_params p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p, p.backend = CCV1D_BACKEND_CPU, p.activation = CCV1D_ACT_SILU;
  p.batch = B, p.dim = D, p.seqlen = L, p.width = W;
  p.x = f32(x, D * L, L, 1), p.weight = f32(weight, W, 1, 0), p.bias = f32(bias, 1, 0, 0);
  p.out = f32(out, D * L, L, 1);
  p.initial_states = f32(states, D * K, K, 1), p.final_states = f32(states2, D * K, K, 1);
  return p;
}

/* The same, packed: batch 1, x [1, D, L], two sequences, slots through state_indices. */
static ccv1d_fwd_params fwd_packed_ok(void) {
  ccv1d_fwd_params p = fwd_ok();
  p.batch = 1, p.cu_seqlens = i32(cu), p.num_seqs = 2, p.state_indices = i32(slot_of_seq), p.num_state_slots = SLOTS;
  return p;
}

static ccv1d_bwd_params bwd_ok(void) {
  ccv1d_bwd_params g;
  memset(&g, 0, sizeof g);
  g.struct_size = sizeof g, g.backend = CCV1D_BACKEND_CPU, g.activation = CCV1D_ACT_SILU;
  g.batch = B, g.dim = D, g.seqlen = L, g.width = W;
  g.x = f32(x, D * L, L, 1), g.weight = f32(weight, W, 1, 0), g.bias = f32(bias, 1, 0, 0);
  g.dout = f32(dout, D * L, L, 1), g.dx = f32(dx, D * L, L, 1);
  g.dweight = f32(dweight, W, 1, 0), g.dbias = f32(dbias, 1, 0, 0);
  return g;
}

static ccv1d_update_params update_ok(void) {
  ccv1d_update_params u;
  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u, u.backend = CCV1D_BACKEND_CPU, u.activation = CCV1D_ACT_NONE;
  u.batch = B, u.dim = D, u.seqlen = S, u.width = W, u.state_len = SL, u.num_state_slots = SLOTS;
  u.x = f32(ux, D * S, S, 1), u.weight = f32(weight, W, 1, 0), u.out = f32(uout, D * S, S, 1);
  u.conv_state = f32(conv_state, D * SL, SL, 1), u.conv_state_indices = i32(slot_of_row);
  return u;
}

/* Check one call's result: exact status, a message naming `field`, nothing written. */
static void expect(const char *rule, ccv1d_status got, ccv1d_status want, const char *field) {
  const char *msg = ccv1d_last_error();
  int ok = got == want;
  if (want != CCV1D_OK) ok = ok && msg && msg[0] && (!field || strstr(msg, field));
  int same = memcmp(before, &arena, sizeof arena) == 0;
  if (want != CCV1D_OK) ok = ok && same;
  printf("%-44s -> %-12s %s%s%s\n", rule, ccv1d_status_string(got), msg, same || want == CCV1D_OK ? "" : " [BUFFERS CHANGED]",
         ok ? "" : "  <-- FAIL");
  if (!ok) {
    failures++;
    fprintf(stderr, "FAIL %s: got %s, want %s (field %s): %s\n", rule, ccv1d_status_string(got),
            ccv1d_status_string(want), field ? field : "-", msg);
  }
  checks++;
  memcpy(before, &arena, sizeof arena);
}

/* Change an input in place outside of a checked call (then it is the new reference). */
static void poke(int32_t *at, int32_t v) {
  *at = v;
  memcpy(before, &arena, sizeof arena);
}

#define FWD(rule, edit, want, field)            \
  do {                                          \
    ccv1d_fwd_params p = fwd_ok();              \
    edit;                                       \
    expect(rule, ccv1d_fwd(&p, NULL), want, field); \
  } while (0)
#define PACKED(rule, edit, want, field)         \
  do {                                          \
    ccv1d_fwd_params p = fwd_packed_ok();       \
    edit;                                       \
    expect(rule, ccv1d_fwd(&p, NULL), want, field); \
  } while (0)
#define BWD(rule, edit, want, field)            \
  do {                                          \
    ccv1d_bwd_params g = bwd_ok();              \
    edit;                                       \
    expect(rule, ccv1d_bwd(&g, NULL), want, field); \
  } while (0)
#define UPD(rule, edit, want, field)            \
  do {                                          \
    ccv1d_update_params u = update_ok();        \
    edit;                                       \
    expect(rule, ccv1d_update(&u, NULL), want, field); \
  } while (0)

static void status_strings(void) {
  static const ccv1d_status known[] = {CCV1D_OK, CCV1D_ERR_NULL_POINTER, CCV1D_ERR_STRUCT_SIZE, CCV1D_ERR_DTYPE,
                                       CCV1D_ERR_ACTIVATION, CCV1D_ERR_BACKEND, CCV1D_ERR_WIDTH, CCV1D_ERR_DIM,
                                       CCV1D_ERR_OVERFLOW, CCV1D_ERR_SHAPE, CCV1D_ERR_CU_SEQLENS, CCV1D_ERR_OVERLAP,
                                       CCV1D_ERR_INDEX, CCV1D_ERR_WORKSPACE, CCV1D_ERR_NO_DEVICE,
                                       CCV1D_ERR_WRONG_DEVICE, CCV1D_ERR_DEVICE, CCV1D_ERR_OUT_OF_MEMORY,
                                       CCV1D_ERR_INTERNAL};
  size_t n = sizeof known / sizeof known[0];
  for (size_t a = 0; a < n; a++) {
    const char *s = ccv1d_status_string(known[a]);
    int ok = s && s[0] && strcmp(s, "UNKNOWN_STATUS") != 0;
    for (size_t b = 0; b < a; b++) ok = ok && strcmp(s, ccv1d_status_string(known[b])) != 0;
    printf("status_string(%d) = %s\n", known[a], s);
    if (!ok) failures++, fprintf(stderr, "FAIL status_string(%d) = %s\n", known[a], s);
    checks++;
  }
  static const ccv1d_status unknown[] = {-1, 14, 19, 24, 98, 100, INT32_MIN, INT32_MAX};
  for (size_t a = 0; a < sizeof unknown / sizeof unknown[0]; a++) {
    const char *s = ccv1d_status_string(unknown[a]);
    if (strcmp(s, "UNKNOWN_STATUS") != 0) failures++, fprintf(stderr, "FAIL status_string(%d) = %s\n", unknown[a], s);
    checks++;
  }
}

int main(void) {
  setup();
  memcpy(before, &arena, sizeof arena);

  /* The bases are valid (outputs may change: refresh the snapshot after each). */
  FWD("valid forward (base of the fwd rules)", (void)0, CCV1D_OK, NULL);
  PACKED("valid packed forward", (void)0, CCV1D_OK, NULL);
  BWD("valid backward", (void)0, CCV1D_OK, NULL);
  UPD("valid update", (void)0, CCV1D_OK, NULL);
  if (ccv1d_last_error()[0]) failures++, fprintf(stderr, "FAIL last_error not empty after OK\n");

  /* NULL_POINTER */
  expect("fwd(NULL)", ccv1d_fwd(NULL, NULL), CCV1D_ERR_NULL_POINTER, "ccv1d_fwd_params");
  expect("bwd(NULL)", ccv1d_bwd(NULL, NULL), CCV1D_ERR_NULL_POINTER, "ccv1d_bwd_params");
  expect("update(NULL)", ccv1d_update(NULL, NULL), CCV1D_ERR_NULL_POINTER, "ccv1d_update_params");
  {
    size_t bytes = 12345;
    ccv1d_bwd_params g = bwd_ok();
    expect("bwd_workspace_size(NULL, &bytes)", ccv1d_bwd_workspace_size(NULL, &bytes), CCV1D_ERR_NULL_POINTER, "ccv1d_bwd_params");
    expect("bwd_workspace_size(&g, NULL)", ccv1d_bwd_workspace_size(&g, NULL), CCV1D_ERR_NULL_POINTER, "bytes");
    if (bytes != 12345) failures++, fprintf(stderr, "FAIL bytes written on error\n");
  }
  FWD("fwd x.data NULL", p.x.data = NULL, CCV1D_ERR_NULL_POINTER, "x.data");
  FWD("fwd weight.data NULL", p.weight.data = NULL, CCV1D_ERR_NULL_POINTER, "weight.data");
  FWD("fwd out.data NULL", p.out.data = NULL, CCV1D_ERR_NULL_POINTER, "out.data");
  BWD("bwd dout.data NULL", g.dout.data = NULL, CCV1D_ERR_NULL_POINTER, "dout.data");
  BWD("bwd dx.data NULL", g.dx.data = NULL, CCV1D_ERR_NULL_POINTER, "dx.data");
  BWD("bwd dweight.data NULL", g.dweight.data = NULL, CCV1D_ERR_NULL_POINTER, "dweight.data");
  UPD("update conv_state.data NULL", u.conv_state.data = NULL, CCV1D_ERR_NULL_POINTER, "conv_state.data");
  expect("device_count(NULL)", ccv1d_device_count(NULL), CCV1D_ERR_NULL_POINTER, "count");
  expect("malloc(NULL, 16)", ccv1d_malloc(NULL, 16), CCV1D_ERR_NULL_POINTER, "ptr");
  expect("memcpy(NULL, x, 4)", ccv1d_memcpy(NULL, x, 4, NULL), CCV1D_ERR_NULL_POINTER, "dst");
  expect("memcpy(x, NULL, 4)", ccv1d_memcpy(x, NULL, 4, NULL), CCV1D_ERR_NULL_POINTER, "src");

  /* STRUCT_SIZE */
  FWD("fwd struct_size - 1", p.struct_size -= 1, CCV1D_ERR_STRUCT_SIZE, "struct_size");
  FWD("fwd struct_size 0", p.struct_size = 0, CCV1D_ERR_STRUCT_SIZE, "struct_size");
  BWD("bwd struct_size + 8", g.struct_size += 8, CCV1D_ERR_STRUCT_SIZE, "struct_size");
  UPD("update struct_size = sizeof(fwd params)", u.struct_size = sizeof(ccv1d_fwd_params), CCV1D_ERR_STRUCT_SIZE, "struct_size");

  /* DTYPE */
  FWD("fwd x.dtype 99", p.x.dtype = 99, CCV1D_ERR_DTYPE, "x.dtype");
  FWD("fwd weight.dtype I32", p.weight.dtype = CCV1D_DTYPE_I32, CCV1D_ERR_DTYPE, "weight.dtype");
  FWD("fwd out.dtype F16 (x is F32)", p.out.dtype = CCV1D_DTYPE_F16, CCV1D_ERR_DTYPE, "out.dtype");
  FWD("fwd initial_states.dtype BF16", p.initial_states.dtype = CCV1D_DTYPE_BF16, CCV1D_ERR_DTYPE, "initial_states.dtype");
  PACKED("fwd cu_seqlens.dtype F32", p.cu_seqlens.dtype = CCV1D_DTYPE_F32, CCV1D_ERR_DTYPE, "cu_seqlens.dtype");
  PACKED("fwd has_initial_state.dtype F16", (p.has_initial_state = i32(slot_of_seq), p.has_initial_state.dtype = CCV1D_DTYPE_F16),
         CCV1D_ERR_DTYPE, "has_initial_state.dtype");
  BWD("bwd dbias.dtype BOOL", g.dbias.dtype = CCV1D_DTYPE_BOOL, CCV1D_ERR_DTYPE, "dbias.dtype");
  UPD("update conv_state_indices.dtype BOOL", u.conv_state_indices.dtype = CCV1D_DTYPE_BOOL, CCV1D_ERR_DTYPE, "conv_state_indices.dtype");

  /* ACTIVATION, BACKEND, WIDTH */
  FWD("fwd activation 2", p.activation = 2, CCV1D_ERR_ACTIVATION, "activation");
  UPD("update activation -1", u.activation = -1, CCV1D_ERR_ACTIVATION, "activation");
  FWD("fwd backend 3", p.backend = 3, CCV1D_ERR_BACKEND, "backend");
  BWD("bwd backend -1", g.backend = -1, CCV1D_ERR_BACKEND, "backend");
  FWD("fwd width 0", p.width = 0, CCV1D_ERR_WIDTH, "width");
  FWD("fwd width 9", p.width = 9, CCV1D_ERR_WIDTH, "width");
  UPD("update width -3", u.width = -3, CCV1D_ERR_WIDTH, "width");

  /* DIM */
  FWD("fwd batch -1", p.batch = -1, CCV1D_ERR_DIM, "batch");
  FWD("fwd dim -1", p.dim = -1, CCV1D_ERR_DIM, "dim");
  BWD("bwd seqlen -1", g.seqlen = -1, CCV1D_ERR_DIM, "seqlen");
  FWD("fwd num_state_slots -1", p.num_state_slots = -1, CCV1D_ERR_DIM, "num_state_slots");
  PACKED("fwd num_seqs -1 (packed)", p.num_seqs = -1, CCV1D_ERR_DIM, "num_seqs");
  UPD("update seqlen 0", u.seqlen = 0, CCV1D_ERR_DIM, "seqlen");
  UPD("update state_len -1", u.state_len = -1, CCV1D_ERR_DIM, "state_len");

  /* OVERFLOW */
  FWD("fwd batch*dim*seqlen > INT64_MAX", (p.batch = INT64_MAX / 2, p.dim = 4), CCV1D_ERR_OVERFLOW, "batch*dim*seqlen");
  FWD("fwd x.stride[0] = INT64_MAX", p.x.stride[0] = INT64_MAX, CCV1D_ERR_OVERFLOW, "x");
  PACKED("fwd num_seqs = INT64_MAX (packed)", p.num_seqs = INT64_MAX, CCV1D_ERR_OVERFLOW, "cu_seqlens");
  UPD("update num_state_slots*dim*state_len", u.num_state_slots = INT64_MAX / 2, CCV1D_ERR_OVERFLOW, "num_state_slots");

  /* SHAPE */
  FWD("fwd x.stride[2] negative", p.x.stride[2] = -1, CCV1D_ERR_SHAPE, "x.stride[2]");
  PACKED("fwd cu_seqlens with batch 2", p.batch = 2, CCV1D_ERR_SHAPE, "cu_seqlens");
  FWD("fwd num_state_slots < batch", p.num_state_slots = 1, CCV1D_ERR_SHAPE, "num_state_slots");
  BWD("bwd dbias without bias", g.bias.data = NULL, CCV1D_ERR_SHAPE, "dbias");
  BWD("bwd dinitial_states without initial_states", g.dinitial_states = f32(states, D * K, K, 1), CCV1D_ERR_SHAPE, "dinitial_states");
  UPD("update state_len < width-1", u.state_len = K - 1, CCV1D_ERR_SHAPE, "state_len");

  /* CU_SEQLENS */
  PACKED("fwd cu_seqlens[0] = 1", poke(&cu[0], 1), CCV1D_ERR_CU_SEQLENS, "cu_seqlens[0]");
  poke(&cu[0], 0);
  PACKED("fwd cu_seqlens decreasing", poke(&cu[1], -1), CCV1D_ERR_CU_SEQLENS, "cu_seqlens");
  poke(&cu[1], 2);
  PACKED("fwd cu_seqlens[num_seqs] != seqlen", p.seqlen = L - 1, CCV1D_ERR_CU_SEQLENS, "cu_seqlens[num_seqs]");

  /* OVERLAP */
  FWD("fwd out = x", p.out = p.x, CCV1D_ERR_OVERLAP, "out");
  FWD("fwd final_states shifted over initial_states", p.final_states = f32(states + 1, D * K, K, 1), CCV1D_ERR_OVERLAP, "final_states");
  BWD("bwd dx = dout", g.dx = g.dout, CCV1D_ERR_OVERLAP, "dx");
  UPD("update conv_state over x", u.conv_state = f32(ux, D * SL, SL, 1), CCV1D_ERR_OVERLAP, "conv_state");

  /* INDEX */
  PACKED("fwd state_indices[0] = num_state_slots", poke(&slot_of_seq[0], SLOTS), CCV1D_ERR_INDEX, "state_indices[0]");
  poke(&slot_of_seq[0], 1);
  UPD("update conv_state_indices[0] = 7", poke(&slot_of_row[0], 7), CCV1D_ERR_INDEX, "conv_state_indices[0]");
  poke(&slot_of_row[0], 1);

  /* WORKSPACE is a GPU rule: on the CPU the size is 0 and any workspace is accepted. */
  {
    size_t bytes = 777;
    ccv1d_bwd_params g = bwd_ok();
    expect("bwd_workspace_size (CPU)", ccv1d_bwd_workspace_size(&g, &bytes), CCV1D_OK, NULL);
    if (bytes != 0) failures++, fprintf(stderr, "FAIL CPU workspace size %zu\n", bytes);
    g.workspace = take(16), g.workspace_size = 1;
    expect("bwd with a 1-byte workspace (CPU)", ccv1d_bwd(&g, NULL), CCV1D_OK, NULL);
  }

  /* NO_DEVICE without a GPU; WRONG_DEVICE (host pointers) with one. */
  int count = -1;
  ccv1d_status dc = ccv1d_device_count(&count);
  if (dc != CCV1D_OK || count <= 0) {
    expect("device_count(&n)", dc, CCV1D_ERR_NO_DEVICE, NULL);
    FWD("fwd backend GPU", p.backend = CCV1D_BACKEND_GPU, CCV1D_ERR_NO_DEVICE, "backend");
    BWD("bwd backend GPU", g.backend = CCV1D_BACKEND_GPU, CCV1D_ERR_NO_DEVICE, "backend");
    UPD("update backend GPU", u.backend = CCV1D_BACKEND_GPU, CCV1D_ERR_NO_DEVICE, "backend");
    {
      size_t bytes = 777;
      ccv1d_bwd_params g = bwd_ok();
      g.backend = CCV1D_BACKEND_GPU;
      expect("bwd_workspace_size backend GPU", ccv1d_bwd_workspace_size(&g, &bytes), CCV1D_ERR_NO_DEVICE, "backend");
    }
    void *ptr = NULL;
    expect("malloc(&p, 16)", ccv1d_malloc(&ptr, 16), CCV1D_ERR_NO_DEVICE, NULL);
    expect("free(host pointer)", ccv1d_free(x), CCV1D_ERR_NO_DEVICE, NULL);
    expect("memcpy(host, host, 4)", ccv1d_memcpy(out, x, 4, NULL), CCV1D_ERR_NO_DEVICE, NULL);
    expect("synchronize(NULL)", ccv1d_synchronize(NULL), CCV1D_ERR_NO_DEVICE, NULL);
  } else {
    printf("(%d GPU(s): GPU backend with host pointers must be WRONG_DEVICE)\n", count);
    FWD("fwd backend GPU, host pointers", p.backend = CCV1D_BACKEND_GPU, CCV1D_ERR_WRONG_DEVICE, "x");
  }
  expect("free(NULL) is a no-op", ccv1d_free(NULL), CCV1D_OK, NULL);
  expect("memcpy of 0 bytes is a no-op", ccv1d_memcpy(NULL, NULL, 0, NULL), CCV1D_OK, NULL);

  status_strings();
  printf("errors.c: %d checks, %d failures: %s\n", checks, failures, failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
