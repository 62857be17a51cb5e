// Backward, channel-last. Block = (batch row b, chunk, tile of CL_CC channels); it walks its
// chunk in tiles of CL_TT tokens. Per tile (thread = (channel, half of the rows)):
//   1. x rows [t0-K, t0+TT+K) and dout rows [t0, t0+TT+K) staged in shared memory (fp32, 16-byte
//      loads along channels);
//   2. g = dout * act'(pre) in place over the dout tile, pre from a sliding window over x;
//   3. dweight/dbias partials: g(t) * x(t-K+k) with a sliding window, W+1 registers per thread;
//   4. dx = sum_k w[k] g(t+K-k) (+ dfinal term) with a sliding window over g, into the (now
//      free) x tile, then written with 16-byte stores along channels.
// Tokens whose window leaves their sequence take the generic per-element path. At the end the two
// row halves of a channel are added in a fixed order and written to
// ws[(b*n_chunks + chunk), c, 0..W] (bwd_reduce in misc.hip sums the partials in a fixed order).
#include "instances.h"
#include "clbwd.h"

template <typename T, int W>
CCV_DEV void bwd_cl_body(const ccv_params& P) {
  ccv_release_dependents();  // the reduce launch (compat.h)
  constexpr int K = W - 1, NT = CCV_NT_bwd_cl, CC = CCV_CL_CC, TT = CCV_CL_TT;
  constexpr int SB = sizeof(T) == 4 ? CCV_SB_bwd_cl_f32 : CCV_SB_bwd_cl_16;
  constexpr int XROWS = TT + 2 * K, GROWS = TT + K;
  constexpr int NH = NT / CC, HT = TT / NH, HG = (GROWS + NH - 1) / NH;
  static_assert(NT % CC == 0 && TT % NH == 0, "tile shape");
  static_assert(NH * CC * (W + 1) <= XROWS * CC, "reduction scratch fits in the x tile");
  __shared__ float4 xs4[XROWS * CC / 4];  // x rows [t0-K, t0+TT+K); later dx rows [t0, t0+TT)
  __shared__ float4 gs4[GROWS * CC / 4];  // dout, then g, rows [t0, t0+TT+K)
  __shared__ unsigned char fl[GROWS];     // bit 0: g path plain, bit 1: dx path plain
  float* xs = (float*)xs4;
  float* gs = (float*)gs4;

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const ClBlock cb = cl_block(P, blk);
  const int64_t ct = cb.ct, chunk = cb.chunk, b = cb.b;
  const int f = P.flags;
  const bool vec = f & CCV_F_VEC, seq = f & CCV_F_SEQ_IDX, packed = f & CCV_F_PACKED, silu = f & CCV_F_SILU;
  const int64_t L = P.seqlen, D = P.dim;
  const int tid = threadIdx.x, cl = tid % CC, h = tid / CC;
  const int64_t c0 = ct * CC, c = c0 + cl;
  const bool cok = c < D;

  WArr<W> wa;  // loaded after the first tile's staging (below): one memory round trip less
  float bias = 0.f;
  const RowCtx rc = row_ctx(P, b);
  const bool row_ok = rc.g.valid;

  float dw[W + 1];  // channel c; k = W: dbias
#pragma unroll
  for (int k = 0; k <= W; ++k) dw[k] = 0.f;

  const int64_t cbeg = chunk * P.chunk;
  const int64_t cend = min(L, cbeg + P.chunk);
  for (int64_t t0 = cbeg; t0 < cend; t0 += TT) {
    // ---- 1. staging and per-row flags
    stage_cl<T, XROWS, CC, NT, K, SB>(P, P.x, P.x_s, true, rc, xs4, b, t0 - K, c0, vec);
    stage_cl<T, GROWS, CC, NT, K, SB>(P, P.dout, P.dout_s, false, rc, gs4, b, t0, c0, vec);
    if (t0 == cbeg) {
      if (cok) {
        load_weights<W>(P, c, wa.w, bias);
      } else {
#pragma unroll
        for (int k = 0; k < W; ++k) wa.w[k] = 0.f;
      }
    }
    for (int i = tid; i < GROWS; i += NT) {
      const int64_t t = t0 + i;
      bool gpl = false, dpl = false;
      if (t < L) {
        if (packed) {
          Seg g = seg_of(P, b, t);
          gpl = g.valid && t - K >= g.s;
          dpl = g.valid && t + K < g.e;
        } else {
          gpl = row_ok && (rc.simple || t >= K);
          dpl = row_ok && (rc.simple || t + K < L);
          if (seq && (gpl || dpl)) {
            const int64_t id0 = seqid(P, b, t);
            if (id0 < 0) gpl = dpl = false;
            for (int m = 1; m <= K && gpl; ++m)
              if (seqid(P, b, t - m) != id0) gpl = false;
            for (int m = 1; m <= K && dpl; ++m)
              if (seqid(P, b, t + m) != id0) dpl = false;
          }
        }
      }
      fl[i] = (gpl ? 1 : 0) | (dpl ? 2 : 0);
    }
    __syncthreads();

    // ---- 2. g in place over the dout rows [h*HG, min(GROWS, h*HG+HG)): x rows r .. r+K
    {
      const int rb = h * HG, re = min(GROWS, rb + HG);
      bool any_slow = false;
      if (silu) {
        float win[W];
#pragma unroll
        for (int k = 0; k < K; ++k) win[k + 1] = xs[(rb + k) * CC + cl];
#pragma unroll 4
        for (int r = rb; r < re; ++r) {
#pragma unroll
          for (int k = 0; k < K; ++k) win[k] = win[k + 1];
          win[K] = xs[(r + K) * CC + cl];
          float z = bias;
#pragma unroll
          for (int k = 0; k < W; ++k) z += wa.w[k] * win[k];
          const float dy = gs[r * CC + cl];  // 0 past L
          gs[r * CC + cl] = act_grad(z, dy, true);
          any_slow |= !(fl[r] & 1) && t0 + r < L;
        }
      } else {
        for (int r = rb; r < re; ++r) any_slow |= !(fl[r] & 1) && t0 + r < L;
      }
      if (any_slow) {
#pragma unroll 1
        for (int r = rb; r < re; ++r)
          if (!(fl[r] & 1) && t0 + r < L) gs[r * CC + cl] = cok ? grad_generic<T, W>(P, b, c, t0 + r, wa, bias) : 0.f;
      }
    }
    __syncthreads();

    // ---- 3. dweight/dbias partials over the own rows [h*HT, h*HT+HT)
    const int rb = h * HT;
    {
      float xw[W];
#pragma unroll
      for (int k = 0; k < K; ++k) xw[k + 1] = xs[(rb + k) * CC + cl];
      bool any_slow = false;
#pragma unroll 4
      for (int r = rb; r < rb + HT; ++r) {
#pragma unroll
        for (int k = 0; k < K; ++k) xw[k] = xw[k + 1];
        xw[K] = xs[(r + K) * CC + cl];
        if (fl[r] & 1) {
          const float gr = gs[r * CC + cl];
#pragma unroll
          for (int k = 0; k < W; ++k) dw[k] += gr * xw[k];
          dw[W] += gr;
        } else {
          any_slow |= t0 + r < L;
        }
      }
      if (any_slow && cok) {
#pragma unroll 1
        for (int r = rb; r < rb + HT; ++r) {
          const float gr = gs[r * CC + cl];
          if ((fl[r] & 1) || t0 + r >= L) continue;  // g == 0 is not skipped: 0 * inf = NaN
          const WArr<W> tp = taps_generic<T, W>(P, b, c, t0 + r);
#pragma unroll
          for (int k = 0; k < W; ++k) dw[k] += gr * tp.w[k];
          dw[W] += gr;
        }
      }
    }
    __syncthreads();  // x tile no longer needed: dx goes there

    // ---- 4. dx over the own rows: g rows r .. r+K
    {
      float gw[W];
#pragma unroll
      for (int k = 0; k < K; ++k) gw[k] = gs[(rb + k) * CC + cl];
      bool any_slow = false;
      const bool dfin = (f & CCV_F_DFINAL) && rc.simple;
#pragma unroll 4
      for (int r = rb; r < rb + HT; ++r) {
        gw[K] = gs[(r + K) * CC + cl];
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < W; ++k) acc += wa.w[k] * gw[K - k];
#pragma unroll
        for (int k = 0; k < K; ++k) gw[k] = gw[k + 1];
        const int64_t t = t0 + r;
        if (dfin && t >= L - K && t < L && cok) acc += row_dfinal<T>(P, rc, c, t, K);
        xs[r * CC + cl] = acc;
        any_slow |= !(fl[r] & 2) && t < L;
      }
      if (any_slow && cok) {
#pragma unroll 1
        for (int r = rb; r < rb + HT; ++r)
          if (!(fl[r] & 2) && t0 + r < L) {
            WArr<W> gq;  // g rows r .. r+K (< GROWS)
#pragma unroll
            for (int i = 0; i < W; ++i) gq.w[i] = gs[(r + i) * CC + cl];
            xs[r * CC + cl] = dx_generic<T, W>(P, b, c, t0 + r, wa, gq);
          }
      }
    }
    __syncthreads();
    store_cl<T, TT, CC, NT>(P, P.dx, P.dx_s, xs4, b, t0, c0, vec);
    __syncthreads();
  }

  // ---- partials: the NH row groups of a channel are added in order
  float* red = xs;  // [NH][CC][W+1]
#pragma unroll
  for (int k = 0; k <= W; ++k) red[(h * CC + cl) * (W + 1) + k] = dw[k];
  __syncthreads();
  for (int i = tid; i < CC * (W + 1); i += NT) {
    if (c0 + i / (W + 1) >= D) break;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < NH; ++j) s += red[j * CC * (W + 1) + i];
    put_partial<W, true>(P, b * P.n_chunks + chunk, c0 + i / (W + 1), i % (W + 1), s);
  }
}

CCV_INSTANTIATE_W(bwd_cl)

// channels per thread and ring depth (tokens in flight; 0: registers) of bwd_cls (instances.h)
template <typename T, int W> struct ClsCfg {
  static constexpr int CV = sizeof(T) == 4 ? CCV_CL_BWD_CV_f32 : CCV_CL_BWD_CV_16(W);
  static constexpr int R = sizeof(T) == 4 ? CCV_CL_RING_bwd_f32(W) : CCV_CL_RING_bwd_16(W);
};

// ---------------------------------------------------------------------------------------------
// bwd_cls: the channel-last backward of simple rows (no seq_idx / cu_seqlens) on the vector path
// (dim % 4 == 0), streamed through registers like fwd_cl: block = (b, chunk, tile of CL_CC
// channels) sized by kernels.rs's cl_stream_geometry; thread = (CV = 4 or 2 channels as ClsCfg
// says, lane), lane i owns the tokens [s0, s1) = [cbeg + i*S, cbeg + (i+1)*S). It walks q over
// [s0, s1 + K) with x(q-K..q) and g(q-K..q) windows in registers (x from s0 - K: initial state or
// 0 before the row start):
//   g(q) = dout(q) * act'(pre(q));  dweight/dbias += g(q) * x(q-K+k) for q in [s0, s1);
//   dx(q-K) = sum_k w[k] g(q-k) (+ dfinal) once q - K >= s0   (ClBwdWalk, clbwd.h; bwd_clw shares it).
// x and dout arrive R tokens ahead through the thread's own slots of a shared-memory ring of
// asynchronous copies (R = CCV_CL_RING_bwd_*, instances.h), or, where R = 0, U tokens ahead in
// registers (with SiLU the next U are in flight during a step's math). The lanes' partials of a
// channel are added in a fixed order and written to ws[(b*n_chunks + chunk), c, 0..W] like
// bwd_cl's.
template <typename T, int W, bool SILU>
CCV_DEV void bwd_cls_rows(const ccv_params& P, float4* smem) {
  constexpr int CV = ClsCfg<T, W>::CV;
  constexpr int K = W - 1, NT = CCV_NT_bwd_cl, CC = CCV_CL_CC, G = CC / CV, LANES = NT / G;
  constexpr int U = SILU ? CCV_CL_AHEAD_bwd_silu(W) : CCV_CL_AHEAD_bwd;
  static_assert(NT % G == 0, "tile shape");
  typedef QN<T, CV> Q;
  constexpr int R = ClsCfg<T, W>::R;
  constexpr int SLOT = sizeof(typename Q::raw);  // 8 or 4 bytes
  float* red = (float*)smem;  // [LANES][CC][W + 1] after the walk
  typename Q::raw* ring = (typename Q::raw*)smem;  // [R][2][NT] during the walk

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const ClBlock cb = cl_block(P, blk);
  const int64_t ct = cb.ct, chunk = cb.chunk, b = cb.b;
  const bool dfin = P.flags & CCV_F_DFINAL;
  const int64_t L = P.seqlen, D = P.dim;
  const int tid = threadIdx.x, grp = tid % G, lane = tid / G;
  const int64_t c0 = ct * CC, c = c0 + grp * CV;
  const int64_t seglen = P.chunk / LANES;
  const int64_t s0 = chunk * P.chunk + lane * seglen, s1 = min(L, s0 + seglen);
  const bool active = c < D && s0 < s1;  // every thread stays for the reduction's barrier

  float dw[CV][W + 1];
  ClBwdWalk<T, W, CV, SILU>::zero_partials(dw);

  if (active) {
    ClBwdWalk<T, W, CV, SILU> wk;
    const T* xp = (const T*)P.x + b * P.x_s[0] + c;
    const T* yp = (const T*)P.dout + b * P.dout_s[0] + c;
    T* dp = (T*)P.dx + b * P.dx_s[0] + c;
    const int64_t xt = P.x_s[2], yt = P.dout_s[2], dt = P.dx_s[2];
    const int64_t qend = s1 + K, qload = min(L, qend);
    // ring of R tokens ahead per thread in shared memory (R > 0; slot s: x at ring[2s], dout at
    // ring[2s+1], each [NT]): step q refills the slot token q-1 used with token q+R-1
    const T* xi = xp + s0 * xt;
    const T* yi = yp + s0 * yt;
    int64_t qi = s0;
    auto issue = [&](int slot) {
      const bool in = qi < qload;
      ccv_cp<SLOT>(&ring[(2 * slot) * NT + tid], xi, in);
      ccv_cp<SLOT>(&ring[(2 * slot + 1) * NT + tid], yi, in);
      ccv_cp_commit();
      ++qi;
      xi += xt;
      yi += yt;
    };
    // The weights and the window go out before either is used (the weights converted at their
    // load, then the window, took two round trips). f32 issues the ring's first tokens before
    // them, as bwd_clw does: one round trip at a lane's start (H100, docs/perf.md session 27:
    // f32 SiLU 4x256x4096 24.7 -> 24.0-24.2 us, 4x4096x512 W = 7 44.5-44.8 -> 43.7-43.8); 16-bit
    // after the window (first, bf16 W = 8 at 4x5376x4096 ran 231.0 -> 237.6).
    constexpr bool RING_FIRST = sizeof(T) == 4;
    auto ring_start = [&]() {
#pragma unroll
      for (int s = 0; s < R - 1; ++s) issue(s);
    };
    if constexpr (R > 0 && RING_FIRST) ring_start();
    WeightBits<W, CV> wb;
    load_weight_bits<W, CV>(P, c, CV, wb);
    typename Q::raw win[W];
    window_loads<T, W, CV>(xp, xt, s0, true, win);
    weights_from_bits<W, CV>(P, wb, wk.w, wk.bias);
    const RowCtx rc = row_ctx(P, b);
    const bool live = rc.g.valid;  // a skipped row: g = 0, dx = 0, no partials
    wk.start(P, rc, win, c, s0);
    if constexpr (R > 0 && !RING_FIRST) ring_start();
    if (!live) {  // a skipped row: dx = 0, no partials
      if constexpr (R > 0) ccv_cp_wait<0>();  // (its copies land before red overlays the ring)
      for (int64_t p = s0; p < s1; ++p) Q::st(dp + p * dt, Q::zero());
    } else {
      // x and dout of the U tokens from q0 at xc / yc (every load of a step before the first
      // use); pointers advance by a stride per token instead of an int64 multiply per load
      auto fetch = [&](int64_t q0, const T* xc, const T* yc, typename Q::raw* rx, typename Q::raw* ry) {
        const bool whole = q0 + U <= qload;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const bool in = whole || q0 + u < qload;
          rx[u] = in ? Q::ld(xc) : Q::zero();
          ry[u] = in ? Q::ld(yc) : Q::zero();
          xc += xt;
          yc += yt;
        }
      };
      // token q: the walk's step (dwq: its dweight terms) and dx(q - K) (dxq); the bulk passes
      // tail = false: there q < s1 <= L, so q - K < L - K never takes a dfinal term
      auto token = [&](int64_t q, typename Q::raw rxu, typename Q::raw ryu, bool dwq, bool dxq, bool tail) {
        wk.token(rxu, ryu, dwq, dw);
        if (dxq) Q::st(dp + (q - K) * dt, wk.dx(P, rc, c, q - K, tail && dfin, L));
      };
      if constexpr (R > 0) {
        for (int64_t q0 = s0; q0 < qend; q0 += R) {
          auto step = [&](int u, bool dwq, bool dxq, bool tail) {
            issue((u + R - 1) % R);
            ccv_cp_wait<R - 1>();
            token(q0 + u, ring[2 * u * NT + tid], ring[(2 * u + 1) * NT + tid], dwq, dxq, tail);
          };
          if (q0 >= s0 + K && q0 + R <= s1) {
#pragma unroll
            for (int u = 0; u < R; ++u) step(u, true, true, false);
          } else {
#pragma unroll 1
            for (int u = 0; u < R; ++u) {
              const int64_t q = q0 + u;
              step(u, q < s1, q - K >= s0 && q < qend, true);
            }
          }
        }
        ccv_cp_wait<0>();
      } else {
        // with SiLU the next step's loads are issued before this step's math (instances.h)
        constexpr bool PF = SILU;
        typename Q::raw rx[U], ry[U];
        const T* xc = xp + s0 * xt;
        const T* yc = yp + s0 * yt;
        if (PF) fetch(s0, xc, yc, rx, ry);
        for (int64_t q0 = s0; q0 < qend; q0 += U) {
          typename Q::raw nx[U], ny[U];
          if (PF) {
            fetch(q0 + U, xc + U * xt, yc + U * yt, nx, ny);
          } else {
            fetch(q0, xc, yc, rx, ry);
          }
          xc += U * xt;
          yc += U * yt;
          if (q0 >= s0 + K && q0 + U <= s1) {  // the bulk of the walk: every token stores and adds
#pragma unroll
            for (int u = 0; u < U; ++u) token(q0 + u, rx[u], ry[u], true, true, false);
          } else {
#pragma unroll
            for (int u = 0; u < U; ++u) {
              const int64_t q = q0 + u;
              if (q >= qend) break;
              token(q, rx[u], ry[u], q < s1, q - K >= s0, true);
            }
          }
          if (PF) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
              rx[u] = nx[u];
              ry[u] = ny[u];
            }
          }
        }
      }
    }
  }

  // ---- partials: the lanes of a channel are added in lane order
  if (R > 0) __syncthreads();  // red overlays the ring
  put_lane_partials<W, CV, CC, NT, LANES>(P, red, dw, tid, lane, grp, c0, D, b * P.n_chunks + chunk);
}

// the activation is a compile-time choice: no per-element test in the walk
template <typename T, int W>
CCV_DEV void bwd_cls_body(const ccv_params& P) {
  constexpr int NT = CCV_NT_bwd_cls, CV = ClsCfg<T, W>::CV, LANES = NT / (CCV_CL_CC / CV);
  constexpr int RED = LANES * CCV_CL_CC * (W + 1) * 4, RING = ClsCfg<T, W>::R * 2 * NT * CV * sizeof(T);
  __shared__ float4 smem[(RED > RING ? RED : RING) / 16];
  ccv_release_dependents();
  if (P.flags & CCV_F_SILU) {
    bwd_cls_rows<T, W, true>(P, smem);
  } else {
    bwd_cls_rows<T, W, false>(P, smem);
  }
}

CCV_INSTANTIATE_W(bwd_cls)
