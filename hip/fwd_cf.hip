// Forward, channel-first (x L-stride 1 on the vector path; any strides on the scalar path).
// Block = (batch row b, channel d, chunk of `P.chunk` tokens); it walks its chunk tile by tile.
// Short rows (P.rows_log2 = r > 0, only when a row fits one tile of NT >> r threads): the block
// is 2^r independent sub-blocks, each one (b, d) row with its own edge slots.
// A tile: each thread loads ITEMS 16-byte vectors of x and keeps them in registers; only the
// last E (>= K) values of each vector go to shared memory ("edges", one conflict-free 16-byte
// store per vector), with the K tokens before the tile (halo) from global memory; after one
// barrier each thread reads the edge before each of its vectors and computes V outputs. The
// edges are double-buffered, so a tile needs one barrier. Interior tiles of live simple rows (no
// seq_idx / cu_seqlens, not a skipped slot) take a lean path without per-vector checks (the halo
// before the row start holds the initial state or 0); otherwise vectors whose window leaves
// their sequence (sequence starts, id changes, skipped slots) take the generic per-element path
// (out of line, scalar).
// (Before, whole vectors went through shared memory as fp32 with two barriers per tile: 16-bit
// 8x2048x1024 fwd 39.2 -> 33.3 us on the H100.)
#include "instances.h"

// SHORT = false: ccv1d_fwd_cf_* (rows_log2 = 0, all index math compile-time); true:
// ccv1d_fwd_cfs_* (rows_log2 from the params). Two kernels, not one with a runtime split: that
// cost the plain path its registers (64 with spills instead of 45 at W=4).
template <typename T, int W, bool SHORT>
CCV_DEV void fwd_cf_rows(const ccv_params& P) {
  constexpr int K = W - 1, V = Tr<T>::V, NT = CCV_NT_fwd_cf, IT = CCV_CF_ITEMS, LOG_NT = 7;
  constexpr int HV = (K + 3) / 4 * 4;                 // window floats before a vector (0, 4 or 8)
  constexpr int E = HV == 0 ? 4 : (HV < V ? HV : V);  // edge floats per vector slot
  constexpr int NHS = HV == 0 ? 1 : HV / E;           // slots a window spans (2: f32 with K > 4)
  // 16-bit at W >= 6 (a window's K > 4 values span a whole vector): the edge is the raw 16-byte
  // vector, one shared store and one load a vector instead of two float4 planes of each, and the
  // K values unpacked from it. Fewer registers: W = 7 runs at 12 blocks (instances.h; 12 bytes
  // spilled against 92 with float edges). H200 SiLU 4x5376x4096 bf16, µs (docs/perf.md session
  // 47): W = 6 97.0 -> 95.6, W = 7 101.9 -> 95.9, W = 8 99.8 -> 98.7.
  constexpr bool RAWE = V == 8 && HV == V;
  constexpr int NPL = RAWE ? 1 : E / 4;               // float4 planes of an edge
  constexpr int MAXR = SHORT ? 8 : 1;                 // kernels.rs caps rows_log2 at 3
  constexpr int NS = IT * NT + NHS * MAXR;            // slots: per row NHS halo, one per vector
  static_assert(NT == 1 << LOG_NT, "sub-block split assumes 128 threads");
  // x edges (the last E values of every vector, and the halo before the tile), two buffers:
  // tile i uses buffer i % 2, so one barrier per tile separates writes from reads
  __shared__ float4 xe4[2][NPL * NS];

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const int rl = SHORT ? P.rows_log2 : 0, ntr = NT >> rl, tiler = (NT * V * IT) >> rl;  // threads and tokens per row
  const int tid = SHORT ? threadIdx.x & (ntr - 1) : threadIdx.x;
  const int sub = SHORT ? threadIdx.x >> (LOG_NT - rl) : 0;
  const int sbase = sub * (IT * ntr + NHS);  // this row's first slot
  const uint32_t nch = (uint32_t)P.n_chunks, dm = (uint32_t)P.dim;
  const int64_t chunk = SHORT ? 0 : blk % nch;  // short rows: one chunk each (kernels.rs)
  const uint32_t rd = ((SHORT ? blk : blk / nch) << rl) + sub;  // < 8 * MAX_BLOCKS < 2^32
  // the last block's spare sub-blocks only join the barriers
  const bool active = !SHORT || (uint64_t)rd < (uint64_t)P.batch * P.dim;
  const int64_t d = active ? rd % dm : 0, b = active ? rd / dm : 0;
  const int f = P.flags;
  const bool vec = f & CCV_F_VEC, seq = f & CCV_F_SEQ_IDX, packed = f & CCV_F_PACKED, silu = f & CCV_F_SILU;
  const int64_t L = active ? P.seqlen : 0;

  const int64_t xrow = b * P.x_s[0] + d * P.x_s[1], xs = P.x_s[2];
  const int64_t orow = b * P.out_s[0] + d * P.out_s[1], os = P.out_s[2];
  const int64_t cbeg = chunk * P.chunk;
  const int64_t cend = min(P.seqlen, cbeg + P.chunk);  // the same trip count in every sub-block
  // Weights: short rows (one tile per row) load them with the tile (below), so their loads
  // overlap the tile's; long rows load them here (loaded later, they made fwd_cf spill at its
  // 40 registers), after asking for the first tile's lines in L2: loaded after the weights
  // alone, the tile waited a whole DRAM round trip behind them when the weight row had left L2
  // (H100, f32 rows of one tile, SiLU: 1x16384x1024 50.4 -> 46.9 us, 8x2048x1024 47.1 -> 46.3,
  // the same grid; bf16 W = 5 4x5376x4096 121.9 -> 119.6; docs/perf.md session 41).
  WArr<W> wa;
  float bias;
  if (!SHORT) {
    if (vec && cbeg + tiler <= L) prefetch_items_l2<T, IT>((const T*)P.x + xrow, cbeg, tid, ntr);
    load_weights<W>(P, d, wa.w, bias);
  }
  const float* w = wa.w;
  const RowCtx rc = row_ctx(P, b);
  const bool row_ok = rc.g.valid;

  int buf = 0;
  for (int64_t t0 = cbeg; t0 < cend; t0 += tiler, buf ^= 1) {
    float4* const xe4b = xe4[buf];
    ccv_vec16 raw[1][IT];
    {
      const void* const src[1] = {P.x};
      const int64_t rows[1] = {xrow}, strides[1] = {xs};
      ld_items_raw<T, IT, 1>(src, rows, strides, t0, tid, ntr, L, vec, raw);
    }
    // the halo and (short rows) the weights after the tile's loads, stores and conversions after
    // all of them: one memory round trip (weights converted before the tile's loads made it two)
    const bool halo = tid < HV && active;
    float hx = 0.f;
    if (halo) {
      const int64_t p = t0 - HV + tid;
      hx = p >= 0 ? ldf<T>(P.x, xrow + p * xs) : row_halo<T>(P, rc, d, p, K);
    }
    if (SHORT && t0 == cbeg) load_weights<W>(P, d, wa.w, bias);
    if constexpr (RAWE) {
      if (halo) ((uint16_t*)xe4b)[sbase * V + tid] = Tr<T>::from_f(hx).u;  // exact: hx is a T
    } else {
      if (halo) ((float*)xe4b)[((tid % E) / 4 * NS + sbase + tid / E) * 4 + (tid & 3)] = hx;
    }
#pragma unroll
    for (int j = 0; j < IT; ++j) {
      const int s = sbase + NHS + j * ntr + tid;
      if (RAWE) {
        ((ccv_vec16*)xe4b)[s] = raw[0][j];
        continue;
      }
      float xv[V];
      Tr<T>::unpack(raw[0][j], xv);
#pragma unroll
      for (int m = 0; K > 0 && m < E; m += 4) xe4b[(m / 4) * NS + s] = make_float4(xv[V - E + m], xv[V - E + m + 1], xv[V - E + m + 2], xv[V - E + m + 3]);
    }
    __syncthreads();
    // x at [tv-HV, tv+V) of vector j (v = j*ntr + tid): the edges before it, then its own
    auto window = [&](int j, int v, float* win) {
      const int s = sbase + NHS + v;
      if (RAWE) Tr<T>::unpack(((const ccv_vec16*)xe4b)[s - 1], win);
#pragma unroll
      for (int m = 0; !RAWE && m < HV; m += 4) {
        const float4 q = xe4b[((m % E) / 4) * NS + s - NHS + m / E];
        win[m] = q.x; win[m + 1] = q.y; win[m + 2] = q.z; win[m + 3] = q.w;
      }
      Tr<T>::unpack(raw[0][j], win + HV);
    };
    auto outputs = [&](const float* win, float* o, auto act) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        float acc = bias;
#pragma unroll
        for (int k = 0; k < W; ++k) acc += w[k] * win[HV - K + e + k];
        o[e] = act_f(acc, decltype(act)::value);
      }
    };
    // An interior tile of a live simple row (not a skipped slot) on the vector path: every vector
    // plain and whole, no per-vector checks, and the activation chosen once per tile instead of
    // per element. Short rows also when their one tile is partial but no vector straddles L
    // (vectors from L on skipped): seeds' Tiny f32 2.3 -> 2.0 us.
    const bool whole = t0 + tiler <= L;
    if (rc.simple && row_ok && vec && (whole || (SHORT && L % V == 0))) {
      auto lean = [&](auto act) {
#pragma unroll
        for (int j = 0; j < IT; ++j) {
          const int v = j * ntr + tid;
          if (SHORT && !whole && t0 + v * V >= L) continue;
          float win[HV + V], o[V];
          window(j, v, win);
          outputs(win, o, act);
          stv<T>(P.out, orow + t0 + v * V, o);
        }
      };
      if (silu) lean(BoolC<true>()); else lean(BoolC<false>());
      continue;
    }
    unsigned slow = 0;  // bit j: vector j takes the generic path
#pragma unroll
    for (int j = 0; j < IT; ++j) {
      const int64_t v = j * ntr + tid, tv = t0 + v * V;
      if (tv >= L) continue;  // nothing to do
      bool plain;
      if (packed) {
        Seg g = seg_of(P, b, tv);
        plain = g.valid && tv - K >= g.s && tv + V <= g.e;
      } else {
        bool pl = row_ok && (rc.simple || tv >= K);
        if (pl && seq) {
          const int64_t id0 = seqid(P, b, tv - K);
          pl = id0 >= 0;
          for (int m = 1; m < K + V; ++m)
            if (tv - K + m < L && seqid(P, b, tv - K + m) != id0) pl = false;
        }
        plain = pl;
      }
      if (!plain) { slow |= 1u << j; continue; }
      float win[HV + V], o[V];
      window(j, (int)v, win);
      if (silu) outputs(win, o, BoolC<true>()); else outputs(win, o, BoolC<false>());
      if (vec && tv + V <= L) {
        stv<T>(P.out, orow + tv, o);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e)
          if (tv + e < L) stf<T>(P.out, orow + (tv + e) * os, o[e]);
      }
    }
    // generic path: sequence starts, seq_idx changes, skipped rows (rare; scalar, out of line)
#pragma unroll 1
    for (int j = 0; j < IT; ++j) {
      if (!(slow & (1u << j))) continue;
      const int64_t tv = t0 + (j * ntr + tid) * V;
#pragma unroll 1
      for (int e = 0; e < V && tv + e < L; ++e)
        stf<T>(P.out, orow + (tv + e) * os, fwd_generic<T, W>(P, b, d, tv + e, wa, bias));
    }
  }
}

// ccv1d_fwd_cfw_*: the forward of simple rows (rows mode, no seq_idx) on the vector path with
// L % V == 0 and L >= SPAN in warp spans (common.h span_*), as bwd_cfw (bwd_cf.hip): a lane
// computes the outputs of its own vectors from their x and the K values before them (shuffles);
// a block's warps take the G x (chunk / SPAN) spans of its channel in turn; a row's last span
// ends at L and stores only the vectors from `lo` on. A skipped row (no live sequence) gets 0.
// `ready()` runs once the span's loads are issued, before w and bias are read (the warp's first
// span converts the weights there: their round trip overlaps the span's).
template <typename T, int W, bool RAGGED, typename Ready>
CCV_DEV void fwd_cf_warp_span(const ccv_params& P, const RowCtx& rc, int64_t d, int64_t xrow, int64_t orow, int64_t s0,
                              int64_t lo, int lane, const float* w, const float& bias, bool silu, Ready ready) {
  constexpr int K = W - 1, KA = K > 0 ? K : 1, V = Tr<T>::V, WS = CCV_WARP, IT = CCV_CF_ITEMS;
  ccv_vec16 rx[IT];
#pragma unroll
  for (int j = 0; j < IT; ++j) rx[j] = ccv_ld16((const T*)P.x + xrow + s0 + (int64_t)(j * WS + lane) * V);
  float hl[KA], wrap[KA];
  span_left_halo<T, K, KA>(P, rc, d, xrow, s0, lane, hl);
  ready();
  const bool live = rc.g.valid;
#pragma unroll
  for (int j = 0; j < IT; ++j) {
    const int64_t tv = s0 + (int64_t)(j * WS + lane) * V;
    float xw[K + V], o[V];  // x at [tv-K, tv+V)
    Tr<T>::unpack(rx[j], xw + K);
    span_x_before<V, K, KA>(j, lane, hl, wrap, xw);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float z = bias;
#pragma unroll
      for (int k = 0; k < W; ++k) z += w[k] * xw[e + k];
      o[e] = live ? act_f(z, silu) : 0.f;
    }
    if (!RAGGED || tv >= lo) stv<T>(P.out, orow + tv, o);
  }
}

template <typename T, int W>
CCV_DEV void fwd_cfw_body(const ccv_params& P) {
  constexpr int V = Tr<T>::V, NT = CCV_NT_fwd_cfw, WS = CCV_WARP, NW = NT / WS, SPAN = CCV_CF_ITEMS * WS * V;
  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const int lane = threadIdx.x % WS, wid = threadIdx.x / WS;
  const uint32_t nch = (uint32_t)P.n_chunks, dm = (uint32_t)P.dim;
  const int64_t chunk = blk % nch;
  const uint32_t rd = blk / nch;
  const int64_t d = rd % dm, bg = rd / dm;
  const int G = max(P.brows, 1);
  const int64_t L = P.seqlen, cbeg = chunk * P.chunk, cend = min(L, cbeg + P.chunk);
  WeightBits<W, 1> wb;  // converted in the warp's first span, after its loads
  load_weight_bits<W, 1>(P, d, 1, wb);
  WArr<W> wa;
  float bias;
  auto convert = [&]() { weights_from_bits<W, 1>(P, wb, (float(*)[W])wa.w, &bias); };
  const bool silu = P.flags & CCV_F_SILU;
  const int nsp = (int)((cend - cbeg + SPAN - 1) / SPAN);   // spans per row (kernels.rs: < 2^31)
  const int rows = (int)min((int64_t)G, P.batch - bg * G);  // >= 1
  auto walk = [&](auto ragged) {
    auto span = [&](int u, auto ready) {
      const int gi = u / nsp;
      const int64_t b = bg * G + gi, lo = cbeg + (int64_t)(u - gi * nsp) * SPAN;
      fwd_cf_warp_span<T, W, decltype(ragged)::value>(P, row_ctx(P, b), d, b * P.x_s[0] + d * P.x_s[1],
                                                      b * P.out_s[0] + d * P.out_s[1], min(lo, L - SPAN), lo, lane,
                                                      wa.w, bias, silu, ready);
    };
    if (wid < rows * nsp) span(wid, convert);
    for (int u = wid + NW; u < rows * nsp; u += NW) span(u, [] {});
  };
  if (L % SPAN == 0) walk(BoolC<false>()); else walk(BoolC<true>());
}

template <typename T, int W>
CCV_DEV void fwd_cf_body(const ccv_params& P) { fwd_cf_rows<T, W, false>(P); }
template <typename T, int W>
CCV_DEV void fwd_cfs_body(const ccv_params& P) { fwd_cf_rows<T, W, true>(P); }

CCV_INSTANTIATE_W(fwd_cf)
CCV_INSTANTIATE_W(fwd_cfs)
CCV_INSTANTIATE_W(fwd_cfw)
