// Forward of small channel-first problems, one output vector per thread: ccv1d_fwd_pt_*. A thread
// issues the loads of its 16-byte vector of x, of the vectors its window reaches before it and of
// its channel's weights and bias before anything waits on memory, then stores V outputs: one
// memory round trip, no shared memory, no barrier. The tiled kernels spend more than that on
// setup, their tile's barrier and its shared-memory edges where a problem is one wave of blocks
// (seeds' Tiny and Small; H100 numbers in docs/perf.md, session 16). kernels.rs
// (`fwd_pt_launch`) picks it for small problems of simple rows (rows mode, no seq_idx) on the
// vector path with L a multiple of V; initial states, state indices and skipped rows are handled
// here, final states by the states launch as elsewhere. The smallest problems (either layout) go
// to ccv1d_fwd_pe_* below, one output element per thread.
// Grid: x = groups of channels, y = segments of a row's vectors, z = batch row; thread = (channel
// d, vector i of tokens [V i, V i + V)), 2^rows_log2 vectors of a row per channel (rows_log2 <= 7)
// and 128 >> rows_log2 channels per block. Neighbouring threads read each other's vectors for the
// window: those come from L1.
#include "instances.h"

template <typename T, int W>
CCV_DEV void fwd_pt_body(const ccv_params& P) {
  constexpr int K = W - 1, V = Tr<T>::V, LOG_NT = 7;
  constexpr int NH = (K + V - 1) / V, NHA = NH > 0 ? NH : 1;  // earlier vectors the window reaches
  static_assert(CCV_NT_fwd_pt == 1 << LOG_NT, "thread split assumes 128 threads");
  // 32-bit indices: kernels.rs keeps dim and seqlen below 2^31 here
  const int lg = P.rows_log2, tid = threadIdx.x;
  const int t = (int)(((blockIdx.y << lg) + (tid & ((1 << lg) - 1))) * V);
  const int d = (int)((blockIdx.x << (LOG_NT - lg)) + (tid >> lg));
  const int b = blockIdx.z;
  if (d >= P.dim || t >= P.seqlen) return;
  const T* xp = (const T*)P.x + b * P.x_s[0] + d * P.x_s[1];
  const ccv_vec16 raw = ccv_ld16(xp + t);
  ccv_vec16 hraw[NHA];  // the vectors [t - NH V, t)
#pragma unroll
  for (int m = 0; m < NH; ++m) {
    const int p = t - (NH - m) * V;
    hraw[m] = p >= 0 ? ccv_ld16(xp + p) : make_uint4(0u, 0u, 0u, 0u);
  }
  WeightBits<W, 1> wb;
  load_weight_bits<W, 1>(P, d, 1, wb);
  const RowCtx rc = row_ctx(P, b);
  float w[1][W], bias;
  weights_from_bits_u<W, 1>(P, wb, w, &bias);
  float win[NH * V + V];  // x at [t - NH V, t + V)
#pragma unroll
  for (int m = 0; m < NH; ++m) Tr<T>::unpack(hraw[m], win + m * V);
  Tr<T>::unpack(raw, win + NH * V);
  if (t < K) {  // the row start: the initial state (or 0) before it
#pragma unroll
    for (int i = 0; i < NH * V; ++i) {
      const int p = t - NH * V + i;
      if (p < 0) win[i] = row_halo<T>(P, rc, d, p, K);
    }
  }
  float o[V];
  auto outputs = [&](auto act) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float acc = bias;
#pragma unroll
      for (int k = 0; k < W; ++k) acc += w[0][k] * win[NH * V - K + e + k];
      o[e] = rc.g.valid ? act_f(acc, decltype(act)::value) : 0.f;  // a skipped row: 0
    }
  };
  if (P.flags & CCV_F_SILU) outputs(BoolC<true>()); else outputs(BoolC<false>());
  stv<T>(P.out, b * P.out_s[0] + d * P.out_s[1] + t, o);
}

CCV_INSTANTIATE_W(fwd_pt)

// ---------------------------------------------------------------------------------------------
// The smallest problems of either layout: ccv1d_fwd_pe_*, one output element per thread. A thread
// issues the loads of the W inputs its window reaches (the K before its own come from L1: other
// threads loaded them) and of its channel's weights and bias before anything waits, then stores
// one value. These problems are a wave or less of blocks with one warp per scheduler, so a
// thread's instructions are the time: one output a thread, as many threads as outputs.
// (Channel-last: 16-byte vectors of 8 channels a thread were 0.9 us slower than fwd_cl on the
// seeds' 16-bit shapes, 2 channels a thread 0.2 us slower than one; docs/perf.md, session 21.)
// Consecutive threads take consecutive channels of a token (channel-last x) or consecutive tokens
// of a channel (CCV_F_PE_TOKENS, channel-first x), so a warp's accesses are contiguous.
// Grid: x = groups of 2^rows_log2 along that fast dimension, y = groups of 128 >> rows_log2 along
// the other, z = batch row.
template <typename T, int W>
CCV_DEV void fwd_pe_body(const ccv_params& P) {
  constexpr int K = W - 1, LOG_NT = 7;
  static_assert(CCV_NT_fwd_pe == 1 << LOG_NT, "thread split assumes 128 threads");
  // 32-bit channel and token indices: kernels.rs keeps dim and seqlen below 2^31 here
  const int lg = P.rows_log2, tid = threadIdx.x;
  const int fast = (int)((blockIdx.x << lg) + (tid & ((1 << lg) - 1)));
  const int slow = (int)((blockIdx.y << (LOG_NT - lg)) + (tid >> lg));
  const bool tok = P.flags & CCV_F_PE_TOKENS;
  const int d = tok ? slow : fast, t = tok ? fast : slow;
  const int b = blockIdx.z;
  if (d >= P.dim || t >= P.seqlen) return;
  const T* xp = (const T*)P.x + b * P.x_s[0] + d * P.x_s[1];
  T raw[W];  // tokens [t - K, t]; raw bits until every load has gone out
#pragma unroll
  for (int j = 0; j < W; ++j) {
    const int p = t - K + j;
    raw[j] = p >= 0 ? xp[p * P.x_s[2]] : T();
  }
  WeightBits<W, 1> wb;
  load_weight_bits<W, 1>(P, d, 1, wb);
  const RowCtx rc = row_ctx(P, b);
  float w[1][W], bias;
  weights_from_bits_u<W, 1>(P, wb, w, &bias);
  float win[W];
#pragma unroll
  for (int j = 0; j < W; ++j) win[j] = Tr<T>::to_f(raw[j]);
  if (t < K) {  // the row start: the initial state (or 0) before it
#pragma unroll
    for (int j = 0; j < K; ++j)
      if (t - K + j < 0) win[j] = row_halo<T>(P, rc, d, t - K + j, K);
  }
  float acc = bias;
#pragma unroll
  for (int k = 0; k < W; ++k) acc += w[0][k] * win[k];
  const float o = !rc.g.valid ? 0.f : (P.flags & CCV_F_SILU) ? act_f(acc, true) : acc;  // skipped row: 0
  stf<T>(P.out, b * P.out_s[0] + d * P.out_s[1] + t * P.out_s[2], o);
}

CCV_INSTANTIATE_W(fwd_pe)
