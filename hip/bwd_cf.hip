// Backward, channel-first. Block = (group of batch rows, channel d, chunk); it walks its chunk of
// each row tile by tile (same tiles as fwd_cf). Per tile:
//   1. x over [t0-KP, t0+TILE+KP) into shared memory (16-byte loads; halos too inside simple rows),
//      dout of the own vectors into registers;
//   2. g(t) = dout * act'(pre(t)) for the own tokens (pre recomputed from x) and for the K tokens
//      after the tile (right halo) into shared memory;
//   3. dx(p) = sum_k w[k] g(p+K-k) (+ dfinal term), and the dweight/dbias partial sums
//      g(t) * x(t-K+k) in registers.
// Rows without seq_idx / cu_seqlens are plain everywhere (initial state in the left halo, dfinal
// added to the last K dx); otherwise vectors whose window (K either side) leaves their sequence
// take the generic per-element path.
// A block walks P.brows consecutive batch rows (group bg) of one channel, the same chunk of each.
// At the end the block's partials (W+1 floats) are summed in a fixed order and written to
// ws[(bg*n_chunks + chunk), d, 0..W]; bwd_reduce (misc.hip) adds the partials in a fixed order.
// Simple rows on the vector path take ccv1d_bwd_cfw_* instead (bottom of this file): warp spans
// with the neighbours' values from shuffles, no shared memory and no barriers (kernels.rs picks
// it where it was measured faster).
#include "instances.h"

// One warp's span of a simple row (common.h: span_*): IT*WS consecutive 16-byte vectors from
// token s0 (lane `lane` vector j at s0 + (j*WS + lane)*V), no shared memory, no barriers. The K x
// values before a vector and the K g values after it come from neighbouring lanes by shuffles
// (lane 0 of vector j reads lane WS-1 of vector j-1), and at the span's edges from the lanes' own
// loads: x before the span (initial state / 0 before the row start), g of the K tokens after it
// recomputed from x and dout (0 past L). The span lies inside the row; vectors before `lo`
// belong to the span before (a row's last span is moved back to end at L): they store no dx and
// add no dweight/dbias. A skipped row (no live sequence) gets dx = 0.
// HALO_SMEM: the right halo (hs[m] = g at s0 + SPAN + m) waits in the warp's K floats of shared
// memory `hs` until the dx loop reads it, instead of K registers held through phase A (see
// bwd_cfw_pass). There, with carry_in the span starting at s0 + SPAN (walked just before) left it
// in hs, and the span does not recompute it; with carry_out the span leaves its own first K g
// there for the span before it.
template <typename T, int W, int IT, bool RAGGED, bool FAST, bool HALO_SMEM>
CCV_DEV void bwd_cf_warp_span(const ccv_params& P, const RowCtx& rc, int64_t d, int64_t xrow, int64_t yrow,
                              int64_t drow, int64_t s0, int64_t lo, int lane, const float* w, float bias, bool silu,
                              float* dw, float& db, float* hs, bool carry_in, bool carry_out) {
  constexpr int K = W - 1, KA = K > 0 ? K : 1, V = Tr<T>::V, WS = CCV_WARP, SPAN = IT * WS * V;
  const int64_t L = P.seqlen;
  if (!rc.g.valid) {
    const float z[V] = {};
#pragma unroll
    for (int j = 0; j < IT; ++j) {
      const int64_t tv = s0 + (int64_t)(j * WS + lane) * V;
      if (!RAGGED || tv >= lo) stv<T>(P.dx, drow + tv, z);
    }
    return;
  }
  ccv_vec16 rx[IT], ry[IT];
#pragma unroll
  for (int j = 0; j < IT; ++j) {
    const int64_t tv = s0 + (int64_t)(j * WS + lane) * V;
    rx[j] = ccv_ld16((const T*)P.x + xrow + tv);
    ry[j] = ccv_ld16((const T*)P.dout + yrow + tv);
  }
  // span edges. Left: x before the span (span_left_halo). Right: g at e + m, e = s0 + SPAN
  // (0 from L on), computed by lane m < K; hr[k] = g at span offset lane*V + V + k - SPAN >= 0
  // (what the dx loop below reads at the span's right edge), taken by shuffles.
  float hl[KA], hr[KA];
  span_left_halo<T, K, KA>(P, rc, d, xrow, s0, lane, hl);
  {
    float gr = 0.f;
    const int64_t e = s0 + SPAN + lane;
    if (!carry_in && lane < K && e < L) {
      float z = bias;
#pragma unroll
      for (int i = 0; i < W; ++i) z += w[i] * ldf<T>(P.x, xrow + e - K + i);
      gr = act_grad(z, ldf<T>(P.dout, yrow + e), silu);
    }
    if constexpr (HALO_SMEM) {
      ccv_warp_sync();  // the span before has read hs
      if (!carry_in && lane < K) hs[lane] = gr;
      ccv_warp_sync();
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) hr[k] = ccv_shfl(gr, max(k - (WS - 1 - lane) * V, 0));
    }
  }
  // A: g of the own tokens, dweight/dbias partials
  float g[IT][V], wrap[KA];
  auto phase_a = [&](auto act) {
#pragma unroll
    for (int j = 0; j < IT; ++j) {
      float xw[K + V], dy[V];  // x at [tv-K, tv+V)
      Tr<T>::unpack(rx[j], xw + K);
      Tr<T>::unpack(ry[j], dy);
      span_x_before<V, K, KA>(j, lane, hl, wrap, xw);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        float gv = dy[e];
        if (decltype(act)::value) {
          float z = bias;
#pragma unroll
          for (int k = 0; k < W; ++k) z += w[k] * xw[e + k];
          gv = FAST ? silu_grad_fma(z, gv) : act_grad(z, gv, true);
        }
        g[j][e] = gv;
      }
      {  // (selects, not a branch: a branch here cost registers and spills)
        const bool own = !RAGGED || s0 + (int64_t)(j * WS + lane) * V >= lo;
        float xm[K + V];
#pragma unroll
        for (int i = 0; i < K + V; ++i) xm[i] = own ? xw[i] : 0.f;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const float gm = own ? g[j][e] : 0.f;
          db += gm;
#pragma unroll
          for (int k = 0; k < W; ++k) dw[k] += gm * xm[e + k];
        }
      }
    }
  };
  if (silu) phase_a(BoolC<true>()); else phase_a(BoolC<false>());
  if constexpr (HALO_SMEM) {
    // hr[k]: g at span offset lane*V + V + k - SPAN >= 0, what the dx loop reads at the span's
    // right edge: lane WS - 1 hs[k], and at dl = (V + k) / V > 1 lane WS - 1 - m hs[k - m V]
#pragma unroll
    for (int k = 0; k < K; ++k) hr[k] = hs[(V + k) / V == 1 ? k : max(k - (WS - 1 - lane) * V, 0)];
    if (carry_out) {  // g at s0 + k (k < K): lane k / V, element k % V of vector 0
      ccv_warp_sync();  // every lane has read hs
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (lane == k / V) hs[k] = g[0][k % V];
    }
  }
  // B: dx, vectors in reverse order (lanes at the span's right edge of vector j read vector j+1)
#pragma unroll
  for (int j = IT - 1; j >= 0; --j) {
    float gw[V + K], o[V];  // g at [tv, tv+V+K)
#pragma unroll
    for (int e = 0; e < V; ++e) gw[e] = g[j][e];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int dl = (V + k) / V, e = (V + k) % V;
      const float a = ccv_shfl(g[j][e], (lane + dl) & (WS - 1));
      gw[V + k] = lane + dl < WS ? a : (j == IT - 1 ? hr[k] : wrap[k]);
      wrap[k] = a;
    }
    const int64_t tv = s0 + (int64_t)(j * WS + lane) * V;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < W; ++k) acc += w[k] * gw[e + K - k];
      o[e] = acc;
    }
    if ((P.flags & CCV_F_DFINAL) && tv + V > L - K) {
#pragma unroll
      for (int e = 0; e < V; ++e) o[e] += row_dfinal<T>(P, rc, d, tv + e, K);
    }
    if (!RAGGED || tv >= lo) stv<T>(P.dx, drow + tv, o);
  }
}

// SHORT = false: ccv1d_bwd_cf_*; true: ccv1d_bwd_cfs_* (rows shorter than half a tile, one chunk
// each): the block is 2^r sub-blocks (r = P.rows_log2) of NT >> r threads, each one (b, d) row
// with its own part of the shared tiles, as in fwd_cfs; the partials are summed per sub-block.
template <typename T, int W, bool SHORT>
CCV_DEV void bwd_cf_rows(const ccv_params& P) {
  constexpr int K = W - 1, V = Tr<T>::V, NT = CCV_NT_bwd_cf, IT = CCV_CF_ITEMS, LOG_NT = 7;
  constexpr int TILE = NT * V * IT, KP = 8, HV = (K + 3) / 4 * 4, HG = (V + K + 3) / 4 * 4;
  constexpr int RMAX = SHORT ? 8 : 1;  // kernels.rs caps rows_log2 at 3
  static_assert(NT == 1 << LOG_NT, "sub-block split assumes 128 threads");
  static_assert(!SHORT || RMAX * 2 * KP + TILE >= NT * (W + 1), "partials scratch fits in the x tile");
  __shared__ float4 xb4[(RMAX * 2 * KP + TILE) / 4];  // per row: x at [t0-KP, t0+tile+KP)
  __shared__ float4 gb4[(RMAX * KP + TILE) / 4];      // per row: g at [t0, t0+tile+KP)

  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const int rl = SHORT ? P.rows_log2 : 0, ntr = NT >> rl, tiler = TILE >> rl;  // threads and tokens per row
  const int tid = SHORT ? threadIdx.x & (ntr - 1) : threadIdx.x;
  const int sub = SHORT ? threadIdx.x >> (LOG_NT - rl) : 0;
  float* xb = (float*)xb4 + sub * (2 * KP + tiler);
  float* gb = (float*)gb4 + sub * (KP + tiler);
  float4* xr4 = (float4*)xb;
  float4* gr4 = (float4*)gb;
  // 16-bit rows keep the two float4 halves of each 8-float vector in two planes (even and odd
  // float4 of the row): a warp's 16-byte accesses (one vector per thread, 32-byte stride) then
  // hit distinct banks instead of two-way conflicts. xq / gq map a row's float4 index, xf / gf
  // its float index (f32 rows: identity).
  const int rx4 = (2 * KP + tiler) / 4, rg4 = (KP + tiler) / 4;  // float4 per row (even)
  auto xq = [=](int q) { return V == 8 ? (q & 1) * (rx4 >> 1) + (q >> 1) : q; };
  auto gq = [=](int q) { return V == 8 ? (q & 1) * (rg4 >> 1) + (q >> 1) : q; };
  auto xf = [=](int i) { return xq(i >> 2) * 4 + (i & 3); };
  auto gf = [=](int i) { return gq(i >> 2) * 4 + (i & 3); };
  const uint32_t nch = (uint32_t)P.n_chunks, dm = (uint32_t)P.dim;
  const int64_t chunk = SHORT ? 0 : blk % nch;  // short rows: one chunk each (kernels.rs)
  const uint32_t rd = ((SHORT ? blk : blk / nch) << rl) + sub;  // < 8 * MAX_BLOCKS < 2^32
  // the last block's spare sub-blocks only join the barriers
  const bool active = !SHORT || (uint64_t)rd < (uint64_t)P.batch * P.dim;
  // bwd_cf: the block walks P.brows consecutive batch rows of channel d (group bg) with one set
  // of weights and one dweight/dbias partial (fewer blocks: less setup and reduction per tile).
  // bwd_cfs with P.brows = batch (a power of two <= 2^rl, kernels.rs): rows in channel-major
  // order, so a block holds every batch row of its channels and stores dweight/dbias itself.
  const int G = SHORT ? 1 : max(P.brows, 1);
  const bool by_channel = SHORT && P.brows > 1;
  // log2 of the rows per channel (shifts: run-time divisions by it cost seeds' Tiny 0.2 us)
  const int rs = by_channel ? __ffs(P.brows) - 1 : 0;
  const int64_t d = !active ? 0 : by_channel ? rd >> rs : rd % dm;
  const int64_t bg = !active ? 0 : by_channel ? rd & ((1u << rs) - 1) : rd / dm;
  const int f = P.flags;
  const bool vec = f & CCV_F_VEC, seq = f & CCV_F_SEQ_IDX, packed = f & CCV_F_PACKED, silu = f & CCV_F_SILU;
  const int64_t L = active ? P.seqlen : 0;

  WArr<W> wa;  // loaded with the first tile (below): its loads overlap the tile's
  float bias;
  const float* w = wa.w;
  const int64_t xs = P.x_s[2], ys = P.dout_s[2], ds = P.dx_s[2];

  float dw[W], db = 0.f;
#pragma unroll
  for (int k = 0; k < W; ++k) dw[k] = 0.f;

  const int64_t cbeg = chunk * P.chunk;
  const int64_t cend = min(P.seqlen, cbeg + P.chunk);  // the same trip count in every sub-block
  for (int gi = 0; gi < G; ++gi) {
    const int64_t b = bg * G + gi;
    if (b >= P.batch) break;  // the same in the whole block
    const int64_t xrow = b * P.x_s[0] + d * P.x_s[1];
    const int64_t yrow = b * P.dout_s[0] + d * P.dout_s[1];
    const int64_t drow = b * P.dx_s[0] + d * P.dx_s[1];
    const RowCtx rc = row_ctx(P, b);
    const bool row_ok = rc.g.valid;
    for (int64_t t0 = cbeg; t0 < cend; t0 += tiler) {
      // ---- 1. loads: x to shared memory in fp32; dout stays raw in registers until step 2 (steps
      // 2 and 3 read x and g back from shared memory: fewer live registers, more blocks per SM)
      ccv_vec16 raw[2][IT];
      {
        const void* const src[2] = {P.x, P.dout};
        const int64_t rows[2] = {xrow, yrow}, strides[2] = {xs, ys};
        ld_items_raw<T, IT, 2>(src, rows, strides, t0, tid, ntr, L, vec, raw);
      }
      if (gi == 0 && t0 == cbeg) load_weights<W>(P, d, wa.w, bias);
      // halos after the tile's loads: their stores wait for their loads, the tile's should not.
      // Inside a simple row on the vector path they are whole 16-byte vectors (x before and after
      // the tile, dout after it): a few threads instead of 2*KP scalar loads in the first warp.
      constexpr int NH = KP / V;  // vectors per halo side
      const bool vhalo = rc.simple && vec && t0 >= KP && t0 + tiler + KP <= L;
      if (vhalo) {
        if (tid < 3 * NH) {
          const int side = tid / NH, m = (tid % NH) * V;  // 0: x left, 1: x right, 2: dout right
          const int64_t p = side == 0 ? t0 - KP + m : t0 + tiler + m;
          float v[V];
          ldv<T>(side == 2 ? P.dout : P.x, (side == 2 ? yrow : xrow) + p, v);
          const int i0 = side == 0 ? m : side == 1 ? KP + tiler + m : tiler + m;  // float index in its row
#pragma unroll
          for (int e = 0; e < V; e += 4) {
            const float4 q = make_float4(v[e], v[e + 1], v[e + 2], v[e + 3]);
            if (side == 2) gr4[gq((i0 + e) / 4)] = q; else xr4[xq((i0 + e) / 4)] = q;
          }
        }
      } else if (tid < 2 * KP) {
        const int64_t p = tid < KP ? t0 - KP + tid : t0 + tiler + (tid - KP);
        const int idx = tid < KP ? tid : KP + tiler + (tid - KP);
        xb[xf(idx)] = (p >= 0 && p < L) ? ldf<T>(P.x, xrow + p * xs) : (p < 0 ? row_halo<T>(P, rc, d, p, K) : 0.f);
      }
      // dout of the right halo, loaded with the tile into its g slot (loaded after the barrier it
      // put a second memory round trip into every tile)
      if (tid < K && rc.simple && row_ok && !vhalo) {
        const int64_t q = t0 + tiler + tid;
        gb[gf(tiler + tid)] = q < L ? ldf<T>(P.dout, yrow + q * ys) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < IT; ++j) {
        float xv[V];
        Tr<T>::unpack(raw[0][j], xv);
#pragma unroll
        for (int m = 0; m < V; m += 4) xr4[xq((KP + (j * ntr + tid) * V + m) / 4)] = make_float4(xv[m], xv[m + 1], xv[m + 2], xv[m + 3]);
      }
      __syncthreads();

      // ---- 2. g = dout * act'(pre)
      uint32_t slow = 0;  // bit j: vector j is not entirely inside one sequence (with K margins)
      // g of vector v from its dout (gv) and x window (shared memory) into shared memory
      auto grads = [&](int64_t v, float* gv, auto act) {
        if (decltype(act)::value) {
          float win[HV + V];
#pragma unroll
          for (int m = 0; m < HV + V; m += 4) {
            float4 q = xr4[xq((KP + v * V - HV + m) / 4)];
            win[m] = q.x; win[m + 1] = q.y; win[m + 2] = q.z; win[m + 3] = q.w;
          }
#pragma unroll
          for (int e = 0; e < V; ++e) {
            float z = bias;
#pragma unroll
            for (int k = 0; k < W; ++k) z += w[k] * win[HV - K + e + k];
            gv[e] = act_grad(z, gv[e], true);
          }
        }
#pragma unroll
        for (int m = 0; m < V; m += 4) gr4[gq((v * V + m) / 4)] = make_float4(gv[m], gv[m + 1], gv[m + 2], gv[m + 3]);
      };
      // An interior tile of a live simple row (not a skipped slot) on the vector path: every vector
      // plain and whole (no per-vector checks; the activation chosen once per tile, not per
      // element).
      const bool lean = rc.simple && row_ok && vec && t0 + tiler <= L;
      if (lean) {
        auto run = [&](auto act) {
#pragma unroll
          for (int j = 0; j < IT; ++j) {
            float gv[V];
            Tr<T>::unpack(raw[1][j], gv);
            grads(j * ntr + tid, gv, act);
          }
        };
        if (silu) run(BoolC<true>()); else run(BoolC<false>());
      } else {
#pragma unroll
        for (int j = 0; j < IT; ++j) {
          const int64_t v = j * ntr + tid, tv = t0 + v * V;
          float gv[V];
          Tr<T>::unpack(raw[1][j], gv);  // 0 past L
          bool plain = true;
          if (tv < L) {
            if (packed) {
              Seg g = seg_of(P, b, tv);
              plain = g.valid && tv - K >= g.s && tv + V + K <= g.e;
            } else {
              plain = row_ok && (rc.simple || (tv >= K && tv + V + K <= L));
              if (plain && seq) {
                const int64_t id0 = seqid(P, b, tv - K);
                plain = id0 >= 0;
                for (int m = 1; m < V + 2 * K; ++m)
                  if (seqid(P, b, tv - K + m) != id0) plain = false;
              }
            }
          }
          if (!plain) {
            slow |= 1u << j;
          } else if (tv < L && silu) {
            grads(v, gv, BoolC<true>());
          } else {
            grads(v, gv, BoolC<false>());
          }
        }
      }
      if (slow) {  // generic path, straight into shared memory (one call site: small code)
#pragma unroll 1
        for (int j = 0; j < IT; ++j) {
          if (!(slow & (1u << j))) continue;
          const int64_t v = j * ntr + tid, tv = t0 + v * V;
#pragma unroll 1
          for (int e = 0; e < V; ++e) gb[gf(v * V + e)] = tv + e < L ? grad_generic<T, W>(P, b, d, tv + e, wa, bias) : 0.f;
        }
      }
      if (tid < K) {  // right halo: g at t0+tile+tid (belongs to the next tile; recomputed here)
        const int64_t q = t0 + tiler + tid;
        float gh = 0.f;
        if (q < L) {
          if (rc.simple) {
            if (row_ok) {
              float z = bias;
#pragma unroll
              for (int k = 0; k < W; ++k) z += w[k] * xb[xf(KP + tiler + tid - K + k)];
              gh = act_grad(z, gb[gf(tiler + tid)], silu);
            }
          } else {
            gh = grad_generic<T, W>(P, b, d, q, wa, bias);
          }
        }
        gb[gf(tiler + tid)] = gh;
      }
      __syncthreads();

      // ---- 3. dx and dweight/dbias partials
#pragma unroll
      for (int j = 0; j < IT; ++j) {
        const int64_t v = j * ntr + tid, tv = t0 + v * V;
        if (!lean && (tv >= L || (slow & (1u << j)))) continue;
        float gw[HG], win[HV + V], o[V];
#pragma unroll
        for (int m = 0; m < HG; m += 4) {
          float4 q = gr4[gq((v * V + m) / 4)];
          gw[m] = q.x; gw[m + 1] = q.y; gw[m + 2] = q.z; gw[m + 3] = q.w;
        }
#pragma unroll
        for (int e = 0; e < V; ++e) {
          float acc = 0.f;
#pragma unroll
          for (int k = 0; k < W; ++k) acc += w[k] * gw[e + K - k];
          o[e] = acc;
        }
        if ((f & CCV_F_DFINAL) && tv + V > L - K) {  // simple rows only reach here near the end
#pragma unroll
          for (int e = 0; e < V; ++e) o[e] += row_dfinal<T>(P, rc, d, tv + e, K);
        }
        if (lean || (vec && tv + V <= L)) {
          stv<T>(P.dx, drow + tv, o);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e)
            if (tv + e < L) stf<T>(P.dx, drow + (tv + e) * ds, o[e]);
        }
#pragma unroll
        for (int m = 0; m < HV + V; m += 4) {
          float4 q = xr4[xq((KP + v * V - HV + m) / 4)];
          win[m] = q.x; win[m + 1] = q.y; win[m + 2] = q.z; win[m + 3] = q.w;
        }
#pragma unroll
        for (int e = 0; e < V; ++e) {  // gw[e] = g of the vector's own token e
          db += gw[e];
#pragma unroll
          for (int k = 0; k < W; ++k) dw[k] += gw[e] * win[HV - K + e + k];
        }
      }
      if (slow) {
#pragma unroll 1
        for (int j = 0; j < IT; ++j) {
          if (!(slow & (1u << j))) continue;
          const int64_t tv = t0 + (j * ntr + tid) * V;
#pragma unroll 1
          for (int e = 0; e < V && tv + e < L; ++e) {
            const int64_t p = tv + e;
            WArr<W> gn;  // g at p .. p+K (< t0 + tile + KP)
#pragma unroll
            for (int i = 0; i < W; ++i) gn.w[i] = gb[gf(p - t0 + i)];
            stf<T>(P.dx, drow + p * ds, dx_generic<T, W>(P, b, d, p, wa, gn));
            // No skip of g == 0: 0 * inf taps must give NaN as in the oracle (padding adds no term:
            // taps_generic answers 0 for it, and its g is 0).
            const float gp = gb[gf(p - t0)];
            const WArr<W> tp = taps_generic<T, W>(P, b, d, p);
#pragma unroll
            for (int k = 0; k < W; ++k) dw[k] += gp * tp.w[k];
            db += gp;
          }
        }
      }
      __syncthreads();
    }
  }

  // ---- block partials → workspace (fixed-order reduction: deterministic)
  float part[W + 1], tot[W + 1];
#pragma unroll
  for (int k = 0; k < W; ++k) part[k] = dw[k];
  part[W] = db;
  if (!SHORT) {
    block_sum<W + 1, NT>(part, xb, tot);
    if (tid == 0) {
#pragma unroll
      for (int k = 0; k <= W; ++k) put_partial<W>(P, bg * P.n_chunks + chunk, d, k, tot[k]);
    }
    return;
  }
  // short rows: every thread's partials to shared memory, then one thread per (sum, k) adds the
  // values of its rows (by_channel: the 2^rs rows of a channel, else one row) in thread order
  float* red = (float*)xb4;  // free after the loop's last barrier
#pragma unroll
  for (int k = 0; k <= W; ++k) red[threadIdx.x * (W + 1) + k] = part[k];
  __syncthreads();
  const int i = threadIdx.x;
  if (i < (((W + 1) << rl) >> rs)) {
    const int r = i / (W + 1), k = i % (W + 1);
    const uint32_t rdr = ((blk / nch) << rl) + (r << rs);  // the sum's first row
    if ((uint64_t)rdr < (uint64_t)P.batch * P.dim) {
      float acc = 0.f;
      for (int t = (r << rs) * ntr; t < ((r + 1) << rs) * ntr; ++t) acc += red[t * (W + 1) + k];
      const int64_t dr = by_channel ? rdr >> rs : rdr % dm, br = by_channel ? 0 : rdr / dm;
      put_partial<W>(P, br * P.n_chunks + chunk, dr, k, acc);
    }
  }
  (void)tot;
}

template <typename T, int W>
CCV_DEV void bwd_cf_body(const ccv_params& P) { bwd_cf_rows<T, W, false>(P); }
template <typename T, int W>
CCV_DEV void bwd_cfs_body(const ccv_params& P) { bwd_cf_rows<T, W, true>(P); }

// ccv1d_bwd_cfw_*: the backward of simple rows (rows mode, no seq_idx) on the vector path with
// L % V == 0 and L >= SPAN, in warp spans only (kernels.rs bwd_warp_spans takes it wherever it
// can run: measured faster than bwd_cf at every width). A block covers channel d, batch rows
// [bg*G, bg*G + G) and one chunk; its work is the G x (chunk / SPAN) spans, taken by its warps
// in turn (warp wid: spans wid, wid + NW, ...; with CARRY each warp a run of consecutive ones,
// below), so short rows fill a block with several rows.
// One weight load and one dweight/dbias partial per block, stored as in bwd_cf. With SiLU a
// 16-bit block at the widths of bwd_cfw_body's FAST_MINW runs with silu_grad_fma (FAST), and
// again without it when a thread's sum of g is NaN.
template <typename T, int W, bool FAST, bool STATES, int NT, int IT>
CCV_DEV bool bwd_cfw_pass(const ccv_params& P, float* red, float* halo) {
  constexpr int V = Tr<T>::V, WS = CCV_WARP, NW = NT / WS;
  constexpr int SPAN = IT * WS * V;
  const uint32_t blk = block_linear();
  const int lane = threadIdx.x % WS, wid = threadIdx.x / WS;
  const uint32_t nch = (uint32_t)P.n_chunks, dm = (uint32_t)P.dim;
  const int64_t chunk = blk % nch;
  const uint32_t rd = blk / nch;
  const int64_t d = rd % dm, bg = rd / dm;
  const int G = max(P.brows, 1);
  const int64_t L = P.seqlen, cbeg = chunk * P.chunk, cend = min(L, cbeg + P.chunk);
  const int nsp = (int)((cend - cbeg + SPAN - 1) / SPAN);      // spans per row (kernels.rs: < 2^31)
  const int rows = (int)min((int64_t)G, P.batch - bg * G);     // >= 1
  constexpr bool HALO_SMEM = sizeof(T) < 4 && W >= 7, CARRY = HALO_SMEM && W == 8 && FAST;
  // The warp's first span (u = gi * nsp + s, as the walk below orders them) asked for in L2
  // before the weights are loaded: a block's channel is often no other block's, so its weights
  // come from DRAM, and the span's loads waited behind that round trip (as fwd_cf's first tile).
  // H100 SiLU (docs/perf.md session 41): bf16 8x2048x1024 39.2 -> 38.6 us, 4x256x4096 14.5 ->
  // 13.6-13.9, 4x5376x4096 182.8 -> 181.2, f32 355.6 -> 351.8; f16 W = 5 lost (184.3 -> 186.6:
  // ptxas spilled 8 bytes there), bf16 W = 5 gained (184.9 -> 183.5: its spills went).
  {
    const int total = rows * nsp, per = (total + NW - 1) / NW;  // per: CARRY's run length
    const int u = !CARRY ? wid : wid * per < total ? min(total, (wid + 1) * per) - 1 : total;
    if (u < total) {  // (a warp past the last span has none)
      const int64_t b = bg * G + u / nsp, s0 = min(cbeg + (int64_t)(u % nsp) * SPAN, L - SPAN);
      prefetch_items_l2<T, IT>((const T*)P.x + b * P.x_s[0] + d * P.x_s[1], s0, lane, WS);
      prefetch_items_l2<T, IT>((const T*)P.dout + b * P.dout_s[0] + d * P.dout_s[1], s0, lane, WS);
    }
  }
  WArr<W> wa;
  float bias;
  load_weights<W>(P, d, wa.w, bias);
  float dw[W], db = 0.f;
#pragma unroll
  for (int k = 0; k < W; ++k) dw[k] = 0.f;
  const bool silu = P.flags & CCV_F_SILU;
  // RAGGED (L % SPAN != 0): a row's last span ends at L and owns only its tokens from `lo` on;
  // a separate instance of the loop, so whole spans carry no ownership tests
  // The warp's spans u = wid, wid + NW, ... (u = gi * nsp + s), gi and s stepped without a
  // division a span: measured faster at every width but 6 (W = 4 bf16 SiLU 185.6 -> 184.9 us,
  // W = 7 204.0 -> 202.2, W = 8 219.3 -> 217.8; W = 6 193.6 -> 194.8, where ptxas spilled with
  // the extra register: docs/perf.md, session 30), so W = 6 keeps u / nsp.
  // The right halo through shared memory at 16-bit W >= 7: fewer registers in phase A, spills
  // gone (H100, bf16 4x5376x4096 SiLU, docs/perf.md session 32: W = 7 195.1 -> 189.2 us, W = 8
  // 203.7 -> 199.8; W = 4-6 and f32 W = 8 lost or stayed even). CARRY (there at W = 8 with
  // SiLU's fast gradient): each warp walks a run of consecutive spans, last first, and a span
  // takes its right halo from the one walked just before (its right neighbour in the row; in a
  // ragged walk not the row's last span, moved back to end at L): W = 8 SiLU at 7 blocks 200.0 ->
  // 197.0 us. Where the span's work is lighter its span order cost more than carrying saved
  // (W <= 7; W = 8 without activation 186.1 -> 189.3; the cause was not profiled).
  float* hs = halo + wid * (W > 1 ? W - 1 : 1);
  auto walk = [&](auto ragged) {
    constexpr bool RG = decltype(ragged)::value;
    auto span = [&](int gi, int s, bool carry_in, bool carry_out) {
      const int64_t b = bg * G + gi, lo = cbeg + (int64_t)s * SPAN;
      const RowCtx rc = STATES ? row_ctx(P, b) : stateless_row_ctx(P, b);
      const int64_t xrow = b * P.x_s[0] + d * P.x_s[1], yrow = b * P.dout_s[0] + d * P.dout_s[1];
      const int64_t drow = b * P.dx_s[0] + d * P.dx_s[1];
      bwd_cf_warp_span<T, W, IT, RG, FAST, HALO_SMEM>(P, rc, d, xrow, yrow, drow, min(lo, L - SPAN), lo, lane, wa.w, bias,
                                                      silu, dw, db, hs, carry_in, carry_out);
    };
    if constexpr (CARRY) {  // spans [u0, u0 + n), u = gi * nsp + s
      const int total = rows * nsp, per = (total + NW - 1) / NW, u0 = wid * per, n = min(total, u0 + per) - u0;
      bool carried = false;  // the span walked last is this one's right neighbour and left its g
      for (int left = n, gi = (u0 + n - 1) / nsp, s = (u0 + n - 1) % nsp; left > 0; --left) {
        const bool carry_out = left > 1 && s > 0;
        span(gi, s, carried && (!RG || s + 2 < nsp), carry_out);
        carried = carry_out;
        if (--s < 0) {
          s = nsp - 1;
          --gi;
        }
      }
    } else if constexpr (W == 6) {
      for (int u = wid; u < rows * nsp; u += NW) span(u / nsp, u % nsp, false, false);
    } else {
      for (int gi = wid / nsp, s = wid % nsp; gi < rows;) {
        span(gi, s, false, false);
        for (s += NW; s >= nsp; s -= nsp) ++gi;
      }
    }
  };
  if (L % SPAN == 0) walk(BoolC<false>()); else walk(BoolC<true>());
  float part[W + 1], tot[W + 1];
#pragma unroll
  for (int k = 0; k < W; ++k) part[k] = dw[k];
  part[W] = db;
  block_sum<W + 1, NT>(part, red, tot);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int k = 0; k <= W; ++k) put_partial<W>(P, bg * P.n_chunks + chunk, d, k, tot[k]);
  }
  return FAST && isnan(db);
}

// FAST_MINW: the least width with silu_grad_fma. bwd_cfw: 16-bit W = 5-7, and 8 without states;
// measured faster there and slower at W = 4 (H100, bf16 4x5376x4096 SiLU, docs/perf.md session
// 24: W = 5 / 6 / 7 189.7 / 196.1 / 206.6 -> 188.0 / 193.7 / 204.2 us, W = 4 188.0 -> 188.8);
// W = 8 lost with row_ctx (219.5 -> 221.4) and gains without (session 31: 210.4 -> 205.1);
// bwd_cfw7 at W = 4 (186.1 -> 185.7, f16 185.4 -> 185.1). f32 (memory-bound rows) spilled with it.
// STATES: rows with state tensors or state_indices (row_ctx a span); the bwd_cfw / bwd_cfw7
// instances take rows without (stateless_row_ctx: a constant row context; kernels/bwd.rs picks by
// the flags), bwd_cfwx / bwd_cfw7x the others. One kernel with both walks spilled where neither
// alone did (bf16 W = 4 at 7 blocks: 8 bytes; docs/perf.md, session 30).
// NT: threads a block (CCV_NT_<family>, kernels.rs launches the same). IT: 16-byte vectors a
// lane a span (kernels.rs warp_span_tokens).
template <typename T, int W, int FAST_MINW = CCV_CFW_FAST_MINW, bool STATES = false, int NT = CCV_NT_bwd_cfw,
          int IT = CCV_CF_ITEMS>
CCV_DEV void bwd_cfw_body(const ccv_params& P) {
  __shared__ float red[NT / CCV_WARP * (W + 1)];
  __shared__ float halo[NT / CCV_WARP * (W > 1 ? W - 1 : 1)];  // a warp's right halo
  if (block_linear() >= (uint64_t)P.n_blocks) return;
  if (!(P.flags & CCV_F_SILU) || sizeof(T) == 4 || W < FAST_MINW || W > (STATES ? 7 : 8)) {
    bwd_cfw_pass<T, W, false, STATES, NT, IT>(P, red, halo);
  } else if (__syncthreads_or(bwd_cfw_pass<T, W, true, STATES, NT, IT>(P, red, halo))) {
    bwd_cfw_pass<T, W, false, STATES, NT, IT>(P, red, halo);  // silu_grad_fma met z = ±inf (or NaN)
  }
}

// bwd_cfw7: the same body at a launch bound of 7 blocks (instances.h), for W <= 4
template <typename T, int W>
CCV_DEV void bwd_cfw7_body(const ccv_params& P) { bwd_cfw_body<T, W, 4>(P); }
// bwd_cfw2: the same body in blocks of 256 threads (twice bwd_cfw's warps a block, 4 blocks a
// multiprocessor at the same 64 registers), for W <= 4 (kernels/bwd.rs bwd_cfw2)
template <typename T, int W>
CCV_DEV void bwd_cfw2_body(const ccv_params& P) { bwd_cfw_body<T, W, CCV_CFW_FAST_MINW, false, CCV_NT_bwd_cfw2>(P); }
// bwd_cfwl: the same body in long spans (CCV_CFWL_ITEMS vectors a lane: half the per-span work
// an element) at fewer resident blocks (instances.h), rows without states (kernels/bwd.rs
// bwd_cfwl says where)
template <typename T, int W>
CCV_DEV void bwd_cfwl_body(const ccv_params& P) {
  bwd_cfw_body<T, W, CCV_CFWL_FAST_MINW, false, CCV_NT_bwd_cfwl, CCV_CFWL_ITEMS>(P);
}
template <typename T, int W>
CCV_DEV void bwd_cfwx_body(const ccv_params& P) { bwd_cfw_body<T, W, CCV_CFW_FAST_MINW, true>(P); }
template <typename T, int W>
CCV_DEV void bwd_cfw7x_body(const ccv_params& P) { bwd_cfw_body<T, W, 4, true>(P); }

CCV_INSTANTIATE_W(bwd_cf)
CCV_INSTANTIATE_W(bwd_cfs)
CCV_INSTANTIATE_W(bwd_cfw)
CCV_INSTANTIATE_W4(bwd_cfw7)
CCV_INSTANTIATE_W4(bwd_cfw2)
CCV_INSTANTIATE_W(bwd_cfwl)
CCV_INSTANTIATE_W(bwd_cfwx)
CCV_INSTANTIATE_W4(bwd_cfw7x)
