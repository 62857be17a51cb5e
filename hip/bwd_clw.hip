// bwd_clw: the channel-last backward of simple rows (no seq_idx / cu_seqlens) on the vector path
// with D a multiple of the 16-byte vector, fed by per-warp rings of 16-byte asynchronous copies.
// Block = (b, chunk, tile of 64 channels) sized by kernels.rs's bwd_clw_geometry; its NG groups
// of 32 threads (a group always lies inside one warp, 32 or 64 wide) walk consecutive segments
// [s0, s1) of the chunk. Thread i of a group owns channels c0 + 2i and c0 + 2i + 1: two channels'
// windows and partials are few registers, so many warps fit per SM (bwd_cls holds four).
// Per step the group's 32 threads each copy CPT 16-byte vectors of x and CPT of dout, TS = CPT V
// / 2 tokens x 64 channels, into the group's ring slot (R - 1 steps in flight, no registers held;
// R = rows_log2, 2 to CCV_CLW_RING slots, chosen by kernels.rs per grid); after the wait and a
// warp sync each thread reads its two channels of those tokens from shared memory (consecutive 4-
// or 8-byte words: no bank conflicts). On grids of several waves (CCV_F_CLW_HALO) the tokens a
// group shares with the next one are copied at its start instead, into its halo (bwd_clw_rows).
// The math per token is bwd_cls's (ClBwdWalk, clbwd.h):
//   g(q) = dout(q) * act'(pre(q));  dweight/dbias += g(q) * x(q-K+k) for q in [s0, s1);
//   dx(q-K) = sum_k w[k] g(q-k) (+ dfinal) once q - K >= s0,
// walking q over [s0, s1 + K) with x from s0 - K (initial state or 0 before the row start).
// The groups' partials of a channel are added in group order and written to
// ws[(b*n_chunks + chunk), c, 0..W] (or stored directly, CCV_F_DIRECT), like bwd_cls's.
#include "instances.h"
#include "clbwd.h"

// The block's shape, and its shared memory: the groups' rings during the walk, the partials after
template <typename T, int W> struct ClwShape : ClwGroups<T, CCV_NT_bwd_clw> {
  typedef ClwGroups<T, CCV_NT_bwd_clw> G;
  static constexpr int UJ = G::GS / G::VPT;  // tokens of one copy round
  static constexpr int CPT = CCV_CLW_COPIES, TS = CPT * UJ, R = CCV_CLW_RING;  // R: the most slots
  static constexpr int SLOT = 2 * TS * G::CC;  // elements of one ring slot: x tokens, then dout tokens
  static constexpr int RING = G::NG * R * SLOT * (int)sizeof(T), RED = G::NG * G::CC * (W + 1) * 4;
  // The groups' halos (bwd_clw_rows): x of [s1 - K, s1 + K) and dout of [s1, s1 + K) each, up to
  // W = CCV_CLW_HALO_MAXW where static shared memory (48 KB) holds them and they cost no resident
  // block (not on CDNA, whose 64 KB LDS holds two blocks' rings).
  static constexpr int HT = 3 * (W - 1), HALO_BYTES = G::NG * HT * G::CC * (int)sizeof(T);
  static constexpr int BLOCKS = W >= CCV_CLW_WIDE ? CCV_CLW_BLOCKS_WIDE : CCV_CLW_BLOCKS;
  static constexpr bool HALO = W <= CCV_CLW_HALO_MAXW && RING + HALO_BYTES <= 48 * 1024 && clw_resident(RING + HALO_BYTES, RED, BLOCKS) >= clw_resident(RING, RED, BLOCKS);
  static constexpr int STAGE = RING + (HALO ? HALO_BYTES : 0);
  static constexpr int SMEM = STAGE > RED ? STAGE : RED;
  static_assert(R >= 2, "clw ring");
};

template <bool B> struct ClwAll { static constexpr bool value = B; };
template <typename T> constexpr bool clw_is_bf16 = false;
template <> constexpr bool clw_is_bf16<ccv_bf16> = true;

// ccv_cp_wait<n>() for a run-time n <= N
template <int N> CCV_DEV void clw_cp_wait(int n) {
  if constexpr (N > 0) {
    if (n < N) return clw_cp_wait<N - 1>(n);
  }
  ccv_cp_wait<N>();
}

template <typename T, int W, bool SILU>
CCV_DEV void bwd_clw_rows(const ccv_params& P, float4* smem) {
  typedef ClwShape<T, W> S;
  constexpr int K = W - 1, NT = S::NT, NG = S::NG, CV = S::CV, CC = S::CC;
  constexpr int V = S::V, VPT = S::VPT, UJ = S::UJ, CPT = S::CPT, TS = S::TS, SLOT = S::SLOT;
  typedef QN<T, CV> Q;
  typedef typename Q::raw Raw;
  float* red = (float*)smem;  // [NG][CC][W + 1] after the walk

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const ClwLane ln = clw_lane<typename S::G>(P, blk);  // token indices in 32 bits, offsets in 64
  const int64_t b = ln.b, chunk = ln.chunk, c0 = ln.c0, c = ln.c;
  const bool dfin = P.flags & CCV_F_DFINAL;
  const int64_t L = P.seqlen, D = P.dim;
  const int tid = threadIdx.x, gi = ln.gi, grp = ln.grp, s0 = ln.s0, s1 = ln.s1, L32 = (int)L;
  const bool mine = ln.mine;

  float dw[CV][W + 1];
  ClBwdWalk<T, W, CV, SILU>::zero_partials(dw);

  if (s0 < s1) {  // uniform over the group
    // The ring's first steps go out first and the weights' and the window's loads after them,
    // all before any is used: one round trip at a block's start, which the copies overlap. The
    // copies after the weights and a window unpacked load by load took about five (H100,
    // docs/perf.md session 26: bf16 SiLU 4x256x4096 17.6 -> 15.2 us, 1x5376x4096 61.8 -> 55.7).
    // Thread gi copies tokens u_c + j * UJ of each step, the 16-byte vector v_c of the 64 channels.
    const int64_t xt = P.x_s[2], yt = P.dout_s[2], dt = P.dx_s[2];
    const int u_c = gi / VPT, v_c = gi % VPT;
    const bool cin = c0 + v_c * V < D;
    const int qend = s1 + K, qload = min(L32, qend);
    int qi = s0 + u_c;
    const T* xi = (const T*)P.x + b * P.x_s[0] + c0 + v_c * V + qi * xt;
    const T* yi = (const T*)P.dout + b * P.dout_s[0] + c0 + v_c * V + qi * yt;
    const int R = min(max(P.rows_log2, 2), S::R);  // ring slots in use (uniform)
    T* ring = (T*)smem + grp * (S::R * SLOT);
    // The halo (CCV_F_CLW_HALO, kernels.rs `clw_halo`): the tokens this group shares with the
    // next one (x of [s1 - K, s1 + K): the next group's window and first tokens; dout of [s1, s1 +
    // K)) are copied at the walk's start, when the next group (or block) reads them too. Copied by
    // the ring at the walk's end, on grids of several waves, they had left L2 and came from DRAM
    // a second time. With the halo the ring copies x below hx0 and dout below hy0 only, and the
    // steps from hx0 on take the rest from the halo (thread gi copies vector i % VPT of token
    // i / VPT, i = gi, gi + 32, ..).
    const bool hon = S::HALO && (P.flags & CCV_F_CLW_HALO);
    const int hx0 = hon ? max(s0, s1 - K) : qload, hy0 = hon ? s1 : qload;
    T* halo = (T*)smem + NG * S::R * SLOT + grp * (S::HT * CC);
    auto copy_halo = [&]() {
      const int64_t xb = b * P.x_s[0] + c0, yb = b * P.dout_s[0] + c0;
      for (int i = gi; i < S::HT * VPT; i += S::GS) {
        const int ht = i / VPT, v = i % VPT, q = ht < 2 * K ? s1 - K + ht : s1 - 2 * K + ht;
        const bool in = c0 + v * V < D && q < qload && q >= (ht < 2 * K ? hx0 : s1);
        const T* src = ht < 2 * K ? (const T*)P.x + xb + q * xt : (const T*)P.dout + yb + q * yt;
        ccv_cp16(halo + ht * CC + v * V, src + v * V, in);
      }
    };
    auto issue = [&](int slot) {
      T* s = ring + slot * SLOT + u_c * CC + v_c * V;
#pragma unroll
      for (int j = 0; j < CPT; ++j) {
        const int q = qi + j * UJ;
        ccv_cp16(s + j * UJ * CC, xi + j * UJ * xt, cin && q < hx0);
        ccv_cp16(s + (TS + j * UJ) * CC, yi + j * UJ * yt, cin && q < hy0);
      }
      ccv_cp_commit();
      qi += TS;
      xi += TS * xt;
      yi += TS * yt;
    };
    for (int s = 0; s < R - 1; ++s) issue(s);

    ClBwdWalk<T, W, CV, SILU> wk;
    WeightBits<W, CV> wb;
    load_weight_bits<W, CV>(P, c, mine ? CV : 0, wb);
    const T* xp = (const T*)P.x + b * P.x_s[0] + c;
    Raw win[W];
    window_loads<T, W, CV, int64_t>(xp, xt, s0, mine, win);  // (64-bit indices: the SASS timed in session 26)
    weights_from_bits<W, CV>(P, wb, wk.w, wk.bias);
    const RowCtx rc = row_ctx(P, b);
    if (!rc.g.valid) {  // a skipped row: dx = 0, no partials
      ccv_cp_wait<0>();  // (its copies land before the ring's memory is the partials')
      T* dp = (T*)P.dx + b * P.dx_s[0] + c + s0 * dt;
      if (mine)
        for (int p = s0; p < s1; ++p, dp += dt) Q::st(dp, Q::zero());
    } else {
      wk.start(P, rc, win, c, s0, mine);
      // dx of token p = q - K goes to dq (advanced one token per q)
      T* dq = (T*)P.dx + b * P.dx_s[0] + c + (int64_t)(s0 - K) * dt;
      const bool dfin_row = dfin && rc.simple;
      // token q: the walk's step (dwq: its dweight terms) and dx(q - K) (dxq); the bulk passes
      // tail = false: there q < s1 <= L, so q - K < L - K never takes a dfinal term. `all` is
      // ClwAll<true> where every thread owns its channels (a whole 64-channel tile): the dx store
      // then needs no per-thread branch, which cost a convergence barrier and a reload of the
      // stride a token in the bulk step's SASS (bf16 W = 4: 496 -> 462 instructions a step; H100,
      // docs/perf.md session 36: 4x5376x4096 SiLU bf16 195.4 -> 194.8 us, f32 372.8 -> 372.3)
      auto token = [&](int q, Raw rxu, Raw ryu, bool dwq, bool dxq, bool tail, auto all) {
        wk.token(rxu, ryu, dwq, dw);
        if (dxq && (decltype(all)::value || mine)) Q::st(dq, wk.dx(P, rc, c, q - K, tail && dfin_row, L));
        dq += dt;
      };
      const ClwAll<false> some;
      const bool whole_tile = c0 + CC <= D;
      // that copy of the bulk step up to W = 5 (bf16 W = 8 ran 1.4 us slower with it, W = 6 / 7
      // even; f32 W = 8 spilled)
      constexpr bool SPLIT = W <= 5;
      // the halo's copies join the group of the first step's refill: step 0's wait (for slot 0)
      // does not include them
      if (hon) copy_halo();
      // EDGES: the walk's first step and the K tokens past its end (when it ends on a step) get
      // their own unrolled copies of the bulk step, with the per-token flags known at compile
      // time. The token-by-token path took 2.5 times the instructions a token (SASS, bf16 W = 4),
      // and a 64-token walk spent 11 of its 67 tokens there. H100 (docs/perf.md session 34, call D,
      // bf16 SiLU, µs): 1x5376x4096 57.1 -> 54.9, 4x4096x512 24.9 -> 24.4, 4x256x4096 15.0 -> 14.8,
      // 8x2048x1024 42.4 -> 42.1, 4x5376x4096 even (W = 2 190.6 -> 191.3); at W = 5 and f16 W = 8
      // the copies spilled (16 / 80 bytes; f16 W = 8 211.2 -> 258.3), so up to W = 4 and at bf16
      // W = 8 (no spill; 4x5376x4096 214.8 -> 210.2).
      constexpr bool EDGES = K <= TS && (W <= 4 || (W == 8 && clw_is_bf16<T>));
      int slot = 0;
      for (int q0 = s0; q0 < qend; q0 += TS) {
        ccv_warp_sync();  // the slot refilled next was read by every thread at the last step
        issue(slot == 0 ? R - 1 : slot - 1);
        clw_cp_wait<S::R - 1>(R - 1);
        ccv_warp_sync();  // every thread's copies of this step are visible
        T* const sw = ring + slot * SLOT + gi * CV;
        if (hon && q0 + TS > hx0) {  // this step's halo tokens into the thread's own words
          clw_halo_wait(q0, s0, (R - 1) * TS);
          const int qb = min(q0 + TS, s1 + K);
#pragma unroll 1
          for (int q = max(q0, hx0); q < qb; ++q) {
            *(Raw*)(sw + (q - q0) * CC) = *(const Raw*)(halo + (q - s1 + K) * CC + gi * CV);
            if (q >= s1) *(Raw*)(sw + (TS + q - q0) * CC) = *(const Raw*)(halo + (q - s1 + 2 * K) * CC + gi * CV);
          }
        }
        const T* sx = sw;
        const T* sy = sx + TS * CC;
        if (q0 >= s0 + K && q0 + TS <= s1 && SPLIT && whole_tile) {  // the bulk of the walk
#pragma unroll
          for (int u = 0; u < TS; ++u) token(q0 + u, *(const Raw*)(sx + u * CC), *(const Raw*)(sy + u * CC), true, true, false, ClwAll<true>());
        } else if (q0 >= s0 + K && q0 + TS <= s1) {  // (a partial channel tile)
#pragma unroll
          for (int u = 0; u < TS; ++u) token(q0 + u, *(const Raw*)(sx + u * CC), *(const Raw*)(sy + u * CC), true, true, false, some);
        } else if (EDGES && q0 == s0 && q0 + TS <= s1) {  // the first step of a walk of a step or more
#pragma unroll
          for (int u = 0; u < TS; ++u) token(q0 + u, *(const Raw*)(sx + u * CC), *(const Raw*)(sy + u * CC), true, u >= K, false, some);
        } else if (EDGES && q0 == s1 && q0 - K >= s0) {  // the K tokens past a walk ending on a step
#pragma unroll
          for (int u = 0; u < K; ++u) token(q0 + u, *(const Raw*)(sx + u * CC), *(const Raw*)(sy + u * CC), false, true, true, some);
        } else {
#pragma unroll 1
          for (int u = 0; u < TS; ++u) {
            const int q = q0 + u;
            if (q >= qend) break;
            token(q, *(const Raw*)(sx + u * CC), *(const Raw*)(sy + u * CC), q < s1, q - K >= s0, true, some);
          }
        }
        slot = slot + 1 == R ? 0 : slot + 1;
      }
      ccv_cp_wait<0>();
    }
  }

  // ---- partials: the groups of a channel are added in group order
  __syncthreads();  // red overlays the rings
  put_lane_partials<W, CV, CC, NT, NG>(P, red, dw, tid, grp, gi, c0, D, b * P.n_chunks + chunk);
}

// the activation is a compile-time choice: no per-element test in the walk
template <typename T, int W>
CCV_DEV void bwd_clw_body(const ccv_params& P) {
  __shared__ float4 smem[ClwShape<T, W>::SMEM / 16];
  ccv_release_dependents();  // the reduce launch (compat.h)
  if (P.flags & CCV_F_SILU) {
    bwd_clw_rows<T, W, true>(P, smem);
  } else {
    bwd_clw_rows<T, W, false>(P, smem);
  }
}

CCV_INSTANTIATE_W(bwd_clw)
