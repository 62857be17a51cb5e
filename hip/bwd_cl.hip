// Backward, channel-last. Block = (batch row b, chunk, tile of CL_CC channels); it walks its
// chunk in tiles of CL_TT tokens. Per tile:
//   1. x rows [t0-K, t0+TT+K) staged in shared memory (16-byte loads along channels);
//   2. g rows [t0, t0+TT+K) = dout (16-byte loads) * act'(pre) (pre recomputed from the staged
//      x), kept in shared memory;
//   3. dx for the own rows: sum_k w[k] g(t+K-k) (+ dfinal term), 16-byte stores; then the
//      dweight/dbias partials: thread (channel, half of the rows) slides over the staged g and x
//      (two scalar shared-memory reads per element, bank-conflict free) into W+1 registers.
// At the end the two halves are added in a fixed order and written to
// ws[(b*n_chunks + chunk), c, 0..W] (bwd_reduce in misc.hip sums the partials in a fixed order).
#include "instances.h"

template <typename T, int W>
CCV_DEV void bwd_cl_body(const ccv_params& P) {
  constexpr int K = W - 1, V = Tr<T>::V, NT = CCV_NT_bwd_cl, CC = CCV_CL_CC, TT = CCV_CL_TT;
  constexpr int G = CC / V, RP = NT / G, R = TT / RP;
  constexpr int XROWS = TT + 2 * K, GROWS = TT + K;
  constexpr int NH = NT / CC, HR = TT / NH;  // dweight pass: NH row groups of HR rows per channel
  static_assert(NT % G == 0 && TT % RP == 0 && R <= 32, "tile shape");
  static_assert(NT % CC == 0 && TT % NH == 0, "dweight pass shape");
  __shared__ float4 xs4[XROWS * CC / 4];  // x rows [t0-K, t0+TT+K)
  __shared__ float4 gs4[GROWS * CC / 4];  // g rows [t0, t0+TT+K)
  __shared__ float wsm[W * CC + CC];      // weights [k][channel], then bias [channel]
  __shared__ unsigned char fl[GROWS];     // bit 0: g path plain, bit 1: dx path plain
  float* xs = (float*)xs4;
  float* gs = (float*)gs4;

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const uint32_t nct = (uint32_t)P.n_ctiles, nch = (uint32_t)P.n_chunks;
  const int64_t ct = blk % nct;
  const uint32_t r0 = blk / nct;
  const int64_t chunk = r0 % nch, b = r0 / nch;
  const int f = P.flags;
  const bool vec = f & CCV_F_VEC, seq = f & CCV_F_SEQ_IDX, packed = f & CCV_F_PACKED, silu = f & CCV_F_SILU;
  const int64_t L = P.seqlen, D = P.dim;
  const int tid = threadIdx.x, gg = tid % G, rr = tid / G;
  const int64_t c0 = ct * CC, c = c0 + gg * V;
  // dweight pass mapping
  const int wc = tid % CC, wh = tid / CC;

  for (int i = tid; i < CC; i += NT) {
    float wt[W], bt = 0.f;
    if (c0 + i < D) {
      load_weights<W>(P, c0 + i, wt, bt);
    } else {
#pragma unroll
      for (int k = 0; k < W; ++k) wt[k] = 0.f;
    }
#pragma unroll
    for (int k = 0; k < W; ++k) wsm[k * CC + i] = wt[k];
    wsm[W * CC + i] = bt;
  }
  const int64_t xb = b * P.x_s[0], xs1 = P.x_s[1], xs2 = P.x_s[2];
  const int64_t yb = b * P.dout_s[0], ys1 = P.dout_s[1], ys2 = P.dout_s[2];
  const int64_t db0 = b * P.dx_s[0], ds1 = P.dx_s[1], ds2 = P.dx_s[2];
  const RowCtx rc = row_ctx(P, b);
  const bool row_ok = rc.g.valid;

  float dw[W + 1];  // channel c0 + wc; k = W: dbias
#pragma unroll
  for (int k = 0; k <= W; ++k) dw[k] = 0.f;

  const int64_t cbeg = chunk * P.chunk;
  const int64_t cend = min(L, cbeg + P.chunk);
  for (int64_t t0 = cbeg; t0 < cend; t0 += TT) {
    // ---- 1. x tile and per-row flags
    stage_cl_x<T, XROWS, CC, NT, K>(P, rc, xs4, b, t0, c0, vec);
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

    // ---- 2. g rows (own rows + K right-halo rows): every dout load first (raw vectors in
    //         registers, then fp32 into the g buffer), then g computed in place, one row at a time
    {
      constexpr int GT = GROWS * G, GI = (GT + NT - 1) / NT;
      const bool vdy = vec && c + V <= D;
      if (vdy) {
        ccv_vec16 raw[GI];
#pragma unroll
        for (int it = 0; it < GI; ++it) {
          const int i = it * NT + tid, row = i / G;  // i % G == gg
          if (i < GT && t0 + row < L && (fl[row] & 1)) raw[it] = ccv_ld16((const T*)P.dout + yb + (t0 + row) * ys2 + c);
        }
#pragma unroll
        for (int it = 0; it < GI; ++it) {
          const int i = it * NT + tid, row = i / G;
          if (i < GT && t0 + row < L && (fl[row] & 1)) {
            float dyv[V];
            Tr<T>::unpack(raw[it], dyv);
            st_sm4<V>(gs4, row * CC + gg * V, dyv);
          }
        }
      }
#pragma unroll 1
      for (int i = tid; i < GT; i += NT) {
        const int row = i / G;
        const int64_t t = t0 + row;
        float gv[V];
        if (t >= L) {
#pragma unroll
          for (int v = 0; v < V; ++v) gv[v] = 0.f;
        } else if (fl[row] & 1) {
          if (vdy) {
            ld_sm4<V>(gs4, row * CC + gg * V, gv);
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v) gv[v] = c + v < D ? ldf<T>(P.dout, yb + (c + v) * ys1 + t * ys2) : 0.f;
          }
          if (silu) {
            float z[V];
            ld_sm4<V>((const float4*)wsm, W * CC + gg * V, z);
#pragma unroll
            for (int k = 0; k < W; ++k) {
              float xk[V], wk[V];
              ld_sm4<V>(xs4, (row + k) * CC + gg * V, xk);
              ld_sm4<V>((const float4*)wsm, k * CC + gg * V, wk);
#pragma unroll
              for (int v = 0; v < V; ++v) z[v] += wk[v] * xk[v];
            }
#pragma unroll
            for (int v = 0; v < V; ++v) gv[v] = act_grad(z[v], gv[v], true);
          }
        } else {  // generic path, straight into shared memory
#pragma unroll 1
          for (int v = 0; v < V; ++v) {
            float gval = 0.f;
            if (c + v < D) {
              const WArr<W> wa = sm_weights<W>(wsm, CC, gg * V + v);
              gval = grad_generic<T, W>(P, b, c + v, t, wa, wsm[W * CC + gg * V + v]);
            }
            gs[row * CC + gg * V + v] = gval;
          }
          continue;
        }
        st_sm4<V>(gs4, row * CC + gg * V, gv);
      }
    }
    __syncthreads();

    // ---- 3a. dx for the own rows
    uint32_t slow = 0;
#pragma unroll 1
    for (int e = 0; e < R; ++e) {
      const int row = rr * R + e;
      const int64_t t = t0 + row;
      if (t >= L) break;
      if (!(fl[row] & 2)) { slow |= 1u << e; continue; }
      float o[V];
#pragma unroll
      for (int v = 0; v < V; ++v) o[v] = 0.f;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        float gk[V], wk[V];
        ld_sm4<V>(gs4, (row + K - k) * CC + gg * V, gk);
        ld_sm4<V>((const float4*)wsm, k * CC + gg * V, wk);
#pragma unroll
        for (int v = 0; v < V; ++v) o[v] += wk[v] * gk[v];
      }
      if ((f & CCV_F_DFINAL) && t >= L - K) {  // simple rows only reach here near the end
#pragma unroll
        for (int v = 0; v < V; ++v)
          if (c + v < D) o[v] += row_dfinal<T>(P, rc, c + v, t, K);
      }
      if (vec && c + V <= D) {
        stv<T>(P.dx, db0 + t * ds2 + c, o);
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v)
          if (c + v < D) stf<T>(P.dx, db0 + (c + v) * ds1 + t * ds2, o[v]);
      }
    }
    if (slow) {
#pragma unroll 1
      for (int e = 0; e < R; ++e) {
        if (!(slow & (1u << e))) continue;
        const int64_t t = t0 + rr * R + e;
#pragma unroll 1
        for (int v = 0; v < V; ++v) {
          if (c + v >= D) break;
          const WArr<W> wa = sm_weights<W>(wsm, CC, gg * V + v);
          stf<T>(P.dx, db0 + (c + v) * ds1 + t * ds2, dx_generic<T, W>(P, b, c + v, t, wa, gs + gg * V + v, t0, CC));
        }
      }
    }

    // ---- 3b. dweight/dbias partials: channel c0+wc, rows [wh*HR, wh*HR + HR)
    if (c0 + wc < D) {
      float xw[W];
#pragma unroll
      for (int k = 0; k < K; ++k) xw[k + 1] = xs[(wh * HR + k) * CC + wc];
#pragma unroll 1
      for (int r = wh * HR; r < wh * HR + HR; ++r) {
        if (t0 + r >= L) break;
#pragma unroll
        for (int k = 0; k < K; ++k) xw[k] = xw[k + 1];
        xw[K] = xs[(r + K) * CC + wc];
        const float gr = gs[r * CC + wc];
        if (fl[r] & 1) {
#pragma unroll
          for (int k = 0; k < W; ++k) dw[k] += gr * xw[k];
          dw[W] += gr;
        } else if (gr != 0.f) {
          const WArr<W> tp = taps_generic<T, W>(P, b, c0 + wc, t0 + r);
#pragma unroll
          for (int k = 0; k < W; ++k) dw[k] += gr * tp.w[k];
          dw[W] += gr;
        }
      }
    }
    __syncthreads();
  }

  // ---- partials: the NH row groups of a channel are added in order
  float* red = xs;  // [NH][CC][W+1]
#pragma unroll
  for (int k = 0; k <= W; ++k) red[(wh * CC + wc) * (W + 1) + k] = dw[k];
  __syncthreads();
  float* dst = P.ws + ((int64_t)(b * P.n_chunks + chunk) * D + c0) * (W + 1);
  for (int i = tid; i < CC * (W + 1); i += NT) {
    if (c0 + i / (W + 1) >= D) break;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < NH; ++j) s += red[j * CC * (W + 1) + i];
    dst[i] = s;
  }
}

CCV_INSTANTIATE_W(bwd_cl)
