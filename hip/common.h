// common.h — device helpers shared by all kernels: dtype traits, 16-byte vector load/store,
// run-time-dtype loads, sequence/segment resolution (rows, seq_idx, packed varlen + slot pool),
// and the generic per-element math of docs/semantics.md (the scalar reference path every fast
// path falls back to at sequence boundaries).
#pragma once
#include "compat.h"
#include "kparams.h"

// Everything here has internal linkage (anonymous namespace): with relocatable device code
// (the NVIDIA build links several files) that lets ptxas allocate registers across the
// out-of-line helpers as in a whole-program build.
namespace {

#define CCV_DEV __device__ __forceinline__
// The generic (boundary) path is called from one place per kernel and kept out of line so the fast
// path stays small; weights travel by value (a struct of W floats), never through local memory.
#define CCV_SLOW __device__ __noinline__
template <int W> struct WArr { float w[W]; };

// ------------------------------------------------------------------ dtype traits
template <typename T> struct Tr;
template <> struct Tr<float> {
  static constexpr int V = 4;  // elements per 16-byte vector
  static CCV_DEV float to_f(float v) { return v; }
  static CCV_DEV float from_f(float v) { return v; }
  static CCV_DEV void unpack(const ccv_vec16& r, float* f) {
    f[0] = ccv_u2f(r.x); f[1] = ccv_u2f(r.y); f[2] = ccv_u2f(r.z); f[3] = ccv_u2f(r.w);
  }
  static CCV_DEV ccv_vec16 pack(const float* f) {
    ccv_vec16 r; r.x = ccv_f2u(f[0]); r.y = ccv_f2u(f[1]); r.z = ccv_f2u(f[2]); r.w = ccv_f2u(f[3]);
    return r;
  }
};
template <> struct Tr<ccv_f16> {
  static constexpr int V = 8;
  static CCV_DEV float to_f(ccv_f16 v) { return ccv_h2f(v.u); }
  static CCV_DEV ccv_f16 from_f(float v) { ccv_f16 r; r.u = ccv_f2h(v); return r; }
  static CCV_DEV void unpack2(uint32_t u, float* f) { f[0] = ccv_h2f((uint16_t)(u & 0xffffu)); f[1] = ccv_h2f((uint16_t)(u >> 16)); }
  static CCV_DEV uint32_t pack2(float a, float b) { return (uint32_t)ccv_f2h(a) | ((uint32_t)ccv_f2h(b) << 16); }
  static CCV_DEV void unpack(const ccv_vec16& r, float* f) { unpack2(r.x, f); unpack2(r.y, f + 2); unpack2(r.z, f + 4); unpack2(r.w, f + 6); }
  static CCV_DEV ccv_vec16 pack(const float* f) {
    ccv_vec16 r; r.x = pack2(f[0], f[1]); r.y = pack2(f[2], f[3]); r.z = pack2(f[4], f[5]); r.w = pack2(f[6], f[7]);
    return r;
  }
};
template <> struct Tr<ccv_bf16> {
  static constexpr int V = 8;
  static CCV_DEV float to_f(ccv_bf16 v) { return ccv_bf2f(v.u); }
  static CCV_DEV ccv_bf16 from_f(float v) { ccv_bf16 r; r.u = ccv_f2bf(v); return r; }
  static CCV_DEV void unpack2(uint32_t u, float* f) { f[0] = ccv_u2f(u << 16); f[1] = ccv_u2f(u & 0xffff0000u); }
  static CCV_DEV uint32_t pack2(float a, float b) { return (uint32_t)ccv_f2bf(a) | ((uint32_t)ccv_f2bf(b) << 16); }
  static CCV_DEV void unpack(const ccv_vec16& r, float* f) { unpack2(r.x, f); unpack2(r.y, f + 2); unpack2(r.z, f + 4); unpack2(r.w, f + 6); }
  static CCV_DEV ccv_vec16 pack(const float* f) {
    ccv_vec16 r; r.x = pack2(f[0], f[1]); r.y = pack2(f[2], f[3]); r.z = pack2(f[4], f[5]); r.w = pack2(f[6], f[7]);
    return r;
  }
};

// scalar element access with an int64 element offset
template <typename T> CCV_DEV float ldf(const void* base, int64_t off) { return Tr<T>::to_f(((const T*)base)[off]); }
template <typename T> CCV_DEV void stf(void* base, int64_t off, float v) { ((T*)base)[off] = Tr<T>::from_f(v); }
// 16-byte vector access: `off` is an element offset of a 16-byte aligned address
template <typename T> CCV_DEV void ldv(const void* base, int64_t off, float* f) {
  const ccv_vec16 r = ccv_ld16((const T*)base + off);
  Tr<T>::unpack(r, f);
}
template <typename T> CCV_DEV void stv(void* base, int64_t off, const float* f) {
  ccv_st16((T*)base + off, Tr<T>::pack(f));
}

// N = 4, 2 or 1 consecutive elements (channel-last streaming kernels, the decode step: N channels
// per thread): one access of 4*N (f32) or 2*N (16-bit) bytes, raw bits in registers until used.
template <typename T, int N> struct QN;
template <typename T> struct QN<T, 1> {  // any type: one element
  typedef T raw;
  static CCV_DEV raw ld(const T* p) { return *p; }
  static CCV_DEV void st(T* p, raw r) { *p = r; }
  static CCV_DEV void unpack(raw r, float* f) { f[0] = Tr<T>::to_f(r); }
  static CCV_DEV raw pack(const float* f) { return Tr<T>::from_f(f[0]); }
  static CCV_DEV raw zero() { return Tr<T>::from_f(0.f); }
};
template <typename T> struct QN<T, 4> {  // 16-bit types
  typedef uint2 raw;
  static CCV_DEV raw ld(const T* p) { return ccv_ld8(p); }
  static CCV_DEV void st(T* p, raw r) { ccv_st8(p, r); }
  static CCV_DEV void unpack(raw r, float* f) { Tr<T>::unpack2(r.x, f); Tr<T>::unpack2(r.y, f + 2); }
  static CCV_DEV raw pack(const float* f) { raw r; r.x = Tr<T>::pack2(f[0], f[1]); r.y = Tr<T>::pack2(f[2], f[3]); return r; }
  static CCV_DEV raw zero() { return make_uint2(0u, 0u); }
};
template <typename T> struct QN<T, 2> {  // 16-bit types
  typedef uint32_t raw;
  static CCV_DEV raw ld(const T* p) { return *(const uint32_t*)p; }
  static CCV_DEV void st(T* p, raw r) { *(uint32_t*)p = r; }
  static CCV_DEV void unpack(raw r, float* f) { Tr<T>::unpack2(r, f); }
  static CCV_DEV raw pack(const float* f) { return Tr<T>::pack2(f[0], f[1]); }
  static CCV_DEV raw zero() { return 0u; }
};
template <> struct QN<float, 4> {
  typedef ccv_vec16 raw;
  static CCV_DEV raw ld(const float* p) { return ccv_ld16(p); }
  static CCV_DEV void st(float* p, raw r) { ccv_st16(p, r); }
  static CCV_DEV void unpack(raw r, float* f) { Tr<float>::unpack(r, f); }
  static CCV_DEV raw pack(const float* f) { return Tr<float>::pack(f); }
  static CCV_DEV raw zero() { return make_uint4(0u, 0u, 0u, 0u); }
};
template <> struct QN<float, 2> {
  typedef uint2 raw;
  static CCV_DEV raw ld(const float* p) { return ccv_ld8(p); }
  static CCV_DEV void st(float* p, raw r) { ccv_st8(p, r); }
  static CCV_DEV void unpack(raw r, float* f) { f[0] = ccv_u2f(r.x); f[1] = ccv_u2f(r.y); }
  static CCV_DEV raw pack(const float* f) { return make_uint2(ccv_f2u(f[0]), ccv_f2u(f[1])); }
  static CCV_DEV raw zero() { return make_uint2(0u, 0u); }
};

// A channel-last walk's window before token s0: the raw x(s0-K .. s0-1) (K = W - 1) of CV
// channels at xp + p * xt into raw[1..K], where p >= 0 (zero for p < 0 and for a thread without
// channels, !own), every load issued before any is used: an unpack right after its load waited
// for it before the next load went out, a round trip per window token at each block's start
// (H100, docs/perf.md session 26). The caller unpacks them (and fills p < 0 from the row's halo).
// Token indices in the caller's type I (32-bit where it keeps them so).
template <typename T, int W, int CV, typename I>
CCV_DEV void window_loads(const T* xp, int64_t xt, I s0, bool own, typename QN<T, CV>::raw (&raw)[W]) {
#pragma unroll
  for (int k = 1; k < W; ++k) {
    const I p = s0 - W + k;
    raw[k] = own && p >= 0 ? QN<T, CV>::ld(xp + (int64_t)p * xt) : QN<T, CV>::zero();
  }
}

// run-time dtype (weight, bias, dweight, dbias)
CCV_DEV float ld_dt(const void* base, int64_t off, int dt) {
  switch (dt) {
    case CCV_DT_F16: return ldf<ccv_f16>(base, off);
    case CCV_DT_BF16: return ldf<ccv_bf16>(base, off);
    default: return ldf<float>(base, off);
  }
}
CCV_DEV void st_dt(void* base, int64_t off, int dt, float v) {
  switch (dt) {
    case CCV_DT_F16: stf<ccv_f16>(base, off, v); break;
    case CCV_DT_BF16: stf<ccv_bf16>(base, off, v); break;
    default: stf<float>(base, off, v); break;
  }
}

// ------------------------------------------------------------------ activation
// fast exp (ex2.approx of z*log2(e): about 1e-6 relative for |z| < 16, and there sigma or its
// complement is tiny) and the fast 2-ulp divide; no IEEE slow-path calls in the hot loops.
// Saturation (docs/semantics.md) without branches: below z = -88 σ is 0 (the fast divide returns 0
// for a denominator above 2^126), so clamping the other factor's z to [-88, 88] turns the
// -inf·0 / inf·0 of the formulas at ±inf into silu = -0, silu' = -0 (z < -88) or 1 (z > 88);
// a NaN z still gives NaN through σ (fmaxf/fminf drop NaN, σ does not).
CCV_DEV float sigmoidf_(float z) { return __fdividef(1.f, 1.f + ccv_exp_neg(z)); }
CCV_DEV float act_f(float z, bool silu) { return silu ? fmaxf(z, -88.f) * sigmoidf_(z) : z; }
// dout * act'(z)
CCV_DEV float act_grad(float z, float dy, bool silu) {
  if (!silu) return dy;
  const float s = sigmoidf_(z), zc = fminf(fmaxf(z, -88.f), 88.f);
  return dy * (s * (1.f + zc * (1.f - s)));
}

// act_grad with SiLU, without its clamp of z: two instructions an element fewer. The clamp
// matters only for z = ±inf (inf * 0 in the formula), where this gives NaN; for finite z both
// give the same value (NVIDIA flushes to zero: past |z| = 88 σ is exactly 0 or 1 either way; AMD
// keeps denormals, so below z = -87 the two may differ by a denormal). A backward kernel using it
// (bwd_pt; bwd_cfw through silu_grad_fma) runs a block with it and, when any thread's sum of g is
// NaN (z = ±inf, or a NaN input), runs the block again with act_grad, overwriting all it stored
// (a second pass rather than a branch around each run: the branch kept more values live and
// spilled).
CCV_DEV float silu_grad_fast(float z, float dy) {
  const float s = sigmoidf_(z);
  return dy * (s * (1.f + z * (1.f - s)));
}
// silu_grad_fast with s (1 + z (1 - s)) as two FMAs, one instruction an element fewer (z = ±inf:
// NaN as well). bwd_cfw takes it (H100, bf16 4x5376x4096 SiLU, docs/perf.md session 31: W = 8
// 205.1 -> 203.6 us, W = 7 196.8 -> 195.1, W = 6 187.5 -> 185.9, W = 4 even); bwd_pt keeps
// silu_grad_fast (4x4096x512 21.1 -> 21.5 with this one).
CCV_DEV float silu_grad_fma(float z, float dy) {
  const float s = sigmoidf_(z);
  return dy * fmaf(s, fmaf(-z, s, z), s);
}

// A compile-time bool as a value (C++17 generic lambdas take it as `auto`): hot loops are
// instantiated per activation instead of testing the flag per element.
template <bool B> struct BoolC { static constexpr bool value = B; };

// ------------------------------------------------------------------ weights
// Raw bits first, converted after every load has been issued: one memory round trip for the W
// weights and the bias instead of one per value (ld_dt's dtype branch around each load kept them
// apart: a block's setup waited five round trips before its first tile; H100 ncu, docs/perf.md).
CCV_DEV uint32_t ld_bits_dt(const void* base, int64_t off, int dt) {
  return dt == CCV_DT_F32 ? ((const uint32_t*)base)[off] : (uint32_t)((const uint16_t*)base)[off];
}
CCV_DEV float bits_to_f(uint32_t u, int dt) {
  return dt == CCV_DT_F32 ? ccv_u2f(u) : dt == CCV_DT_BF16 ? ccv_bf2f((uint16_t)u) : ccv_h2f((uint16_t)u);
}
// The weights and bias of channels d0 .. d0 + C - 1 (those from `n` on get 0): every load is
// issued before the first conversion. A conversion (a branch per run-time dtype) between two
// channels' loads made them C memory round trips one after the other (the decode step's 4).
// load_weight_bits issues the loads, weights_from_bits converts: a kernel can issue its data
// loads between the two, so the weights' round trip and the data's overlap.
template <int W, int C> struct WeightBits {
  uint32_t u[C][W + 1];
  bool has_bias;
};
template <int W, int C>
CCV_DEV void load_weight_bits(const ccv_params& P, int64_t d0, int n, WeightBits<W, C>& wb) {
  // (ld_bits_dt written out: calling it here changed bwd_cf's SASS, a version not timed)
  const bool f32w = P.w_dtype == CCV_DT_F32, has_bias = P.flags & CCV_F_BIAS;
  wb.has_bias = has_bias;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const bool on = c < n;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const int64_t off = (d0 + c) * P.w_s[0] + k * P.w_s[1];
      wb.u[c][k] = !on ? 0u : f32w ? ((const uint32_t*)P.weight)[off] : (uint32_t)((const uint16_t*)P.weight)[off];
    }
    wb.u[c][W] = on && has_bias ? ld_bits_dt(P.bias, (d0 + c) * P.bias_s, P.b_dtype) : 0u;
  }
}
// N weight or bias elements' raw bits at a (f32 or 16-bit), in one access (N = 1, 2, 4)
template <int N>
CCV_DEV void ld_bits_vec(uintptr_t a, bool f32, uint32_t* o) {
  if constexpr (N == 1) {
    o[0] = f32 ? *(const uint32_t*)a : (uint32_t)*(const uint16_t*)a;
  } else if (f32) {
    if constexpr (N == 4) {
      const ccv_vec16 v = ccv_ld16((const void*)a);
      o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
    } else {
      const uint2 v = ccv_ld8((const void*)a);
      o[0] = v.x, o[1] = v.y;
    }
  } else if constexpr (N == 4) {
    const uint2 v = ccv_ld8((const void*)a);
    o[0] = v.x & 0xffffu, o[1] = v.x >> 16, o[2] = v.y & 0xffffu, o[3] = v.y >> 16;
  } else {
    const uint32_t v = *(const uint32_t*)a;
    o[0] = v & 0xffffu, o[1] = v >> 16;
  }
}
// load_weight_bits for C = 4, 2 or 1 channels (d0 a multiple of C) whose weights are whole
// contiguous rows and bias contiguous (CCV_F_W_ROWS, checked on the host): W vector loads of C
// elements and one for the bias instead of C W + C scalar ones. Any other layout takes
// load_weight_bits.
template <int W, int C>
CCV_DEV void load_weight_bits_rows(const ccv_params& P, int64_t d0, WeightBits<W, C>& wb) {
  static_assert(C == 4 || C == 2 || C == 1, "vector weight loads of 4, 2 or 1 elements");
  const bool f32w = P.w_dtype == CCV_DT_F32, f32b = P.b_dtype == CCV_DT_F32;
  const bool has_bias = P.flags & CCV_F_BIAS;
  const uintptr_t wa = (uintptr_t)P.weight, ba = (uintptr_t)P.bias;
  if (!(P.flags & CCV_F_W_ROWS)) {
    load_weight_bits<W, C>(P, d0, C, wb);
    return;
  }
  wb.has_bias = has_bias;
  uint32_t e[C * W + C];  // the C rows' taps in order, then the C biases
  const uintptr_t w0 = wa + (uintptr_t)(d0 * W) * (f32w ? 4 : 2);
#pragma unroll
  for (int j = 0; j < W; ++j) ld_bits_vec<C>(w0 + (uintptr_t)j * C * (f32w ? 4 : 2), f32w, e + C * j);
  if (has_bias) ld_bits_vec<C>(ba + (uintptr_t)d0 * (f32b ? 4 : 2), f32b, e + C * W);
#pragma unroll
  for (int c = 0; c < C; ++c) {
#pragma unroll
    for (int k = 0; k < W; ++k) wb.u[c][k] = e[c * W + k];
    wb.u[c][W] = has_bias ? e[C * W + c] : 0u;
  }
}
// load_weight_bits for one channel with one uniform branch per dtype around its loads and the
// row's address computed once: the per-load dtype selects and 64-bit offsets were about 70 of
// bwd_pt's instructions a warp (H100 SASS, docs/perf.md session 23). Only bwd_pt uses it so far.
template <int W>
CCV_DEV void load_weight_bits_u(const ccv_params& P, int64_t d, bool on, WeightBits<W, 1>& wb) {
  wb.has_bias = P.flags & CCV_F_BIAS;
#pragma unroll
  for (int k = 0; k <= W; ++k) wb.u[0][k] = 0u;
  if (!on) return;
  const int64_t ks = P.w_s[1];
  if (P.w_dtype == CCV_DT_F32) {
    const uint32_t* w = (const uint32_t*)P.weight + d * P.w_s[0];
#pragma unroll
    for (int k = 0; k < W; ++k) wb.u[0][k] = w[k * ks];
  } else {
    const uint16_t* w = (const uint16_t*)P.weight + d * P.w_s[0];
#pragma unroll
    for (int k = 0; k < W; ++k) wb.u[0][k] = w[k * ks];
  }
  if (!wb.has_bias) return;
  if (P.b_dtype == CCV_DT_F32) wb.u[0][W] = ((const uint32_t*)P.bias)[d * P.bias_s];
  else wb.u[0][W] = ((const uint16_t*)P.bias)[d * P.bias_s];
}
template <int W, int C>
CCV_DEV void weights_from_bits(const ccv_params& P, const WeightBits<W, C>& wb, float (*w)[W], float* bias) {
  const bool has_bias = wb.has_bias;
#pragma unroll
  for (int c = 0; c < C; ++c) {
#pragma unroll
    for (int k = 0; k < W; ++k) w[c][k] = bits_to_f(wb.u[c][k], P.w_dtype);
    bias[c] = has_bias ? bits_to_f(wb.u[c][W], P.b_dtype) : 0.f;
  }
}
// weights_from_bits with one uniform branch per dtype around all the conversions, not a
// three-way select per value (about 150 instructions a warp fewer in the decode step). Only
// stepv uses it so far: the other kernels' weight setup has not been timed with it (docs/perf.md
// session 15), so weights_from_bits is unchanged.
template <int W, int C>
CCV_DEV void weights_from_bits_u(const ccv_params& P, const WeightBits<W, C>& wb, float (*w)[W], float* bias) {
  auto conv = [&](auto cv) {
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int k = 0; k < W; ++k) w[c][k] = cv(wb.u[c][k]);
  };
  auto bf = [](uint32_t u) { return ccv_bf2f((uint16_t)u); };
  auto hf = [](uint32_t u) { return ccv_h2f((uint16_t)u); };
  auto ff = [](uint32_t u) { return ccv_u2f(u); };
  if (P.w_dtype == CCV_DT_BF16) conv(bf);
  else if (P.w_dtype == CCV_DT_F16) conv(hf);
  else conv(ff);
  const bool has_bias = wb.has_bias;
#pragma unroll
  for (int c = 0; c < C; ++c) bias[c] = has_bias ? bits_to_f(wb.u[c][W], P.b_dtype) : 0.f;
}
template <int W, int C>
CCV_DEV void load_weights_c(const ccv_params& P, int64_t d0, int n, float (*w)[W], float* bias) {
  WeightBits<W, C> wb;
  load_weight_bits<W, C>(P, d0, n, wb);
  weights_from_bits<W, C>(P, wb, w, bias);
}
template <int W> CCV_DEV void load_weights(const ccv_params& P, int64_t d, float* w, float& bias) {
  load_weights_c<W, 1>(P, d, 1, (float(*)[W])w, &bias);
}

// ------------------------------------------------------------------ sequences and slots
// A segment = the tokens of one sequence inside a batch row: [s, e). Rows mode: the whole row
// (s = 0, e = L), sequence index = b. Packed (cu_seqlens): found by binary search; cu values are
// clamped into [0, L] and forced non-decreasing locally, so corrupt device data gives a defined
// (meaningless) result and never an out-of-bounds access.
struct Seg {
  int64_t s, e;    // token range in the row
  int64_t i;       // sequence index
  int64_t slot;    // state slot
  bool valid;      // sequence exists and is not skipped
  bool init;       // its initial state is read (initial_states given && has_initial_state)
};

CCV_DEV int64_t ld_cu(const ccv_params& P, int64_t i) {
  int64_t v = P.cu_seqlens[i * P.cu_s];
  return v < 0 ? 0 : (v > P.seqlen ? P.seqlen : v);
}

// sequence i (< num_seqs) → slot, validity, init
CCV_DEV void seg_slot(const ccv_params& P, Seg& g) {
  int f = P.flags;
  int64_t slot = (f & CCV_F_STATE_IDX) ? (int64_t)P.state_idx[g.i * P.si_s] : g.i;
  g.slot = slot;
  bool ok = slot >= 0 && (!(f & CCV_F_STATES_ANY) || slot < P.num_slots);
  g.valid = g.valid && ok;
  bool hi = true;
  if (ok && (f & CCV_F_INIT) && (f & CCV_F_HAS_INIT)) {
    hi = P.hi_bytes == 1 ? (((const uint8_t*)P.has_init)[g.i * P.hi_s] != 0)
                         : (((const int32_t*)P.has_init)[g.i * P.hi_s] != 0);
  }
  g.init = ok && (f & CCV_F_INIT) && hi;
}

// sequence index i directly (states kernels): segment bounds + slot
CCV_DEV Seg seg_by_index(const ccv_params& P, int64_t i) {
  Seg g;
  g.i = i;
  if (P.flags & CCV_F_PACKED) {
    g.s = ld_cu(P, i);
    int64_t e = ld_cu(P, i + 1);
    g.e = e < g.s ? g.s : e;
  } else {
    g.s = 0;
    g.e = P.seqlen;
  }
  g.valid = true;
  seg_slot(P, g);
  return g;
}

// the segment holding token t of row b (valid = false when t belongs to no live sequence)
CCV_DEV Seg seg_of(const ccv_params& P, int64_t b, int64_t t) {
  if (!(P.flags & CCV_F_PACKED)) return seg_by_index(P, b);
  Seg g;
  int64_t n = P.num_seqs;
  if (n <= 0) {
    g.s = g.e = 0; g.i = 0; g.slot = -1; g.valid = false; g.init = false;
    return g;
  }
  int64_t lo = 0, hi = n - 1;  // largest i with cu[i] <= t
  while (lo < hi) {
    int64_t mid = (lo + hi + 1) >> 1;
    if (ld_cu(P, mid) <= t) lo = mid; else hi = mid - 1;
  }
  g = seg_by_index(P, lo);
  g.valid = g.valid && t >= g.s && t < g.e;
  return g;
}

// Rows mode without seq_idx: every token is on the plain path; the K positions before the row
// start read the initial state (or 0) from the halo, and dfinal is added to the last K dx.
struct RowCtx {
  Seg g;        // the row's sequence (valid = not skipped)
  bool simple;  // rows mode, no seq_idx
};
CCV_DEV RowCtx row_ctx(const ccv_params& P, int64_t b) {
  RowCtx r;
  const bool packed = P.flags & CCV_F_PACKED;
  if (!packed) {
    r.g = seg_by_index(P, b);
  } else {
    r.g.s = r.g.e = 0; r.g.i = 0; r.g.slot = -1; r.g.valid = true; r.g.init = false;
  }
  r.simple = !packed && !(P.flags & CCV_F_SEQ_IDX);
  return r;
}
// row_ctx of a simple row when no state tensor and no state_indices are given (kernels/bwd.rs
// launches such rows on kernels instantiated for them): every row live, no initial state. As a
// constant it spares a span row_ctx's flag tests and loads (bwd_cfw: bf16 W = 4 SiLU 184.8 ->
// 182.9 us, docs/perf.md session 30).
CCV_DEV RowCtx stateless_row_ctx(const ccv_params& P, int64_t b) {
  RowCtx r;
  r.g.s = 0; r.g.e = P.seqlen; r.g.i = b; r.g.slot = b; r.g.valid = true; r.g.init = false;
  r.simple = true;
  return r;
}
// value of x at position p < 0 of a simple row (the initial state, or 0)
template <typename T>
CCV_DEV float row_halo(const ccv_params& P, const RowCtx& r, int64_t d, int64_t p, int K) {
  if (!r.simple || !r.g.init || p < -K) return 0.f;
  return ldf<T>(P.init, r.g.slot * P.init_s[0] + d * P.init_s[1] + (p + K) * P.init_s[2]);
}
// dfinal term of a simple row at position p (0 unless p in [L-K, L) and dfinal given)
template <typename T>
CCV_DEV float row_dfinal(const ccv_params& P, const RowCtx& r, int64_t d, int64_t p, int K) {
  const int64_t j = p - (P.seqlen - K);
  if (!(P.flags & CCV_F_DFINAL) || j < 0 || j >= K || p < 0) return 0.f;
  return ldf<T>(P.dfinal, r.g.slot * P.dfinal_s[0] + d * P.dfinal_s[1] + j * P.dfinal_s[2]);
}

// ------------------------------------------------------------------ generic per-element math
// Offsets
CCV_DEV int64_t xoff(const ccv_params& P, int64_t b, int64_t d, int64_t t) { return b * P.x_s[0] + d * P.x_s[1] + t * P.x_s[2]; }
CCV_DEV int64_t seqid(const ccv_params& P, int64_t b, int64_t t) { return P.seq_idx[b * P.seq_s[0] + t * P.seq_s[1]]; }

// xe(p) as seen by a token of segment g with sequence id idt (semantics.md "Forward").
template <typename T>
CCV_DEV float tap_value(const ccv_params& P, const Seg& g, int64_t b, int64_t d, int64_t idt, int64_t p, int K) {
  bool seq = P.flags & CCV_F_SEQ_IDX;
  if (p >= g.s) {
    if (seq && seqid(P, b, p) != idt) return 0.f;
    return ldf<T>(P.x, xoff(P, b, d, p));
  }
  if (!g.init) return 0.f;
  if (seq && seqid(P, b, 0) != idt) return 0.f;
  int64_t j = p - g.s + K;
  return ldf<T>(P.init, g.slot * P.init_s[0] + d * P.init_s[1] + j * P.init_s[2]);
}

// pre-activation at token t (g = its segment, already valid, idt >= 0)
template <typename T, int W>
CCV_DEV float pre_generic(const ccv_params& P, const Seg& g, int64_t b, int64_t d, int64_t t, int64_t idt, const float* w, float bias) {
  constexpr int K = W - 1;
  float acc = bias;
#pragma unroll
  for (int k = 0; k < W; ++k) acc += w[k] * tap_value<T>(P, g, b, d, idt, t - K + k, K);
  return acc;
}

// forward output at token t (0 for skipped / id < 0 / no sequence)
template <typename T, int W>
CCV_SLOW float fwd_generic(const ccv_params& P, int64_t b, int64_t d, int64_t t, const WArr<W> w, float bias) {
  Seg g = seg_of(P, b, t);
  if (!g.valid) return 0.f;
  int64_t idt = (P.flags & CCV_F_SEQ_IDX) ? seqid(P, b, t) : 0;
  if (idt < 0) return 0.f;
  return act_f(pre_generic<T, W>(P, g, b, d, t, idt, w.w, bias), P.flags & CCV_F_SILU);
}

// g(t) = dout * act'(pre) (0 for skipped / id < 0 / no sequence); pre-activation recomputed
template <typename T, int W>
CCV_SLOW float grad_generic(const ccv_params& P, int64_t b, int64_t d, int64_t t, const WArr<W> w, float bias) {
  Seg g = seg_of(P, b, t);
  if (!g.valid) return 0.f;
  int64_t idt = (P.flags & CCV_F_SEQ_IDX) ? seqid(P, b, t) : 0;
  if (idt < 0) return 0.f;
  float dy = ldf<T>(P.dout, b * P.dout_s[0] + d * P.dout_s[1] + t * P.dout_s[2]);
  bool silu = P.flags & CCV_F_SILU;
  float z = silu ? pre_generic<T, W>(P, g, b, d, t, idt, w.w, bias) : 0.f;
  return act_grad(z, dy, silu);
}

// dF(p): the dfinal_states term of dx / dinitial_states at position p (absolute; may be < g.s)
template <typename T>
CCV_DEV float dfinal_term(const ccv_params& P, const Seg& g, int64_t b, int64_t d, int64_t p, int K) {
  if (!(P.flags & CCV_F_DFINAL) || !g.valid) return 0.f;
  int64_t j = p - (g.e - K);
  if (j < 0 || j >= K) return 0.f;
  if (P.flags & CCV_F_SEQ_IDX) {
    if (g.e > g.s) {  // (L = 0: final_states = initial_states, ids play no part)
      int64_t idl = seqid(P, b, g.e - 1);
      int64_t idp = seqid(P, b, p < g.s ? g.s : p);
      if (idl < 0 || idp != idl) return 0.f;
    }
  }
  return ldf<T>(P.dfinal, g.slot * P.dfinal_s[0] + d * P.dfinal_s[1] + j * P.dfinal_s[2]);
}

// dx at token p from g(p + i), i = 0..K, in `g` (the caller gathers them from its tile).
template <typename T, int W>
CCV_SLOW float dx_generic(const ccv_params& P, int64_t b, int64_t d, int64_t p, const WArr<W> w, const WArr<W> g) {
  constexpr int K = W - 1;
  Seg gp = seg_of(P, b, p);
  if (!gp.valid) return 0.f;
  bool seq = P.flags & CCV_F_SEQ_IDX;
  int64_t idp = seq ? seqid(P, b, p) : 0;
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < W; ++k) {
    int64_t q = p + K - k;
    if (q < gp.e && (!seq || seqid(P, b, q) == idp)) acc += w.w[k] * g.w[K - k];
  }
  return acc + dfinal_term<T>(P, gp, b, d, p, K);
}

// The W masked tap values xe(q-K+k) seen by token q (zeros when q is in no live sequence):
// the dweight contribution of q is g(q) * taps[k].
template <typename T, int W>
CCV_SLOW WArr<W> taps_generic(const ccv_params& P, int64_t b, int64_t d, int64_t q) {
  constexpr int K = W - 1;
  WArr<W> r;
  Seg g = seg_of(P, b, q);
  int64_t idq = (P.flags & CCV_F_SEQ_IDX) ? seqid(P, b, q) : 0;
  // padding tokens (id < 0) and skipped sequences add no term (docs/semantics.md: dweight)
  const bool ok = g.valid && idq >= 0;
#pragma unroll
  for (int k = 0; k < W; ++k) r.w[k] = ok ? tap_value<T>(P, g, b, d, idq, q - K + k, K) : 0.f;
  return r;
}

// ------------------------------------------------------------------ shared-memory helpers
// N floats (N % 4 == 0) at float index `i` (i % 4 == 0) of a float4 array
template <int N> CCV_DEV void ld_sm4(const float4* a, int i, float* f) {
#pragma unroll
  for (int m = 0; m < N; m += 4) {
    const float4 q = a[(i + m) / 4];
    f[m] = q.x; f[m + 1] = q.y; f[m + 2] = q.z; f[m + 3] = q.w;
  }
}
template <int N> CCV_DEV void st_sm4(float4* a, int i, const float* f) {
#pragma unroll
  for (int m = 0; m < N; m += 4) a[(i + m) / 4] = make_float4(f[m], f[m + 1], f[m + 2], f[m + 3]);
}
// weights of channel `ch` of a [W][cc] fp32 table in shared memory
template <int W> CCV_DEV WArr<W> sm_weights(const float* wsm, int cc, int ch) {
  WArr<W> r;
#pragma unroll
  for (int k = 0; k < W; ++k) r.w[k] = wsm[k * cc + ch];
  return r;
}

// Channel-last tiles in shared memory: fp32, row-major [rows][CC], row i = token p0 + i.
// stage_cl: rows of a [batch, dim, seqlen] tensor (x or dout) into the tile. Interior tiles (all
// rows inside [0, L), all channels below D, vector path allowed) issue every 16-byte load of the
// thread before the first shared-memory store; edge tiles take a scalar-capable loop. Rows
// before the sequence start read the initial state of a simple row when `halo` (x), else 0.
template <typename T, int ROWS, int CC, int NT, int K, int BATCH>
CCV_DEV void stage_cl(const ccv_params& P, const void* src, const int64_t* st, bool halo, const RowCtx& rc,
                      float4* sm4, int64_t b, int64_t p0, int64_t c0, bool vec) {
  constexpr int V = Tr<T>::V, G = CC / V, LT = ROWS * G, LI = (LT + NT - 1) / NT;
  const int64_t L = P.seqlen, D = P.dim, base = b * st[0], s1 = st[1], s2 = st[2];
  if (vec && c0 + CC <= D && p0 >= 0 && p0 + ROWS <= L) {
    // Loads are issued in batches of NB (<= BATCH) 16-byte vectors per thread before their shared-memory
    // stores: all at once (NB = LI) has the most bytes in flight but holds 4*LI registers, which
    // caps the blocks per multiprocessor (f32 tiles: LI = 9).
    constexpr int NB = LI < BATCH ? LI : BATCH;
    const T* ptr = (const T*)src + base + p0 * s2 + c0;
#pragma unroll
    for (int b0 = 0; b0 < LI; b0 += NB) {
      ccv_vec16 raw[NB];
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        const int i = (b0 + j) * NT + threadIdx.x;
        if (b0 + j < LI && i < LT) raw[j] = ccv_ld16(ptr + (int64_t)(i / G) * s2 + (i % G) * V);
      }
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        const int i = (b0 + j) * NT + threadIdx.x;
        if (b0 + j < LI && i < LT) {
          float v[V];
          Tr<T>::unpack(raw[j], v);
          st_sm4<V>(sm4, (i / G) * CC + (i % G) * V, v);
        }
      }
    }
    return;
  }
  // Edge tiles: NB vectors per thread gathered before their stores too (one at a time, each load
  // waited for its store: a memory round trip per vector). Not timed: no bench row runs bwd_cl.
  constexpr int NB = LI < BATCH ? LI : BATCH;
#pragma unroll 1
  for (int b0 = 0; b0 < LI; b0 += NB) {
    float v[NB][V];
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const int i = (b0 + j) * NT + threadIdx.x, row = i / G, g2 = i % G;
      const int64_t p = p0 + row, cc = c0 + g2 * V;
      if (b0 + j >= LI || i >= LT) {
#pragma unroll
        for (int e = 0; e < V; ++e) v[j][e] = 0.f;
      } else if (p >= 0 && p < L) {
        if (vec && cc + V <= D) {
          ldv<T>(src, base + p * s2 + cc, v[j]);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) v[j][e] = cc + e < D ? ldf<T>(src, base + (cc + e) * s1 + p * s2) : 0.f;
        }
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) v[j][e] = (halo && p < 0 && cc + e < D) ? row_halo<T>(P, rc, cc + e, p, K) : 0.f;
      }
    }
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const int i = (b0 + j) * NT + threadIdx.x;
      if (b0 + j < LI && i < LT) st_sm4<V>(sm4, (i / G) * CC + (i % G) * V, v[j]);
    }
  }
}

// prefetch_items_l2: asks L2 for the lines of the IT vectors ld_items_raw's vector path loads
// (vector j at token t0 + (j*ntr + tid)*V of `row`), ahead of a round trip the loads would
// otherwise wait behind (the weights': fwd_cf, bwd_cfw). Holds no register once issued.
template <typename T, int IT>
CCV_DEV void prefetch_items_l2(const T* row, int64_t t0, int tid, int ntr) {
#pragma unroll
  for (int j = 0; j < IT; ++j) ccv_prefetch_l2(row + t0 + (int64_t)(j * ntr + tid) * Tr<T>::V);
}

// ld_items_raw: a channel-first thread's IT vectors of a tile (vector j at token t0 + (j*ntr + tid)*V)
// from N row tensors (x, and dout in the backward), as 16-byte vectors of T, 0 past L. When `vec`
// and no vector straddles L, every 16-byte load is issued (predicated) before the first is used:
// N*IT loads in flight per thread instead of one per branch (a per-vector branch kept the compiler
// from hoisting them; measured on the H100: docs/perf.md). Otherwise element by element.
template <typename T, int IT, int N>
CCV_DEV void ld_items_raw(const void* const (&src)[N], const int64_t (&row)[N], const int64_t (&stride)[N], int64_t t0,
                          int tid, int ntr, int64_t L, bool vec, ccv_vec16 (&r)[N][IT]) {
  constexpr int V = Tr<T>::V;
  if (vec && t0 + (int64_t)IT * ntr * V <= L) {  // the whole tile inside the row: no per-vector test
#pragma unroll
    for (int j = 0; j < IT; ++j)
#pragma unroll
      for (int n = 0; n < N; ++n) r[n][j] = ccv_ld16((const T*)src[n] + row[n] + t0 + (int64_t)(j * ntr + tid) * V);
    return;
  }
  bool whole = vec;
#pragma unroll
  for (int j = 0; j < IT; ++j) {
    const int64_t tv = t0 + (int64_t)(j * ntr + tid) * V;
    whole = whole && (tv + V <= L || tv >= L);
  }
#pragma unroll
  for (int j = 0; j < IT; ++j) {
    const int64_t tv = t0 + (int64_t)(j * ntr + tid) * V;
#pragma unroll
    for (int n = 0; n < N; ++n) {
      if (whole) {
        r[n][j] = tv < L ? ccv_ld16((const T*)src[n] + row[n] + tv) : ccv_vec16{0u, 0u, 0u, 0u};
      } else {
        float f[V];
#pragma unroll
        for (int e = 0; e < V; ++e) f[e] = tv + e < L ? ldf<T>(src[n], row[n] + (tv + e) * stride[n]) : 0.f;
        r[n][j] = Tr<T>::pack(f);  // exact: the values came from T
      }
    }
  }
}

// store_cl: tile rows [0, ROWS) (tokens t0 + i, those below L) to a [batch, dim, seqlen] tensor,
// 16-byte stores along channels when `vec`.
template <typename T, int ROWS, int CC, int NT>
CCV_DEV void store_cl(const ccv_params& P, void* dst, const int64_t* st, const float4* sm4, int64_t b, int64_t t0, int64_t c0, bool vec) {
  constexpr int V = Tr<T>::V, G = CC / V, LT = ROWS * G;
  const int64_t L = P.seqlen, D = P.dim, base = b * st[0], s1 = st[1], s2 = st[2];
  for (int i = threadIdx.x; i < LT; i += NT) {
    const int row = i / G, g2 = i % G;
    const int64_t t = t0 + row, cc = c0 + g2 * V;
    if (t >= L) break;
    float v[V];
    ld_sm4<V>(sm4, row * CC + g2 * V, v);
    if (vec && cc + V <= D) {
      stv<T>(dst, base + t * s2 + cc, v);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e)
        if (cc + e < D) stf<T>(dst, base + (cc + e) * s1 + t * s2, v[e]);
    }
  }
}

// ------------------------------------------------------------------ warp spans (bwd_cfw, fwd_cfw)
// A warp's span of a simple row: IT*WS consecutive 16-byte vectors from token s0 (lane `lane`
// vector j at s0 + (j*WS + lane)*V), without shared memory. span_left_halo: hl[k] = the x value
// at span offset lane*V + k - K where that is < 0 (what span_x_before reads; other entries are
// left undefined). Lanes m < K load x at s0 - K + m (the initial state or 0 before the row start)
// and every lane takes its values by shuffles: one divergent load for the warp instead of K
// serial ones in its first lane.
template <typename T, int K, int KA>
CCV_DEV void span_left_halo(const ccv_params& P, const RowCtx& rc, int64_t d, int64_t xrow, int64_t s0, int lane,
                            float (&hl)[KA]) {
  constexpr int V = Tr<T>::V, WS = CCV_WARP;
  float xl = 0.f;
  if (lane < K) {
    const int64_t p = s0 - K + lane;
    xl = p >= 0 ? ldf<T>(P.x, xrow + p) : row_halo<T>(P, rc, d, p, K);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) hl[k] = ccv_shfl(xl, min(k + lane * V, WS - 1));
}
// The K x values before the lane's vector j, xw[0..K), from the lanes before by shuffles of
// their own values (xw[K..K+V), unpacked by the caller). Lane 0 of vector j > 0 takes lane WS-1
// of vector j-1 through `wrap` (what the call for j-1 shuffled), of vector 0 the span's halo.
template <int V, int K, int KA>
CCV_DEV void span_x_before(int j, int lane, const float (&hl)[KA], float (&wrap)[KA], float* xw) {
  constexpr int WS = CCV_WARP;
#pragma unroll
  for (int k = 0; k < K; ++k) {  // span offset o = k - K from the vector: lane + dl, element e
    const int o = k - K, dl = (o - (V - 1)) / V, e = o - dl * V;  // dl = floor(o / V) < 0
    const float a = ccv_shfl(xw[K + e], (lane + dl) & (WS - 1));
    xw[k] = lane + dl >= 0 ? a : (j == 0 ? hl[k] : wrap[k]);
    wrap[k] = a;
  }
}

// ------------------------------------------------------------------ block helpers
// Linear block index over a 2-D grid (the grid may have a few extra blocks: they return).
// kernels.rs keeps every block count, n_chunks, n_ctiles and dim below 2^31, so block decoding
// uses 32-bit division (64-bit division is an out-of-line call).
CCV_DEV uint32_t block_linear() { return blockIdx.y * gridDim.x + blockIdx.x; }
// A streaming channel-last block (fwd_cl, fwd_clw, bwd_cl, bwd_cls, bwd_clw) from its linear
// index: blk = (b * n_chunks + chunk) * n_ctiles + ct.
struct ClBlock {
  int64_t b, chunk, ct;
};
CCV_DEV ClBlock cl_block(const ccv_params& P, uint32_t blk) {
  const uint32_t nct = (uint32_t)P.n_ctiles, nch = (uint32_t)P.n_chunks;
  ClBlock k;
  k.ct = blk % nct;
  const uint32_t r0 = blk / nct;
  k.chunk = r0 % nch;
  k.b = r0 / nch;
  return k;
}
// The per-warp-ring channel-last kernels (fwd_clw, bwd_clw): NT threads in NG groups of GS = 32
// (a group lies inside one warp, 32 or 64 wide); thread gi of group grp owns channels c and c + 1
// of the block's CC = 64-channel tile from c0 (mine: c < D; D is even, so both or neither) and
// walks the group's segment [s0, s1) of the chunk. A copy round moves VPT 16-byte vectors (V
// elements each) a token. Token indices in 32 bits: kernels.rs takes these kernels for L < 2^30.
template <typename T, int NT_> struct ClwGroups {
  static constexpr int NT = NT_, GS = 32, NG = NT / GS, CV = 2, CC = GS * CV;
  static constexpr int V = Tr<T>::V, VPT = CC / V;
  static_assert(GS % VPT == 0 && NT % GS == 0, "clw groups");
};
// Blocks a SM holds at `blocks` a SM by launch bound and `smem` bytes of shared memory (`red` at
// least) each: the ring kernels add optional staging only where it costs no resident block
constexpr int clw_resident(int smem, int red, int blocks) {
  return CCV_SMEM_PER_SM / ((smem > red ? smem : red) + CCV_SMEM_RESERVE) < blocks
             ? CCV_SMEM_PER_SM / ((smem > red ? smem : red) + CCV_SMEM_RESERVE)
             : blocks;
}
// Before a ring kernel's step reads its halo tokens (CCV_F_CLW_HALO; bwd_clw, fwd_clw): the
// halo's copies joined the first refill's commit group, which is still among the R - 1 in flight
// during the group's first R - 1 steps (`ring_tokens` from s0), so a step there waits for them all.
CCV_DEV void clw_halo_wait(int q0, int s0, int ring_tokens) {
  if (q0 - s0 < ring_tokens) {
    ccv_cp_wait<0>();
    ccv_warp_sync();
  }
}
struct ClwLane {
  int64_t b, chunk, c0, c;
  int gi, grp, s0, s1;
  bool mine;
};
template <typename G>
CCV_DEV ClwLane clw_lane(const ccv_params& P, uint32_t blk) {
  const ClBlock cb = cl_block(P, blk);
  ClwLane t;
  t.b = cb.b;
  t.chunk = cb.chunk;
  const int tid = threadIdx.x;
  t.gi = tid % G::GS;
  t.grp = tid / G::GS;
  t.c0 = cb.ct * G::CC;
  t.c = t.c0 + t.gi * G::CV;
  const int seglen = (int)(P.chunk / G::NG);
  t.s0 = (int)cb.chunk * (int)P.chunk + t.grp * seglen;
  t.s1 = min((int)P.seqlen, t.s0 + seglen);
  t.mine = t.c < P.dim;
  return t;
}

// Deterministic sum over the block of N per-thread values (fixed shuffle pattern, then warps in
// order). `red` = shared scratch of (NT / CCV_WARP) * N floats. Result valid in thread 0 (out[]).
template <int N, int NT>
CCV_DEV void block_sum(float* v, float* red, float* out) {
  constexpr int NW = NT / CCV_WARP;
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int m = CCV_WARP / 2; m > 0; m >>= 1) v[i] += ccv_shfl_xor(v[i], m);
  }
  int lane = threadIdx.x % CCV_WARP, wid = threadIdx.x / CCV_WARP;
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) red[wid * N + i] = v[i];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      float s = 0.f;
      for (int j = 0; j < NW; ++j) s += red[j * N + i];
      out[i] = s;
    }
  }
}

// A block's dweight/dbias partial of tap k (k = W: dbias) for channel d and partial row r
// (= b * n_chunks + chunk) → ws[r, d, k] for bwd_reduce, or, when it is the only partial
// (CCV_F_DIRECT: n_partials = 1, kernels.rs launches no reduce), straight into dweight/dbias as
// the reduce would store it (0 + v: the same bits, -0 included). KEEP: the channel-last kernels,
// whose blocks store their partials all along a long kernel, keep them in L2 for the reduce
// (ccv_st_keep: its DRAM reads 6.3 -> 0.6 MB, bf16 4x5376x4096 195.3 -> 192.2 us); the
// channel-first backward gained nothing by it (H100, docs/perf.md session 36).
template <int W, bool KEEP = false>
CCV_DEV void put_partial(const ccv_params& P, int64_t r, int64_t d, int k, float v) {
  if (!(P.flags & CCV_F_DIRECT)) {
    float* p = P.ws + (r * P.dim + d) * (W + 1) + k;
    if constexpr (KEEP) {
      ccv_st_keep(p, v);
    } else {
      *p = v;
    }
  } else if (k < W) {
    st_dt(P.dweight, d * P.dw_s[0] + k * P.dw_s[1], P.dw_dtype, 0.f + v);
  } else if (P.flags & CCV_F_DBIAS) {
    st_dt(P.dbias, d * P.dbias_s, P.db_dtype, 0.f + v);
  }
}

}  // namespace
