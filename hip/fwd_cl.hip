// Forward, channel-last, streamed through registers (shared memory holds only the tile's weights).
// Block = (batch row b, chunk of `P.chunk` tokens, tile of CL_CC channels), as kernels.rs sizes it.
// Thread = (4 channels, lane): CL_CC/4 channel groups x NT/(CL_CC/4) lanes; lane i walks the
// tokens [cbeg + i*S, cbeg + (i+1)*S) of the chunk (S = chunk / lanes) with a sliding window of
// W x 4 inputs in registers, loading U tokens ahead (one 16-byte f32 / 8-byte 16-bit access per
// token), and stores 4 outputs per token with one access. A lane reads the K tokens before its
// first one again (cache hits: the lane before it loaded them). Consecutive threads hold
// consecutive channel groups, so a warp's accesses cover whole 128-byte lines along channels.
// Simple rows (no seq_idx / cu_seqlens) are plain everywhere (tokens before the row start read the
// initial state or 0); otherwise tokens whose window leaves their sequence take the generic
// per-element path.
#include "instances.h"

constexpr int CL_CV = 4;  // channels per thread

// One lane's walk over tokens [s0, s1) of channels c .. c+3 of row b. FAST (simple row, vector
// path): U loads ahead, no sequence checks, the activation fixed at compile time (ACT = 1 SiLU,
// 0 none), whole steps of U tokens without per-token tests and the last tokens (fewer than a
// step) one at a time (f32 at W >= 7: a test per token, STEPS below); otherwise one token at a
// time with every check (ACT = -1: from the flags). BURST (FAST at 16-bit, W <= CCV_CL_BURST_MAXW):
// UB loads a step (fwd_cl: CCV_CL_BURST_16, fwd_cl11: CCV_CL_BURST_LONG), none ahead, and the
// last tokens (fewer than a step) in one step of predicated loads.
// Lanes of one or two steps (kernels.rs: chunks of 8 steps, or 16 of CCV_CL_BURST_16), where
// other lanes hide the latency a prefetch would: the kernel without the prefetch walk at these
// widths ran 1-2 % faster on the mid-size grids (H100, docs/perf.md session 27).
// Every thread of the block calls it with the same FAST (a lane with no token: live = false) and
// meets its one barrier, which publishes sw, the tile's weights stored by `fill_sw`: FAST lanes
// issue their first loads before the fill, so the weights' memory round trip and the data's
// overlap.
template <typename T, int W, bool FAST, int ACT, int UB = CCV_CL_BURST_16, typename Fill>
CCV_DEV void fwd_cl_walk(const ccv_params& P, const float* sw, Fill fill_sw, int64_t b, int64_t c, int64_t s0,
                         int64_t s1, bool live) {
  constexpr int K = W - 1, CV = CL_CV;
  constexpr bool BURST = FAST && sizeof(T) == 2 && W <= CCV_CL_BURST_MAXW;
  constexpr int U = BURST ? UB : sizeof(T) == 4 ? CCV_CL_AHEAD_f32(W) : CCV_CL_AHEAD_16(W);
  constexpr int UU = FAST ? U : 1;
  typedef QN<T, CV> Q;
  const int f = P.flags;
  const bool seq = f & CCV_F_SEQ_IDX, packed = f & CCV_F_PACKED;
  const bool silu = ACT < 0 ? (f & CCV_F_SILU) != 0 : ACT == 1;
  const int nc = (int)min((int64_t)CV, P.dim - c);
  const bool vec = (f & CCV_F_VEC) && nc == CV;
  if (!FAST) {
    fill_sw();
    __syncthreads();
    if (!live) return;
  }
  const int64_t xrow = b * P.x_s[0] + c * P.x_s[1], xc = P.x_s[1], xt = P.x_s[2];
  const int64_t orow = b * P.out_s[0] + c * P.out_s[1], oc = P.out_s[1], ot = P.out_s[2];
  const RowCtx rc = row_ctx(P, b);
  const bool easy = FAST || (rc.simple && rc.g.valid);  // every token plain

  const bool vv = FAST || vec;
  auto load = [&](int64_t p, float* v) {
    if (vv) {
      Q::unpack(Q::ld((const T*)P.x + xrow + p * xt), v);
    } else {
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) v[ch] = ch < nc ? ldf<T>(P.x, xrow + ch * xc + p * xt) : 0.f;
    }
  };
  // window: win[k] = x(t - K + k); before the first token x(s0 - K .. s0 - 1). FAST: raw loads
  // (wraw), unpacked after the barrier: a 16-bit unpack right after its load waited for it
  // before the next load was issued (one round trip per window token; H100 ncu, seeds' Tiny)
  float win[W][CV];
  typename Q::raw wraw[W];
#pragma unroll
  for (int k = 1; k <= K; ++k) {
    const int64_t p = s0 - K - 1 + k;
    if (FAST && p >= 0) {
      wraw[k] = live ? Q::ld((const T*)P.x + xrow + p * xt) : Q::zero();
    } else if (p >= 0) {
      load(p, win[k]);
    } else {
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) win[k][ch] = easy && live && ch < nc ? row_halo<T>(P, rc, c + ch, p, K) : 0.f;
    }
  }
  // sequence tracking (not FAST): the segment of the current token (cu_seqlens) or the seq_idx
  // of the last W tokens
  Seg sg;
  sg.s = sg.e = 0;
  if (!FAST && packed) sg = seg_of(P, b, s0);
  int64_t ids[W];
#pragma unroll
  for (int k = 1; k <= K; ++k) ids[k] = (!FAST && seq && s0 - K - 1 + k >= 0) ? seqid(P, b, s0 - K - 1 + k) : -1;

  // STEPS: whole steps without per-token tests, the last tokens apart; else a test per token
  // (f32 at W >= 7, where whole steps measured slower on the H100: 4x5376x4096 SiLU W = 7 / 8
  // 260.7 / 259.1 against 256.8 / 255.2 us; docs/perf.md, session 19)
  constexpr bool STEPS = !(sizeof(T) == 4 && W >= 7);
  // the UU tokens from t (all loads before the first use; 0 from s1 on)
  auto fetch = [&](int64_t t, typename Q::raw* r) {
    const bool whole = STEPS && t + UU <= s1;
#pragma unroll
    for (int u = 0; u < UU; ++u) {
      const int64_t q = t + u;
      if (vv) {
        r[u] = whole || q < s1 ? Q::ld((const T*)P.x + xrow + q * xt) : Q::zero();
      } else {
        float v[CV];
        load(q, v);  // q < s1: UU = 1
        r[u] = Q::pack(v);  // exact: the values came from T
      }
    }
  };
  // FAST: the next step's loads are issued before this step's math (instances.h), so a lane
  // always has loads in flight
  constexpr bool PF = FAST && !BURST && (sizeof(T) == 4 ? CCV_CL_PREFETCH_f32 : CCV_CL_PREFETCH_16);
  typename Q::raw rx[UU];
  if (FAST) {
    if (live) fetch(s0, rx);
    fill_sw();
    __syncthreads();
    if (!live) return;
  }
#pragma unroll
  for (int k = 1; k <= K; ++k)
    if (FAST && s0 - K - 1 + k >= 0) Q::unpack(wraw[k], win[k]);
  float w[CV][W], bias[CV];  // from the block's shared copy (0 past the last channel)
#pragma unroll
  for (int ch = 0; ch < CV; ++ch) {
#pragma unroll
    for (int k = 0; k < W; ++k) w[ch][k] = sw[ch * (W + 1) + k];
    bias[ch] = sw[ch * (W + 1) + W];
  }
  // token q (its x as loaded: r): slide the window, compute, store
  auto token = [&](int64_t q, typename Q::raw r) {
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) win[k][ch] = win[k + 1][ch];
    Q::unpack(r, win[K]);
    bool plain = FAST || easy;
    if (!FAST && !easy) {
      if (packed) {
        if (q >= sg.e || q < sg.s) sg = seg_of(P, b, q);
        plain = sg.valid && q - K >= sg.s;
      } else if (seq) {
#pragma unroll
        for (int k = 0; k < K; ++k) ids[k] = ids[k + 1];
        ids[K] = seqid(P, b, q);
        plain = rc.g.valid && q >= K && ids[K] >= 0;
#pragma unroll
        for (int k = 0; k < K; ++k) plain = plain && ids[k] == ids[K];
      }
    }
    float o[CV];
    if (plain) {
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) {
        float acc = bias[ch];
#pragma unroll
        for (int k = 0; k < W; ++k) acc += w[ch][k] * win[k][ch];
        o[ch] = act_f(acc, silu);
      }
    } else {  // generic path (sequence starts, seq_idx changes, skipped sequences)
#pragma unroll
      for (int ch = 0; ch < CV; ++ch) {
        WArr<W> wa;
#pragma unroll
        for (int k = 0; k < W; ++k) wa.w[k] = w[ch][k];
        o[ch] = ch < nc ? fwd_generic<T, W>(P, b, c + ch, q, wa, bias[ch]) : 0.f;
      }
    }
    if (vv) {
      Q::st((T*)P.out + orow + q * ot, Q::pack(o));
    } else {
#pragma unroll
      for (int ch = 0; ch < CV; ++ch)
        if (ch < nc) stf<T>(P.out, orow + ch * oc + q * ot, o[ch]);
    }
  };
  for (int64_t t = s0; t < s1; t += UU) {
    if (STEPS && FAST && t + UU > s1) {  // the walk's last tokens, fewer than a step
      if (BURST) {  // one step of predicated loads (0 from s1 on): one round trip
        if (t != s0) fetch(t, rx);
#pragma unroll
        for (int u = 0; u < UU; ++u) {
          if (t + u >= s1) break;
          token(t + u, rx[u]);
        }
      } else {  // one at a time
#pragma unroll 1
        for (int64_t q = t; q < s1; ++q) token(q, Q::ld((const T*)P.x + xrow + q * xt));
      }
      break;
    }
    typename Q::raw nx[UU];
    if (PF) {
      fetch(t + UU, nx);
    } else if (!FAST || t != s0) {  // (FAST: the first tokens were fetched before the barrier)
      fetch(t, rx);
    }
#pragma unroll
    for (int u = 0; u < UU; ++u) {
      if (!STEPS && t + u >= s1) break;
      token(t + u, rx[u]);
    }
    if (PF) {
#pragma unroll
      for (int u = 0; u < UU; ++u) rx[u] = nx[u];
    }
  }
}

template <typename T, int W, int UB = CCV_CL_BURST_16>
CCV_DEV void fwd_cl_body(const ccv_params& P) {
  constexpr int NT = CCV_NT_fwd_cl, CC = CCV_CL_CC, G = CC / CL_CV, LANES = NT / G;
  static_assert(NT % G == 0 && NT >= CC, "tile shape");

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const ClBlock cb = cl_block(P, blk);
  const int64_t ct = cb.ct, chunk = cb.chunk, b = cb.b;
  const int64_t L = P.seqlen, D = P.dim;
  const int tid = threadIdx.x, grp = tid % G, lane = tid / G;
  const int64_t c = ct * CC + grp * CL_CV;
  const int64_t seglen = P.chunk / LANES;
  const int64_t s0 = chunk * P.chunk + lane * seglen, s1 = min(L, s0 + seglen);
  // The tile's weights and biases, each loaded once by one thread: a thread loading its own 4
  // channels waited 4 dependent round trips before its first data load (one per channel: the
  // dtype conversion between them), which dominated small shapes (seeds' Tiny: 3.2-4.2 us).
  __shared__ float sw[CC * (W + 1)];
  auto fill_sw = [&]() {  // (the barrier is the walk's)
    if (tid < CC) {
      const int64_t d = ct * CC + tid;
      float wt[W], bt = 0.f;
#pragma unroll
      for (int k = 0; k < W; ++k) wt[k] = 0.f;
      if (d < D) load_weights<W>(P, d, wt, bt);
#pragma unroll
      for (int k = 0; k < W; ++k) sw[tid * (W + 1) + k] = wt[k];
      sw[tid * (W + 1) + W] = bt;
    }
  };
  const bool live = c < D && s0 < s1;
  const float* swc = sw + grp * CL_CV * (W + 1);
  // the same path for the whole block (the walk's barrier); D % 4 != 0 only with one token per row
  const bool simple = !(P.flags & (CCV_F_PACKED | CCV_F_SEQ_IDX));
  if (simple && (P.flags & CCV_F_VEC) && D % CL_CV == 0 && seg_by_index(P, b).valid) {
    if (P.flags & CCV_F_SILU) {
      fwd_cl_walk<T, W, true, 1, UB>(P, swc, fill_sw, b, c, s0, s1, live);
    } else {
      fwd_cl_walk<T, W, true, 0, UB>(P, swc, fill_sw, b, c, s0, s1, live);
    }
  } else {
    fwd_cl_walk<T, W, false, -1>(P, swc, fill_sw, b, c, s0, s1, live);
  }
}

// fwd_cl11: the same body with the long burst (CCV_CL_BURST_LONG tokens a step), which kernels.rs
// launches on chunks of 8 such steps (one a lane). Its own kernel: with both bursts in one,
// every grid ran 0.1-0.3 us slower (H100, docs/perf.md session 33: bf16 SiLU 4x256x4096 8.9 ->
// 9.1, 4x5376x4096 122.1 -> 122.4).
template <typename T, int W>
CCV_DEV void fwd_cl11_body(const ccv_params& P) { fwd_cl_body<T, W, CCV_CL_BURST_LONG>(P); }

CCV_INSTANTIATE_W(fwd_cl)
CCV_INSTANTIATE_W4_16(fwd_cl11)
