// Forward, channel-last (x D-stride 1 on the vector path; any strides on the scalar path).
// Block = (batch row b, chunk of `P.chunk` tokens, tile of CL_CC channels); it walks its chunk
// in tiles of CL_TT tokens:
//   1. x rows [t0-K, t0+TT) x CC channels staged in shared memory (fp32) with 16-byte loads along
//      channels (halo rows from global memory, or the initial state before a simple row starts);
//   2. thread = (channel, half of the tile's tokens): a sliding window of W inputs in registers,
//      one shared-memory read and W FMAs per output (bank-conflict free), result to shared memory;
//      tokens whose window leaves their sequence take the generic per-element path;
//   3. the output tile is written with 16-byte stores along channels.
#include "instances.h"

template <typename T, int W>
CCV_DEV void fwd_cl_body(const ccv_params& P) {
  constexpr int K = W - 1, NT = CCV_NT_fwd_cl, CC = CCV_CL_CC, TT = CCV_CL_TT;
  constexpr int SB = sizeof(T) == 4 ? CCV_SB_fwd_cl_f32 : CCV_SB_fwd_cl_16;
  constexpr int ROWS = TT + K, NH = NT / CC, HT = TT / NH;
  static_assert(NT % CC == 0 && TT % NH == 0, "tile shape");
  __shared__ float4 xs4[ROWS * CC / 4];  // x rows [t0-K, t0+TT)
  __shared__ float4 os4[TT * CC / 4];    // out rows [t0, t0+TT)
  __shared__ unsigned char pl[TT];
  float* xs = (float*)xs4;
  float* os = (float*)os4;

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const uint32_t nct = (uint32_t)P.n_ctiles, nch = (uint32_t)P.n_chunks;
  const int64_t ct = blk % nct;
  const uint32_t r0 = blk / nct;
  const int64_t chunk = r0 % nch, b = r0 / nch;
  const int f = P.flags;
  const bool vec = f & CCV_F_VEC, seq = f & CCV_F_SEQ_IDX, packed = f & CCV_F_PACKED, silu = f & CCV_F_SILU;
  const int64_t L = P.seqlen, D = P.dim;
  const int tid = threadIdx.x, cl = tid % CC, h = tid / CC;
  const int64_t c0 = ct * CC, c = c0 + cl;

  WArr<W> wa;
  float bias = 0.f;
  if (c < D) {
    load_weights<W>(P, c, wa.w, bias);
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) wa.w[k] = 0.f;
  }
  const RowCtx rc = row_ctx(P, b);
  const bool row_ok = rc.g.valid;

  const int64_t cbeg = chunk * P.chunk;
  const int64_t cend = min(L, cbeg + P.chunk);
  for (int64_t t0 = cbeg; t0 < cend; t0 += TT) {
    stage_cl<T, ROWS, CC, NT, K, SB>(P, P.x, P.x_s, true, rc, xs4, b, t0 - K, c0, vec);
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

    // sliding window over this thread's HT tokens (rows r .. r+K of the x tile)
    const int rb = h * HT;
    float win[W];
#pragma unroll
    for (int k = 0; k < K; ++k) win[k + 1] = xs[(rb + k) * CC + cl];
    bool any_slow = false;
#pragma unroll 4
    for (int r = rb; r < rb + HT; ++r) {
#pragma unroll
      for (int k = 0; k < K; ++k) win[k] = win[k + 1];
      win[K] = xs[(r + K) * CC + cl];
      float acc = bias;
#pragma unroll
      for (int k = 0; k < W; ++k) acc += wa.w[k] * win[k];
      os[r * CC + cl] = act_f(acc, silu);
      any_slow |= !pl[r] && t0 + r < L;
    }
    if (any_slow && c < D) {  // generic path (sequence starts, seq_idx changes, skipped sequences)
#pragma unroll 1
      for (int r = rb; r < rb + HT; ++r)
        if (!pl[r] && t0 + r < L) os[r * CC + cl] = fwd_generic<T, W>(P, b, c, t0 + r, wa, bias);
    }
    __syncthreads();
    store_cl<T, TT, CC, NT>(P, P.out, P.out_s, os4, b, t0, c0, vec);
    __syncthreads();
  }
}

CCV_INSTANTIATE_W(fwd_cl)
