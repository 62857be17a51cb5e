// Backward of channel-first problems with a channel's vectors in one block: ccv1d_bwd_pt_*. A
// channel's batch x L/V vectors (q = b * L/V + i: tokens [V i, V i + V) of row b) go to a group of
// G = 2^rows_log2 consecutive threads, blockDim / G channels a block (blocks of 128 threads, or
// 256 when a channel needs them); a thread takes VPT = 2^brows consecutive vectors of a row (1,
// or 2 past 128 vectors a channel on wide grids and past 256 on any). A thread issues the loads
// of its x vectors, of the vectors its window reaches before them, of its dout vectors and of
// its channel's weights before anything waits on memory; computes g = dout * act'(pre) of its
// N = V VPT tokens (the K after them are the next threads': through shared memory with SiLU,
// else dout's next vector); stores N dx; and the group sums its dweight/dbias terms in a fixed
// order (shuffles, then shared memory across warps), W + 1 threads storing a term each
// (CCV_F_DIRECT). One memory round trip, no reduce launch: the tiled kernels spend several round
// trips and barriers on a problem that is one wave of blocks, and a warp per channel (a chain of
// several vectors per lane) was slower (seeds' Tiny and Small; docs/perf.md, session 20).
// kernels.rs (`bwd_pt_shape`) picks it for simple rows (rows mode, no seq_idx) with x, dout and
// dx on the vector path and L a multiple of the thread's vectors; initial states, state indices,
// skipped rows and dfinal are handled here (the per-row work is skipped when neither a state
// tensor nor state indices are given), dinitial_states by the states launch as elsewhere.
#include "instances.h"

// FAST: SiLU through silu_grad_fast; returns whether the thread's sum of g is NaN (then the block
// runs again without FAST).
template <typename T, int W, bool SILU, int VPT, bool ST, bool FAST>
CCV_DEV bool bwd_pt_thread(const ccv_params& P, float* sg, float* sred) {
  constexpr int K = W - 1, V = Tr<T>::V, N = V * VPT, WS = CCV_WARP;
  constexpr int NH = (K + V - 1) / V, NHA = NH > 0 ? NH : 1;  // earlier vectors the window reaches
  // without SiLU, g = dout: the K values after the thread's run come from dout's next NN vectors
  // instead of the next threads' (no shared memory, no barrier before dx)
  constexpr int NN = SILU ? 0 : NH, NNA = NN > 0 ? NN : 1;
  // 32-bit indices: kernels.rs keeps dim below 2^31 and B L <= 4096 here (512 vectors)
  const int lg = P.rows_log2, G = 1 << lg, tid = threadIdx.x, q = tid & (G - 1);
  const int log_nt = 31 - __clz((int)blockDim.x);  // 128 or 256 threads (kernels.rs)
  const int d = (int)((block_linear() << (log_nt - lg)) + (tid >> lg));
  const int L = (int)P.seqlen, nv = L / V, qv = q * VPT;  // the thread's first vector of the channel
  const bool live = d < P.dim && qv < (int)P.batch * nv;  // no return: barriers below
  // f32: the weights' loads before the data's. Issued after them, they waited for the data: ptxas
  // put a weight into the f32 halo vector's unused first element. 16-bit: after them (0.1-0.2 µs
  // faster on the smaller problems; docs/perf.md, session 23).
  constexpr bool weights_first = V == 4;
  WeightBits<W, 1> wb;
  if (weights_first) load_weight_bits_u<W>(P, d, d < P.dim, wb);
  // (a power-of-two row length of vectors shifts instead of dividing: uniform)
  const int b = !live ? 0 : (nv & (nv - 1)) == 0 ? qv >> (31 - __clz(nv)) : qv / nv;
  const int t = live ? (qv - b * nv) * V : 0;  // nv % VPT == 0 (kernels.rs)
  const T* xp = (const T*)P.x + b * P.x_s[0] + d * P.x_s[1];
  const T* yp = (const T*)P.dout + b * P.dout_s[0] + d * P.dout_s[1];
  const ccv_vec16 zero = make_uint4(0u, 0u, 0u, 0u);
  ccv_vec16 raw[VPT], dyr[VPT], hraw[NHA], nraw[NNA];  // hraw: x at [t - NH V, t)
#pragma unroll
  for (int m = 0; m < VPT; ++m) raw[m] = dyr[m] = zero;
#pragma unroll
  for (int m = 0; m < NHA; ++m) hraw[m] = zero;
#pragma unroll
  for (int m = 0; m < NNA; ++m) nraw[m] = zero;
  if (live) {
#pragma unroll
    for (int m = 0; m < VPT; ++m) {
      raw[m] = ccv_ld16(xp + t + m * V);
      dyr[m] = ccv_ld16(yp + t + m * V);
    }
#pragma unroll
    for (int m = 0; m < NN; ++m) {
      const int p = t + N + m * V;
      if (p < L) nraw[m] = ccv_ld16(yp + p);
    }
#pragma unroll
    for (int m = 0; m < NH; ++m) {
      const int p = t - (NH - m) * V;
      if (p >= 0) hraw[m] = ccv_ld16(xp + p);
    }
  }
  if (!weights_first) load_weight_bits_u<W>(P, d, d < P.dim, wb);
  // ST: a state tensor or state indices are given. Without them no row is skipped, the window
  // before a row start is 0 and there is no dfinal: none of the per-row work below.
  RowCtx rc = {};
  if (ST) rc = row_ctx(P, b);
  float w[1][W], bias;
  weights_from_bits_u<W, 1>(P, wb, w, &bias);
  const bool valid = live && (!ST || rc.g.valid);  // a skipped row: dx = 0, no dweight/dbias terms
  float xw[NH * V + N], dy[N];            // x at [t - NH V, t + N)
#pragma unroll
  for (int m = 0; m < NH; ++m) Tr<T>::unpack(hraw[m], xw + m * V);
#pragma unroll
  for (int m = 0; m < VPT; ++m) {
    Tr<T>::unpack(raw[m], xw + NH * V + m * V);
    Tr<T>::unpack(dyr[m], dy + m * V);
  }
  if (ST && live && t < K) {  // the row start: the initial state (or 0) before it
#pragma unroll
    for (int i = 0; i < NH * V; ++i) {
      const int p = t - NH * V + i;
      if (p < 0) xw[i] = row_halo<T>(P, rc, d, p, K);
    }
  }
  float g[N + K];  // g at [t, t + N + K): the thread's own, then the next threads' (0 from L on)
#pragma unroll
  for (int e = 0; e < N; ++e) {
    float z = bias;
#pragma unroll
    for (int k = 0; k < W; ++k) z += w[0][k] * xw[NH * V + e - K + k];
    // without states a dead thread's x and dout are 0, so its g is 0 without the select (a
    // skipped row's x may be Inf or NaN: there the select keeps them out)
    const float ge = SILU && FAST ? silu_grad_fast(z, dy[e]) : act_grad(z, dy[e], SILU);
    g[e] = ST ? (valid ? ge : 0.f) : ge;
  }
  if (SILU) {
    // the next threads' first K values: a thread stores its first min(K, N) (K > N only when
    // VPT = 1 and f32 W > 4: then the K values span two threads)
    constexpr int S = K < N ? (K > 0 ? K : 1) : N;
#pragma unroll
    for (int e = 0; e < S; ++e) sg[tid * S + e] = g[e];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) g[N + k] = live && t + N + k < L ? sg[(tid + 1 + k / S) * S + k % S] : 0.f;
  } else {
    float dn[NNA * V];
#pragma unroll
    for (int m = 0; m < NN; ++m) Tr<T>::unpack(nraw[m], dn + m * V);
#pragma unroll
    for (int k = 0; k < K; ++k) g[N + k] = valid && t + N + k < L ? dn[k] : 0.f;
  }
  float o[N], part[W + 1];
#pragma unroll
  for (int k = 0; k <= W; ++k) part[k] = 0.f;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < W; ++k) acc += w[0][k] * g[e + K - k];
    o[e] = valid ? acc : 0.f;
#pragma unroll
    for (int k = 0; k < W; ++k) part[k] += g[e] * xw[NH * V + e - K + k];
    part[W] += g[e];
  }
  const bool nan_g = FAST && isnan(part[W]);
  // dfinal reaches a row's last K tokens: one test a thread, not one an element
  if (ST && (P.flags & CCV_F_DFINAL) && valid && t + N > L - K) {
#pragma unroll
    for (int e = 0; e < N; ++e) o[e] += row_dfinal<T>(P, rc, d, t + e, K);
  }
  if (live) {
    T* dxp = (T*)P.dx + b * P.dx_s[0] + d * P.dx_s[1] + t;
#pragma unroll
    for (int m = 0; m < VPT; ++m) stv<T>(dxp, m * V, o + m * V);
  }
  // the group's sum, in a fixed order: lanes of a warp by shuffles (each step adds the same two
  // values in every lane, so every lane ends with the same bits), then the group's warps in turn
  const int gw = G < WS ? G : WS;
  for (int m = 1; m < gw; m <<= 1) {
#pragma unroll
    for (int k = 0; k <= W; ++k) part[k] += ccv_shfl_xor(part[k], m);
  }
  // (one loop, thread q storing terms q, q + G, ..., would cover both cases below; it cost bf16
  // 4x4096x512 21.6 -> 23.3 us through the compiler's schedule: docs/perf.md, session 23)
  if (G <= W) {  // uniform: too few threads for a term each
    if (q == 0 && d < P.dim) {
#pragma unroll
      for (int k = 0; k <= W; ++k) put_partial<W>(P, 0, d, k, part[k]);
    }
    return nan_g;
  }
  // the group's threads q <= W sum and store a term each: one thread summing all W + 1 over the
  // warps made a serial tail that grew with the block (docs/perf.md, session 23)
  float s = part[0];
#pragma unroll
  for (int k = 1; k <= W; ++k) s = q == k ? part[k] : s;
  if (G > WS) {  // uniform: one group spans warps
    if (tid % WS == 0) {
#pragma unroll
      for (int k = 0; k <= W; ++k) sred[tid / WS * (W + 1) + k] = part[k];
    }
    __syncthreads();
    if (q <= W) {
      s = 0.f;
      for (int i = 0; i < G / WS; ++i) s += sred[(tid / WS + i) * (W + 1) + q];
    }
  }
  if (q <= W && d < P.dim) put_partial<W>(P, 0, d, q, s);
  return nan_g;
}

template <typename T, int W, int VPT, bool ST>
CCV_DEV void bwd_pt_st(const ccv_params& P, float* sg, float* sred) {
  // SiLU: 16-bit through silu_grad_fast (H100, docs/perf.md session 24: bf16 4x4096x512 21.7 ->
  // 21.1 us, 8x2048x256 13.3 -> 12.2), run again without it if it met z = ±inf (or a NaN); f32
  // as it was (no gain measured)
  if (!(P.flags & CCV_F_SILU)) {
    bwd_pt_thread<T, W, false, VPT, ST, false>(P, sg, sred);
  } else if (sizeof(T) == 4) {
    bwd_pt_thread<T, W, true, VPT, ST, false>(P, sg, sred);
  } else if (__syncthreads_or(bwd_pt_thread<T, W, true, VPT, ST, true>(P, sg, sred))) {
    bwd_pt_thread<T, W, true, VPT, ST, false>(P, sg, sred);
  }
}
// (rows are skipped by state indices even without a state tensor, so both flags count)
template <typename T, int W, int VPT>
CCV_DEV void bwd_pt_vpt(const ccv_params& P, float* sg, float* sred) {
  if (P.flags & (CCV_F_STATES_ANY | CCV_F_STATE_IDX)) bwd_pt_st<T, W, VPT, true>(P, sg, sred);
  else bwd_pt_st<T, W, VPT, false>(P, sg, sred);
}
// brows = log2 of the vectors a thread takes (kernels.rs `bwd_pt_shape`): one vector on the
// smallest problems, 2 past 128 vectors a channel (in blocks of 256 threads past 256 vectors)
template <typename T, int W>
CCV_DEV void bwd_pt_body(const ccv_params& P) {
  __shared__ float sg[CCV_NT_bwd_pt * (W - 1 > 0 ? W - 1 : 1)];
  __shared__ float sred[CCV_NT_bwd_pt / CCV_WARP * (W + 1)];
  if (P.brows == 0) bwd_pt_vpt<T, W, 1>(P, sg, sred);
  else bwd_pt_vpt<T, W, 2>(P, sg, sred);
}

CCV_INSTANTIATE_W(bwd_pt)

// ---------------------------------------------------------------------------------------------
// The smallest backwards of either layout: ccv1d_bwd_pe_*, one token of one channel per thread.
// A block holds C channels [d0, d0 + C) over every batch row and token: the thread q = (b << rl)
// | t (rl = rows_log2, 2^rl >= L; 2^r >= B 2^rl with r = brows) of channel d0 + ch, with C =
// blockDim / 2^r. Channel-last: ch = the low bits of the thread index (a warp's accesses run along
// channels); channel-first (CCV_F_PE_TOKENS): q = the low bits (along tokens). A thread needs x
// over [t - K, t + K] (without SiLU only [t - K, t]) and dout over [t, t + K]: it loads x(t),
// dout(t) and its channel's weights, takes the others from the lanes holding them channel-last
// (loads where no lane of the warp does) or loads them channel-first, all before anything waits;
// computes g at t .. t + K itself (no barrier before dx), stores dx(t) = sum_k w[k] g(t + K - k)
// (+ dfinal) and adds its dweight / dbias terms g(t) x(t - K + k) into the channel's sum in a
// fixed order (shuffles inside a warp, then one barrier and the warps in turn), which one thread
// stores (CCV_F_DIRECT). As in the forward, a thread's instructions are the time on these
// one-wave problems, so a thread takes one element, not a 16-byte vector (bwd_pt; docs/perf.md,
// session 21). dinitial_states: the states launch as elsewhere.
template <typename T, int W, bool SILU, bool TOK>
CCV_DEV void bwd_pe_thread(const ccv_params& P, float* red) {
  constexpr int K = W - 1, WS = CCV_WARP, LOG_WS = WS == 64 ? 6 : 5, NX = SILU ? 2 * K + 1 : W;
  const int rl = P.rows_log2, r = P.brows, tid = threadIdx.x, c = 31 - __clz((int)blockDim.x) - r;
  constexpr bool tok = TOK;
  const int ch = tok ? tid >> r : tid & ((1 << c) - 1), q = tok ? tid & ((1 << r) - 1) : tid >> c;
  const int b = q >> rl, t = q & ((1 << rl) - 1), L = (int)P.seqlen;
  const int d = (int)(blockIdx.x << c) + ch;
  const bool live = d < P.dim && b < P.batch && t < L;  // no return: the barrier below
  const int64_t bd = live ? b : 0, dd = live ? d : 0;
  const T* xp = (const T*)P.x + bd * P.x_s[0] + dd * P.x_s[1];
  const T* yp = (const T*)P.dout + bd * P.dout_s[0] + dd * P.dout_s[1];
  // Channel-last, the thread loads x(t) and dout(t); the window's other tokens are the same
  // channel's and row's in the lanes C, 2C, .. away when those lanes are in the warp, else loads
  // of their own (a warp's first and last lanes): a channel-last warp's load instruction touches
  // one cache line per token, so the window's loads cost more than the shuffles. Channel-first,
  // where a warp's loads are a few lines, the loads were faster (docs/perf.md, session 21).
  const int lane = tid % WS, S = 1 << c;
  auto from_lane = [&](int delta) {
    return !TOK && lane + delta * S >= 0 && lane + delta * S < WS && t + delta >= 0 && t + delta < (1 << rl);
  };
  const T xo = live ? xp[t * P.x_s[2]] : T(), yo = live ? yp[t * P.dout_s[2]] : T();
  T xr[NX], yr[W];  // raw x at [t - K, t - K + NX), dout at [t, t + K] that no lane holds
#pragma unroll
  for (int j = 0; j < NX; ++j) {
    const int p = t - K + j;
    xr[j] = j != K && !from_lane(j - K) && live && p >= 0 && p < L ? xp[p * P.x_s[2]] : T();
  }
  yr[0] = T();
#pragma unroll
  for (int j = 1; j < W; ++j) yr[j] = !from_lane(j) && live && t + j < L ? yp[(t + j) * P.dout_s[2]] : T();
  WeightBits<W, 1> wb;
  load_weight_bits<W, 1>(P, dd, 1, wb);
  const RowCtx rc = row_ctx(P, bd);
  float w[1][W], bias;
  weights_from_bits_u<W, 1>(P, wb, w, &bias);
  const bool valid = live && rc.g.valid;  // a skipped row: dx = 0, no dweight/dbias terms
  const float xt = Tr<T>::to_f(xo), yt = Tr<T>::to_f(yo);
  auto pick = [&](float own, T raw, int delta) {  // every lane shuffles: uniform
    if (TOK || delta == 0) return delta == 0 ? own : Tr<T>::to_f(raw);
    const int src = lane + delta * S;
    const float v = ccv_shfl(own, src >= 0 && src < WS ? src : lane);
    return from_lane(delta) ? v : Tr<T>::to_f(raw);
  };
  float xv[NX], g[W];  // g at t .. t + K (0 from L on)
#pragma unroll
  for (int j = 0; j < NX; ++j) xv[j] = pick(xt, xr[j], j - K);
  if (live && t < K) {  // the row start: the initial state (or 0) before it
#pragma unroll
    for (int j = 0; j < K; ++j)
      if (t - K + j < 0) xv[j] = row_halo<T>(P, rc, dd, t - K + j, K);
  }
#pragma unroll
  for (int j = 0; j < W; ++j) {
    const float dy = pick(yt, yr[j], j);
    if (SILU) {
      float z = bias;
#pragma unroll
      for (int k = 0; k < W; ++k) z += w[0][k] * xv[(j + k) < NX ? j + k : 0];
      g[j] = valid && t + j < L ? act_grad(z, dy, true) : 0.f;
    } else {
      g[j] = valid && t + j < L ? dy : 0.f;
    }
  }
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < W; ++k) acc += w[0][k] * g[K - k];
  if (live) stf<T>(P.dx, bd * P.dx_s[0] + dd * P.dx_s[1] + t * P.dx_s[2], valid ? acc + row_dfinal<T>(P, rc, dd, t, K) : 0.f);
  // (a padded or skipped thread adds nothing: 0 * an Inf or NaN its window took from a lane
  // would be NaN)
  float part[W + 1];
#pragma unroll
  for (int k = 0; k < W; ++k) part[k] = valid ? g[0] * xv[k] : 0.f;
  part[W] = g[0];
  // the channel's sum in a fixed order: the q bits inside a warp by shuffles (the low ones
  // channel-first, those above the channel bits channel-last), then the warps' sums in turn
  const int qw = tok ? min(r, LOG_WS) : max(0, min(r, LOG_WS - c)), m0 = tok ? 1 : 1 << c;
  for (int m = m0; m < m0 << qw; m <<= 1) {
#pragma unroll
    for (int k = 0; k <= W; ++k) part[k] += ccv_shfl_xor(part[k], m);
  }
  const int C = 1 << c, hi = q >> qw;  // the warp's slot among the channel's warps
  if ((q & ((1 << qw) - 1)) == 0) {
#pragma unroll
    for (int k = 0; k <= W; ++k) red[(hi * C + ch) * (W + 1) + k] = part[k];
  }
  __syncthreads();
  for (int i = tid; i < C * (W + 1); i += blockDim.x) {  // a block of 64 threads may hold 8 channels
    const int cc = i / (W + 1), k = i % (W + 1), dc = (int)(blockIdx.x << c) + cc;
    float s = 0.f;
    for (int h = 0; h < (1 << (r - qw)); ++h) s += red[(h * C + cc) * (W + 1) + k];
    if (dc < P.dim) put_partial<W>(P, 0, dc, k, s);
  }
}

template <typename T, int W>
CCV_DEV void bwd_pe_body(const ccv_params& P) {
  __shared__ float red[CCV_NT_bwd_pe * (W + 1)];
  const bool silu = P.flags & CCV_F_SILU;
  if (P.flags & CCV_F_PE_TOKENS) {
    if (silu) bwd_pe_thread<T, W, true, true>(P, red); else bwd_pe_thread<T, W, false, true>(P, red);
  } else {
    if (silu) bwd_pe_thread<T, W, true, false>(P, red); else bwd_pe_thread<T, W, false, false>(P, red);
  }
}

CCV_INSTANTIATE_W(bwd_pe)
