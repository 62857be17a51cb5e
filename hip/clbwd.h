// clbwd.h — what the streaming channel-last backward kernels share (bwd_cls in bwd_cl.hip,
// bwd_clw in bwd_clw.hip): a thread's CV channels walk tokens q in order with their W-token
// windows of x and g in registers,
//   g(q) = dout(q) * act'(pre(q));  dweight/dbias += g(q) * x(q-K+k);  dx(q-K) = sum_k w[k] g(q-k),
// and a block's per-thread partials are added in a fixed order at the end.
#pragma once
#include "common.h"

template <typename T, int W, int CV, bool SILU>
struct ClBwdWalk {
  static constexpr int K = W - 1;
  typedef QN<T, CV> Q;
  typedef typename Q::raw Raw;
  float w[CV][W], bias[CV];
  float xw[W][CV], gw[W][CV];  // after token q: x(q-K+k), g(q-K+k)

  // the thread's dweight/dbias partials (k = W: dbias), kept outside the walk: every thread
  // adds them up at the end, walking or not
  static CCV_DEV void zero_partials(float (&dw)[CV][W + 1]) {
#pragma unroll
    for (int ch = 0; ch < CV; ++ch)
#pragma unroll
      for (int k = 0; k <= W; ++k) dw[ch][k] = 0.f;
  }
  // The windows before token s0 from window_loads' raw x (common.h; the initial state or 0 before
  // the row start), g = 0. A thread without channels (!own): x = 0.
  CCV_DEV void start(const ccv_params& P, const RowCtx& rc, const Raw (&raw)[W], int64_t c, int64_t s0, bool own = true) {
#pragma unroll
    for (int k = 0; k < W; ++k)
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) gw[k][ch] = xw[k][ch] = 0.f;
#pragma unroll
    for (int k = 1; k <= K; ++k) {
      const int64_t p = s0 - K - 1 + k;
      if (!own) continue;
      if (p >= 0) {
        Q::unpack(raw[k], xw[k]);
      } else {
#pragma unroll
        for (int ch = 0; ch < CV; ++ch) xw[k][ch] = row_halo<T>(P, rc, c + ch, p, K);
      }
    }
  }
  // token q from its raw x and dout: shift the windows in, g(q), and its dweight terms (dwq)
  CCV_DEV void token(Raw rx, Raw ry, bool dwq, float (&dw)[CV][W + 1]) {
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) {
        xw[k][ch] = xw[k + 1][ch];
        gw[k][ch] = gw[k + 1][ch];
      }
    Q::unpack(rx, xw[K]);
    float dy[CV];
    Q::unpack(ry, dy);
#pragma unroll
    for (int ch = 0; ch < CV; ++ch) {
      float z = bias[ch];
#pragma unroll
      for (int k = 0; k < W; ++k) z += w[ch][k] * xw[k][ch];
      gw[K][ch] = act_grad(z, dy[ch], SILU);  // 0 past L (dout read as 0)
    }
    if (dwq) {
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) {
#pragma unroll
        for (int k = 0; k < W; ++k) dw[ch][k] += gw[K][ch] * xw[k][ch];
        dw[ch][W] += gw[K][ch];
      }
    }
  }
  // dx(p), p = q - K of the last token, packed (+ the dfinal term of a simple row of length L
  // when dfin)
  CCV_DEV Raw dx(const ccv_params& P, const RowCtx& rc, int64_t c, int64_t p, bool dfin, int64_t L) const {
    float o[CV];
#pragma unroll
    for (int ch = 0; ch < CV; ++ch) {
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < W; ++k) acc += w[ch][k] * gw[K - k][ch];
      o[ch] = acc;
    }
    if (dfin && p >= L - K) {
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) o[ch] += row_dfinal<T>(P, rc, c + ch, p, K);
    }
    return Q::pack(o);
  }
};

// A block's partials: thread (lane, grp) holds channels c0 + grp * CV + [0, CV) of one of LANES
// token ranges. `red` ([LANES][CC][W + 1] floats of shared memory, free for this) gathers them;
// the lanes of a channel are added in lane order (deterministic) and written as partial row
// `prow` (bwd_reduce sums the rows, or put_partial stores them when it is the only one).
template <int W, int CV, int CC, int NT, int LANES>
CCV_DEV void put_lane_partials(const ccv_params& P, float* red, const float (&dw)[CV][W + 1], int tid, int lane, int grp,
                               int64_t c0, int64_t D, int64_t prow) {
#pragma unroll
  for (int ch = 0; ch < CV; ++ch)
#pragma unroll
    for (int k = 0; k <= W; ++k) red[(lane * CC + grp * CV + ch) * (W + 1) + k] = dw[ch][k];
  __syncthreads();
  for (int i = tid; i < CC * (W + 1); i += NT) {
    if (c0 + i / (W + 1) >= D) break;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < LANES; ++j) s += red[j * CC * (W + 1) + i];
    put_partial<W, true>(P, prow, c0 + i / (W + 1), i % (W + 1), s);
  }
}
