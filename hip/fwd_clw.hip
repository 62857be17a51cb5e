// fwd_clw: the channel-last forward of simple rows (no seq_idx / cu_seqlens) on the vector path
// with D a multiple of the 16-byte vector, fed by per-warp rings of 16-byte asynchronous copies
// (bwd_clw's scheme, x only). Block = (b, chunk, tile of 64 channels) sized by kernels.rs's
// cl_stream_geometry; its NG groups of 32 threads (a group always lies inside one warp, 32 or 64
// wide) walk consecutive segments [s0, s1) of the chunk. Thread i of a group owns channels
// c0 + 2i and c0 + 2i + 1: its window is 2 x W floats at any width (fwd_cl holds four channels'
// and spills at W >= 7).
// Per step each thread of a group copies CPT 16-byte vectors of x, together TS tokens x 64
// channels, into the group's ring slot (R steps in flight, no registers held); after the wait
// and a warp sync each thread reads its two channels of those tokens from shared memory
// (consecutive 4- or 8-byte words: no bank conflicts) and stores its two outputs of each token:
//   out(q) = act(bias + sum_k w[k] x(q - K + k)),
// with x before the row start from the initial state (or 0). No block barrier: a group that has
// no token leaves at once. On grids of two waves or more (CCV_F_CLW_HALO) a group copies its last
// K tokens, the next group's window, at its start (bwd_clw's halo, x only).
#include "instances.h"

template <typename T, int W> struct FwdClwShape : ClwGroups<T, CCV_NT_fwd_clw> {
  typedef ClwGroups<T, CCV_NT_fwd_clw> G;
  static constexpr int UJ = G::GS / G::VPT;  // tokens of one copy round
  static constexpr int CPT = CCV_FWD_CLW_COPIES, TS = CPT * UJ, R = CCV_FWD_CLW_RING;
  static constexpr int SLOT = TS * G::CC;  // elements of one ring slot
  static constexpr int RING = G::NG * R * SLOT * (int)sizeof(T);
  // The groups' halos (fwd_clw_rows): x of [s1 - K, s1) each, where it costs no resident block
  static constexpr int HALO_BYTES = G::NG * (W - 1) * G::CC * (int)sizeof(T);
  static constexpr bool HALO = W > 1 && RING + HALO_BYTES <= 48 * 1024 &&
                               clw_resident(RING + HALO_BYTES, 0, CCV_FWD_CLW_BLOCKS) >= clw_resident(RING, 0, CCV_FWD_CLW_BLOCKS);
  static constexpr int SMEM = RING + (HALO ? HALO_BYTES : 0);
  static_assert(R >= 2, "fwd_clw ring");
};

template <typename T, int W, bool SILU>
CCV_DEV void fwd_clw_rows(const ccv_params& P, T* smem) {
  typedef FwdClwShape<T, W> S;
  constexpr int K = W - 1, CV = S::CV, CC = S::CC;
  constexpr int V = S::V, VPT = S::VPT, UJ = S::UJ, CPT = S::CPT, TS = S::TS, R = S::R, SLOT = S::SLOT;
  typedef QN<T, CV> Q;
  typedef typename Q::raw Raw;

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const ClwLane ln = clw_lane<typename S::G>(P, blk);  // token indices in 32 bits, offsets in 64
  const int64_t b = ln.b, c0 = ln.c0, c = ln.c, D = P.dim;
  const int gi = ln.gi, grp = ln.grp, s0 = ln.s0, s1 = ln.s1;
  const bool mine = ln.mine;
  if (s0 >= s1) return;  // uniform over the group
  const RowCtx rc = row_ctx(P, b);
  const int64_t xt = P.x_s[2], ot = P.out_s[2];
  T* op = (T*)P.out + b * P.out_s[0] + c + (int64_t)s0 * ot;
  if (!rc.g.valid) {  // a skipped row: out = 0
    if (mine)
      for (int q = s0; q < s1; ++q, op += ot) Q::st(op, Q::zero());
    return;
  }

  // this thread's copies: tokens u_c + j * UJ of each step, the 16-byte vector v_c of the 64
  // channels; issued first, so the weights' and the window's round trips overlap them
  const int u_c = gi / VPT, v_c = gi % VPT;
  const bool cin = c0 + v_c * V < D;
  int qi = s0 + u_c;
  const T* xi = (const T*)P.x + b * P.x_s[0] + c0 + v_c * V + (int64_t)qi * xt;
  T* ring = smem + grp * (R * SLOT);
  // The halo (CCV_F_CLW_HALO; bwd_clw's, x only): the group's last K tokens are the next group's
  // window, which that group loads at its start; copied by the ring at this walk's end, on grids
  // of several waves, they would come from DRAM a second time. So they are copied at the start,
  // into the group's halo, and the steps from hx0 on take them from there.
  const bool hon = S::HALO && (P.flags & CCV_F_CLW_HALO);
  const int hx0 = hon ? max(s0, s1 - K) : s1;
  T* halo = smem + S::NG * R * SLOT + grp * (K * CC);
  auto issue = [&](int slot) {
    T* s = ring + slot * SLOT + u_c * CC + v_c * V;
#pragma unroll
    for (int j = 0; j < CPT; ++j) ccv_cp16(s + j * UJ * CC, xi + j * UJ * xt, cin && qi + j * UJ < hx0);
    ccv_cp_commit();
    qi += TS;
    xi += TS * xt;
  };
#pragma unroll
  for (int s = 0; s < R - 1; ++s) issue(s);

  float w[CV][W], bias[CV];
  load_weights_c<W, CV>(P, c, mine ? CV : 0, w, bias);
  // win[k] = x(q - K + k) after token q; before s0: x(s0 - K .. s0 - 1), every load issued
  // before the first unpack (window_loads; H100, docs/perf.md session 26: W = 8 4x5376x4096
  // 135.1 -> 131.0 us). Converting the weights after these loads instead was slower (131.9).
  float win[W][CV];
  Raw wraw[W];
  window_loads<T, W, CV>((const T*)P.x + b * P.x_s[0] + c, xt, s0, mine, wraw);
#pragma unroll
  for (int k = 1; k <= K; ++k) {
    const int p = s0 - K - 1 + k;
    if (mine && p >= 0) {
      Q::unpack(wraw[k], win[k]);
    } else {
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) win[k][ch] = mine ? row_halo<T>(P, rc, c + ch, p, K) : 0.f;
    }
  }
  auto token = [&](Raw rx) {
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) win[k][ch] = win[k + 1][ch];
    Q::unpack(rx, win[K]);
    float o[CV];
#pragma unroll
    for (int ch = 0; ch < CV; ++ch) {
      float acc = bias[ch];
#pragma unroll
      for (int k = 0; k < W; ++k) acc += w[ch][k] * win[k][ch];
      o[ch] = act_f(acc, SILU);
    }
    if (mine) Q::st(op, Q::pack(o));
    op += ot;
  };

  if (hon) {  // (joins the group of the first step's refill, as in bwd_clw)
    const T* xb = (const T*)P.x + b * P.x_s[0] + c0;
    for (int i = gi; i < K * VPT; i += S::GS) {
      const int ht = i / VPT, v = i % VPT, q = s1 - K + ht;
      ccv_cp16(halo + ht * CC + v * V, xb + v * V + (int64_t)q * xt, c0 + v * V < D && q >= hx0);
    }
  }
  int slot = 0;
  for (int q0 = s0; q0 < s1; q0 += TS) {
    ccv_warp_sync();  // the slot refilled next was read by every thread at the last step
    issue(slot == 0 ? R - 1 : slot - 1);
    ccv_cp_wait<R - 1>();
    ccv_warp_sync();  // every thread's copies of this step are visible
    T* const sw = ring + slot * SLOT + gi * CV;
    if (hon && q0 + TS > hx0) {  // this step's halo tokens into the thread's own words
      clw_halo_wait(q0, s0, (R - 1) * TS);
      const int qb = min(q0 + TS, s1);
#pragma unroll 1
      for (int q = max(q0, hx0); q < qb; ++q) *(Raw*)(sw + (q - q0) * CC) = *(const Raw*)(halo + (q - s1 + K) * CC + gi * CV);
    }
    const T* sx = sw;
    if (q0 + TS <= s1) {
#pragma unroll
      for (int u = 0; u < TS; ++u) token(*(const Raw*)(sx + u * CC));
    } else {
#pragma unroll 1
      for (int u = 0; u < s1 - q0; ++u) token(*(const Raw*)(sx + u * CC));
    }
    slot = slot + 1 == R ? 0 : slot + 1;
  }
  ccv_cp_wait<0>();  // the copies past s1 (zero fills) before the ring is released
}

// the activation is a compile-time choice: no per-element test in the walk
template <typename T, int W>
CCV_DEV void fwd_clw_body(const ccv_params& P) {
  __shared__ float4 smem[FwdClwShape<T, W>::SMEM / 16];
  if (P.flags & CCV_F_SILU) {
    fwd_clw_rows<T, W, true>(P, (T*)smem);
  } else {
    fwd_clw_rows<T, W, false>(P, (T*)smem);
  }
}

CCV_INSTANTIATE_W(fwd_clw)
