// Small kernels: decode update, final states (forward), dinitial_states (backward), and the
// fixed-order reduction of the dweight/dbias partials.
#include "instances.h"

// Euclidean a mod m (m > 0)
CCV_DEV int64_t emod(int64_t a, int64_t m) {
  int64_t r = a % m;
  return r < 0 ? r + m : r;
}

// ---------------------------------------------------------------- update (decode)
// Thread = (channel d, P.chunk consecutive batch rows): the weights and bias are loaded once per
// thread and reused for its rows (kernels.rs groups rows only when the grid has more than a wave
// of blocks anyway). Per row: reads the K previous inputs from conv_state, updates the state
// (shift, or circular writes with cache_seqlens) reading x before any output is written, then
// produces the S outputs with a sliding window in registers: out may be x (in place).
template <typename T, int W>
CCV_DEV void update_row(const ccv_params& P, int64_t b, int64_t d, const float* w, float bias) {
  constexpr int K = W - 1;
  const int f = P.flags;
  const int64_t S = P.seqlen, sl = P.state_len;
  const int64_t xrow = b * P.x_s[0] + d * P.x_s[1], xs = P.x_s[2];
  const int64_t orow = b * P.out_s[0] + d * P.out_s[1], os = P.out_s[2];
  const int64_t slot = (f & CCV_F_STATE_IDX) ? (int64_t)P.state_idx[b * P.si_s] : b;
  if (slot < 0 || slot >= P.num_slots) {  // padding row (or a slot out of range): out = 0, state untouched
    for (int64_t s = 0; s < S; ++s) stf<T>(P.out, orow + s * os, 0.f);
    return;
  }
  const int64_t crow = slot * P.cs_s[0] + d * P.cs_s[1], cs = P.cs_s[2];
  float win[K > 0 ? K : 1];
  const bool silu = f & CCV_F_SILU;
  if (S == 1 && sl >= K && !(f & CCV_F_CACHE_SEQLENS)) {
    // The decode step: one token, state shifted by one. Each state element is read once.
    const float xv = ldf<T>(P.x, xrow);
#pragma unroll
    for (int j = 0; j < K; ++j) win[j] = ldf<T>(P.conv_state, crow + (sl - K + j) * cs);
    // positions [0, sl - max(K, 1)) take old[j + 1]; [sl - K, sl - 1) the window; sl - 1 takes x
    constexpr int KS = K > 0 ? K : 1;
    for (int64_t j = 0; j + KS < sl; ++j) stf<T>(P.conv_state, crow + j * cs, ldf<T>(P.conv_state, crow + (j + 1) * cs));
#pragma unroll
    for (int j = 1; j < K; ++j) stf<T>(P.conv_state, crow + (sl - K + j - 1) * cs, win[j]);
    if (sl > 0) stf<T>(P.conv_state, crow + (sl - 1) * cs, xv);
    float acc = bias + w[K] * xv;
#pragma unroll
    for (int k = 0; k < K; ++k) acc += w[k] * win[k];
    stf<T>(P.out, orow, act_f(acc, silu));
    return;
  }
  if (sl <= 0) {
    // state_len = 0 (width 1): no state to read or write
  } else if (f & CCV_F_CACHE_SEQLENS) {
    const int64_t c = P.cache_seqlens[b * P.csl_s];
    int64_t idx = emod(c - K, sl);
#pragma unroll
    for (int j = 0; j < K; ++j) {
      win[j] = ldf<T>(P.conv_state, crow + idx * cs);
      if (++idx == sl) idx = 0;
    }
    idx = emod(c, sl);
    for (int64_t s = 0; s < S; ++s) {  // later s wins
      stf<T>(P.conv_state, crow + idx * cs, ldf<T>(P.x, xrow + s * xs));
      if (++idx == sl) idx = 0;
    }
  } else {
#pragma unroll
    for (int j = 0; j < K; ++j) win[j] = ldf<T>(P.conv_state, crow + (sl - K + j) * cs);
    for (int64_t j = 0; j < sl; ++j) {  // state = concat(state, x)[S:], ascending (in-place safe)
      const float v = j + S < sl ? ldf<T>(P.conv_state, crow + (j + S) * cs) : ldf<T>(P.x, xrow + (j + S - sl) * xs);
      stf<T>(P.conv_state, crow + j * cs, v);
    }
  }
  for (int64_t s = 0; s < S; ++s) {
    const float xv = ldf<T>(P.x, xrow + s * xs);
    float acc = bias + w[K] * xv;
#pragma unroll
    for (int k = 0; k < K; ++k) acc += w[k] * win[k];
#pragma unroll
    for (int k = 0; k + 1 < K; ++k) win[k] = win[k + 1];
    if (K > 0) win[K > 0 ? K - 1 : 0] = xv;
    stf<T>(P.out, orow + s * os, act_f(acc, silu));
  }
}

template <typename T, int W>
CCV_DEV void update_body(const ccv_params& P) {
  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const uint32_t nct = (uint32_t)P.n_ctiles;
  const int64_t d = (int64_t)(blk % nct) * CCV_NT_update + threadIdx.x;
  if (d >= P.dim) return;
  const int64_t b0 = (int64_t)(blk / nct) * P.chunk;
  const int64_t b1 = min(P.batch, b0 + P.chunk);
  float w[W], bias;
  load_weights<W>(P, d, w, bias);
  for (int64_t b = b0; b < b1; ++b) update_row<T, W>(P, b, d, w, bias);
}

// ---------------------------------------------------------------- states
// Thread = (sequence i, channel d). Launched after the main kernel, so a pool used as both
// initial_states and final_states is read (here and by the main kernel) before it is written,
// and each thread reads its whole row before writing it.
CCV_DEV bool states_thread(const ccv_params& P, int64_t& i, int64_t& d) {
  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return false;
  const uint32_t nct = (uint32_t)P.n_ctiles;
  i = blk / nct;
  d = (int64_t)(blk % nct) * CCV_NT_fwd_states + threadIdx.x;
  return d < P.dim && i < P.num_seqs;
}

template <typename T, int W>
CCV_DEV void fwd_states_w(const ccv_params& P, int64_t i, int64_t d) {
  constexpr int K = W - 1;
  const Seg g = seg_by_index(P, i);
  if (!g.valid) return;
  const int64_t b = (P.flags & CCV_F_PACKED) ? 0 : i;
  const bool seq = P.flags & CCV_F_SEQ_IDX;
  const int64_t len = g.e - g.s;
  const int64_t idl = (seq && len > 0) ? seqid(P, b, g.e - 1) : 0;
  float v[K];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int64_t p = g.e - K + j;
    float val = 0.f;
    if (p >= g.s) {
      if (!seq || (idl >= 0 && seqid(P, b, p) == idl)) val = ldf<T>(P.x, xoff(P, b, d, p));
    } else {
      bool ok = g.init;
      if (ok && seq && len > 0) ok = idl >= 0 && seqid(P, b, g.s) == idl;
      if (ok) val = ldf<T>(P.init, g.slot * P.init_s[0] + d * P.init_s[1] + (p - g.s + K) * P.init_s[2]);
    }
    v[j] = val;
  }
#pragma unroll
  for (int j = 0; j < K; ++j) stf<T>(P.final_st, g.slot * P.final_s[0] + d * P.final_s[1] + j * P.final_s[2], v[j]);
}

template <typename T, int W>
CCV_DEV void bwd_states_w(const ccv_params& P, int64_t i, int64_t d) {
  constexpr int K = W - 1;
  const Seg g = seg_by_index(P, i);
  if (!g.valid) return;
  const int64_t o = g.slot * P.dinit_s[0] + d * P.dinit_s[1];
  if (!g.init) {  // no initial state read: its gradient is 0
#pragma unroll
    for (int j = 0; j < K; ++j) stf<T>(P.dinit, o + j * P.dinit_s[2], 0.f);
    return;
  }
  const int64_t b = (P.flags & CCV_F_PACKED) ? 0 : i;
  const bool seq = P.flags & CCV_F_SEQ_IDX;
  const int64_t len = g.e - g.s;
  WArr<W> wa;
  float bias;
  load_weights<W>(P, d, wa.w, bias);
  float gq[K];  // g at the first K tokens; 0 past the end or for another seq_idx id
  const int64_t id0 = (seq && len > 0) ? seqid(P, b, g.s) : 0;
#pragma unroll 1
  for (int m = 0; m < K; ++m) {  // one call site (AMD inlines every call)
    float gm = 0.f;
    if (m < len && (!seq || seqid(P, b, g.s + m) == id0)) gm = grad_generic<T, W>(P, b, d, g.s + m, wa, bias);
    gq[m] = gm;
  }
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int64_t p = g.s - K + j;
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const int m = j - k;  // q = p + K - k = g.s + m
      if (m >= 0) acc += wa.w[k] * gq[m];
    }
    acc += dfinal_term<T>(P, g, b, d, p, K);
    stf<T>(P.dinit, o + j * P.dinit_s[2], acc);
  }
}

#define CCV_WIDTH_SWITCH(FN, T, ...)              \
  switch (P.width) {                              \
    case 2: FN<T, 2>(__VA_ARGS__); break;         \
    case 3: FN<T, 3>(__VA_ARGS__); break;         \
    case 4: FN<T, 4>(__VA_ARGS__); break;         \
    case 5: FN<T, 5>(__VA_ARGS__); break;         \
    case 6: FN<T, 6>(__VA_ARGS__); break;         \
    case 7: FN<T, 7>(__VA_ARGS__); break;         \
    case 8: FN<T, 8>(__VA_ARGS__); break;         \
    default: break; /* width 1: no states */      \
  }

template <typename T>
CCV_DEV void fwd_states_body(const ccv_params& P) {
  int64_t i, d;
  if (!states_thread(P, i, d)) return;
  CCV_WIDTH_SWITCH(fwd_states_w, T, P, i, d)
}

template <typename T>
CCV_DEV void bwd_states_body(const ccv_params& P) {
  int64_t i, d;
  if (!states_thread(P, i, d)) return;
  CCV_WIDTH_SWITCH(bwd_states_w, T, P, i, d)
}

// ---------------------------------------------------------------- dweight/dbias reduction
// Thread = (channel d, tap k), k = W: dbias. Sums ws[r, d, k] for r = 0..n_partials-1 in order
// (bitwise reproducible) and stores in the dweight/dbias dtypes. n_partials = 0 writes zeros.
CCV_DEV void bwd_reduce_body(const ccv_params& P) {
  const uint32_t W1 = (uint32_t)P.width + 1;
  const uint32_t n = (uint32_t)P.dim * W1;
  const uint32_t idx = block_linear() * CCV_NT_bwd_reduce + threadIdx.x;
  if (idx >= n) return;
  const uint32_t d = idx / W1, k = idx % W1;
  if (k + 1 == W1 && !(P.flags & CCV_F_DBIAS)) return;
  float s = 0.f;
  const float* src = P.ws + idx;
  for (int64_t r = 0; r < P.n_partials; ++r) s += src[r * (int64_t)n];
  if (k + 1 < W1) st_dt(P.dweight, d * P.dw_s[0] + k * P.dw_s[1], P.dw_dtype, s);
  else st_dt(P.dbias, d * P.dbias_s, P.db_dtype, s);
}

CCV_INSTANTIATE_W(update)
CCV_INSTANTIATE_D(fwd_states)
CCV_INSTANTIATE_D(bwd_states)
CCV_EXTERN_KERNEL void CCV_LAUNCH_BOUNDS(CCV_NT_bwd_reduce) ccv1d_bwd_reduce(CCV_GRID_CONST ccv_params P) { bwd_reduce_body(P); }

// ---------------------------------------------------------------- copy (bench ceiling only)
// `seqlen` 16-byte vectors, grid-stride, one 16-byte load and store per thread per step: the
// device-copy reference `ccv1d bench` puts beside the driver's memcpy.
// x = src, out = dst (both 16-byte aligned).
CCV_EXTERN_KERNEL void CCV_LAUNCH_BOUNDS(256) ccv1d_copy16(CCV_GRID_CONST ccv_params P) {
  const ccv_vec16* src = (const ccv_vec16*)P.x;
  ccv_vec16* dst = (ccv_vec16*)P.out;
  const int64_t n = P.seqlen;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = src[i];
}
