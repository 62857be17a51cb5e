// Forward, channel-last (x D-stride 1 on the vector path; any strides on the scalar path).
// Block = (batch row b, chunk of `P.chunk` tokens, tile of CL_CC channels); it walks its chunk
// in tiles of CL_TT tokens. A tile of x [TT + K halo rows x CC channels] is staged in shared
// memory (fp32) with 16-byte loads along channels (halo rows come from global memory); a thread
// then owns V channels (one vector) x R consecutive tokens and writes 16-byte vectors of out.
// Tokens whose window leaves their sequence take the generic per-element path.
#include "instances.h"

template <typename T, int W>
CCV_DEV void fwd_cl_body(const ccv_params& P) {
  constexpr int K = W - 1, V = Tr<T>::V, NT = CCV_NT_fwd_cl, CC = CCV_CL_CC, TT = CCV_CL_TT;
  constexpr int G = CC / V;   // threads across the channel tile
  constexpr int RP = NT / G;  // token rows per pass
  constexpr int R = TT / RP;  // consecutive tokens per thread
  constexpr int ROWS = TT + K;
  static_assert(NT % G == 0 && TT % RP == 0 && R <= 32, "tile shape");
  __shared__ float4 xs4[ROWS * CC / 4];
  __shared__ unsigned char pl[TT];
  __shared__ float wsm[W * CC + CC];  // weights [k][channel] (fp32), then bias [channel]

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
  const int64_t ob = b * P.out_s[0], os1 = P.out_s[1], os2 = P.out_s[2];
  const RowCtx rc = row_ctx(P, b);
  const bool row_ok = rc.g.valid;

  const int64_t cbeg = chunk * P.chunk;
  const int64_t cend = min(L, cbeg + P.chunk);
  for (int64_t t0 = cbeg; t0 < cend; t0 += TT) {
    stage_cl_x<T, ROWS, CC, NT, K>(P, rc, xs4, b, t0, c0, vec);
    if (tid < TT) {
      const int64_t t = t0 + tid;
      bool plain = false;
      if (t < L) {
        if (packed) {
          Seg g = seg_of(P, b, t);
          plain = g.valid && t - K >= g.s;
        } else {
          plain = row_ok && (rc.simple || t >= K);
          if (plain && seq) {
            const int64_t id0 = seqid(P, b, t);
            plain = id0 >= 0;
            for (int m = 1; m <= K; ++m)
              if (seqid(P, b, t - m) != id0) plain = false;
          }
        }
      }
      pl[tid] = plain;
    }
    __syncthreads();

    uint32_t slow = 0;
#pragma unroll 1
    for (int e = 0; e < R; ++e) {
      const int row = rr * R + e;
      const int64_t t = t0 + row;
      if (t >= L) break;
      if (!pl[row]) { slow |= 1u << e; continue; }
      float o[V];
#pragma unroll
      for (int v = 0; v < V; ++v) o[v] = wsm[W * CC + gg * V + v];
#pragma unroll
      for (int k = 0; k < W; ++k) {
        float xk[V], wk[V];
        ld_sm4<V>(xs4, (row + k) * CC + gg * V, xk);
        ld_sm4<V>((const float4*)wsm, k * CC + gg * V, wk);
#pragma unroll
        for (int v = 0; v < V; ++v) o[v] += wk[v] * xk[v];
      }
#pragma unroll
      for (int v = 0; v < V; ++v) o[v] = act_f(o[v], silu);
      if (vec && c + V <= D) {
        stv<T>(P.out, ob + t * os2 + c, o);
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v)
          if (c + v < D) stf<T>(P.out, ob + (c + v) * os1 + t * os2, o[v]);
      }
    }
    // generic path (sequence starts, seq_idx changes, skipped sequences)
    if (slow) {
#pragma unroll 1
      for (int e = 0; e < R; ++e) {
        if (!(slow & (1u << e))) continue;
        const int64_t t = t0 + rr * R + e;
#pragma unroll 1
        for (int v = 0; v < V; ++v) {
          if (c + v >= D) break;
          const WArr<W> wa = sm_weights<W>(wsm, CC, gg * V + v);
          stf<T>(P.out, ob + (c + v) * os1 + t * os2, fwd_generic<T, W>(P, b, c + v, t, wa, wsm[W * CC + gg * V + v]));
        }
      }
    }
    __syncthreads();
  }
}

CCV_INSTANTIATE_W(fwd_cl)
