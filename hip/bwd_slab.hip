// Channel-last backward of tiny problems in one launch: ccv1d_bwd_slab_*. A block owns a slab of
// C = 2^rows_log2 channels [c0, c0 + C) over every batch row and every token, so it holds the
// whole dweight/dbias sum of its channels and stores it itself (CCV_F_DIRECT: no workspace, no
// reduce launch). kernels.rs picks it for simple channel-last rows (no seq_idx / cu_seqlens) on
// the vector path with at most one 16-byte vector per thread, one block per multiprocessor at most
// (the seeds' Tiny, 003's Small), where the streaming kernel's walks and its reduce launch cost
// more than the data.
//   0. the thread's 16-byte vectors of x and dout (along channels) are loaded before anything
//      waits on memory; rows' state slots (state tensors only) and the weights meanwhile;
//   1. x into xs[b][K + t][c] (rows before t = 0: the initial state or 0), dout into gs[b][t][c]
//      (rows from L on: 0); thread j handles elements j, j + NT, ... of [b][t][c], all of channel
//      c = j % C (C divides NT): g = dout * act'(pre) in place, dweight/dbias partials in registers;
//   2. dx(t) = sum_k w[k] g(t + K - k) (+ dfinal) into xs, then stored as 16-byte vectors;
//   3. the partials of a channel's NT / C threads added in a fixed order: shuffles inside a warp,
//      then warps in order (deterministic).
#include "instances.h"

// n / d and n % d for 0 <= n < 2^22 and inv = 1.f / d: the float quotient is off by at most one
// (a 32-bit division by a run-time value is about 20 instructions).
CCV_DEV int div_small(int n, int d, float inv, int& rem) {
  int q = (int)((float)n * inv);
  rem = n - q * d;
  if (rem < 0) {
    --q;
    rem += d;
  } else if (rem >= d) {
    ++q;
    rem -= d;
  }
  return q;
}

template <typename T, int W>
CCV_DEV void bwd_slab_body(const ccv_params& P) {
  constexpr int K = W - 1, KA = K > 0 ? K : 1, V = Tr<T>::V, NT = CCV_NT_bwd_slab, NV = CCV_SLAB_VECS;
  constexpr int ROWS = CCV_SLAB_ROWS, ELEMS = CCV_SLAB_ELEMS, WS = CCV_WARP, NW = NT / WS;
  __shared__ float xs[ELEMS];          // x at [b][K + t][c], t in [-K, L); later dx at [b][K + t][c]
  __shared__ float gs[ELEMS];          // dout, then g, at [b][t][c], t in [0, L + K)
  __shared__ float red[NT * (W + 1)];  // dweight/dbias partials of warps (or threads) per channel
  __shared__ int64_t slot_of[ROWS];    // per batch row: state slot, live (not skipped), initial
  __shared__ uint8_t live_of[ROWS], init_of[ROWS];  // state read

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  // tile indices in 32 bits (kernels.rs: batch * (L + K) * C <= ELEMS), offsets in 64
  const int lc = P.rows_log2, C = 1 << lc, tid = threadIdx.x;
  const int B = (int)P.batch, L = (int)P.seqlen, R = L + K;  // R: tile rows per batch row
  const int64_t D = P.dim, c0 = (int64_t)blk << lc;
  const bool silu = P.flags & CCV_F_SILU;

  // ---- 0. loads. The thread's vectors i = ((b * L) + t) * C / V + c / V; vb = -1 past the
  // slab or D.
  constexpr int LV = V == 4 ? 2 : 3;
  const int nvec = (B * L) << (lc - LV);
  const float inv_l = 1.f / L;
  int vb[NV], vt[NV], vc[NV];
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int i = tid + j * NT, c = (i & ((C >> LV) - 1)) * V;
    int t;
    const int b = div_small(i >> (lc - LV), L, inv_l, t);
    vb[j] = i < nvec && c0 + c < D ? b : -1;
    vc[j] = c;
    vt[j] = t;
  }
  auto goff = [&](const int64_t* s, int j) { return vb[j] * s[0] + (c0 + vc[j]) * s[1] + vt[j] * s[2]; };
  ccv_vec16 raw[2][NV];
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    raw[0][j] = raw[1][j] = make_uint4(0u, 0u, 0u, 0u);
    if (vb[j] >= 0) {
      raw[0][j] = ccv_ld16((const T*)P.x + goff(P.x_s, j));
      raw[1][j] = ccv_ld16((const T*)P.dout + goff(P.dout_s, j));
    }
  }
  const int cm = tid & (C - 1);  // the thread's channel in the slab
  WeightBits<W, 1> wb;
  load_weight_bits<W, 1>(P, c0 + cm, c0 + cm < D ? 1 : 0, wb);
  if (tid < B) {
    const RowCtx rc = row_ctx(P, tid);
    slot_of[tid] = rc.g.slot;
    live_of[tid] = rc.g.valid;
    init_of[tid] = rc.g.init;
  }
  __syncthreads();
  auto ctx = [&](int b) {
    RowCtx rc;
    rc.simple = true;
    rc.g.s = 0;
    rc.g.e = L;
    rc.g.i = b;
    rc.g.slot = slot_of[b];
    rc.g.valid = live_of[b];
    rc.g.init = init_of[b];
    return rc;
  };

  // ---- 1. the tiles: halos (x before t = 0, g from L on), then the staged vectors
  for (int j = tid; j < B * K * C; j += NT) {
    const int c = j & (C - 1), k = (j >> lc) % KA, b = (j >> lc) / KA;
    xs[(b * R + k) * C + c] = c0 + c < D ? row_halo<T>(P, ctx(b), c0 + c, k - K, K) : 0.f;
    gs[(b * R + L + k) * C + c] = 0.f;
  }
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    if (vb[j] < 0) continue;
    const int s0 = (vb[j] * R + vt[j]) * C + vc[j];
    float xv[V], yv[V];
    Tr<T>::unpack(raw[0][j], xv);
    Tr<T>::unpack(raw[1][j], yv);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      xs[s0 + K * C + e] = xv[e];
      gs[s0 + e] = yv[e];
    }
  }
  float w[1][W], bias[1];
  weights_from_bits<W, 1>(P, wb, w, bias);
  __syncthreads();

  // ---- 2. g in place and the partials. The thread's elements are channel cm of the rows
  // (b, t) = r0, r0 + S, ... in [0, B*L), walked without divisions
  const int S = NT >> lc, r0 = tid >> lc;
  int ST, t0;
  const int SB = div_small(S, L, inv_l, ST), b0 = div_small(r0, L, inv_l, t0);
  float dw[W + 1];
#pragma unroll
  for (int k = 0; k <= W; ++k) dw[k] = 0.f;
  for (int b = b0, t = t0; b < B;) {
    const int e = (b * R + t) * C + cm;
    float xw[W];
#pragma unroll
    for (int k = 0; k < W; ++k) xw[k] = xs[e + k * C];
    float z = bias[0];
#pragma unroll
    for (int k = 0; k < W; ++k) z += w[0][k] * xw[k];
    const float g = live_of[b] ? act_grad(z, gs[e], silu) : 0.f;
    gs[e] = g;
#pragma unroll
    for (int k = 0; k < W; ++k) dw[k] += g * xw[k];
    dw[W] += g;
    b += SB;
    t += ST;
    if (t >= L) t -= L, ++b;
  }
  // a channel's lanes in a warp (lane mod C) added by shuffles, then one slot per (warp,
  // channel); with C >= WS one per thread. Slot m holds channel m mod C either way.
#pragma unroll
  for (int k = 0; k <= W; ++k)
    for (int m = WS / 2; m >= C; m >>= 1) dw[k] += ccv_shfl_xor(dw[k], m);
  const int lane = tid % WS, nslots = C < WS ? NW * C : NT;
  if (C >= WS || lane < C) {
    const int slot = C < WS ? (tid / WS) * C + lane : tid;
#pragma unroll
    for (int k = 0; k <= W; ++k) red[slot * (W + 1) + k] = dw[k];
  }
  __syncthreads();

  // ---- 3. dx into xs (x is no longer read), then the vector stores; the channels' sums
  const bool dfin = P.flags & CCV_F_DFINAL;
  for (int b = b0, t = t0; b < B;) {
    const int e = (b * R + t) * C + cm;
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < W; ++k) acc += w[0][k] * gs[e + (K - k) * C];
    if (dfin && t >= L - K && live_of[b] && c0 + cm < D) acc += row_dfinal<T>(P, ctx(b), c0 + cm, t, K);
    xs[e + K * C] = acc;
    b += SB;
    t += ST;
    if (t >= L) t -= L, ++b;
  }
  if (tid < C * (W + 1)) {  // slots in order: at most NW terms
    const int c = tid / (W + 1), k = tid % (W + 1);
    float s = 0.f;
    for (int m = c; m < nslots; m += C) s += red[m * (W + 1) + k];
    if (c0 + c < D) put_partial<W>(P, 0, c0 + c, k, s);
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    if (vb[j] < 0) continue;
    const int s0 = (vb[j] * R + vt[j]) * C + vc[j];
    float o[V];
#pragma unroll
    for (int e = 0; e < V; ++e) o[e] = xs[s0 + K * C + e];
    ccv_st16((T*)P.dx + goff(P.dx_s, j), Tr<T>::pack(o));
  }
}

CCV_INSTANTIATE_W(bwd_slab)
