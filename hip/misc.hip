// Small kernels: decode update, final states (forward), dinitial_states (backward), and the
// fixed-order reduction of the dweight/dbias partials.
#include "instances.h"

// Euclidean a mod m (m > 0)
CCV_DEV int64_t emod(int64_t a, int64_t m) {
  int64_t r = a % m;
  return r < 0 ? r + m : r;
}

// ---------------------------------------------------------------- update (decode)
// Thread = (channel d, P.chunk consecutive batch rows): the weights and bias are loaded once per
// thread and reused for its rows (kernels.rs groups rows only when the grid has more than a wave
// of blocks anyway). Per row: reads the K previous inputs from conv_state, updates the state
// (shift, or circular writes with cache_seqlens) reading x before any output is written, then
// produces the S outputs with a sliding window in registers: out may be x (in place).
template <typename T, int W>
CCV_DEV void update_row(const ccv_params& P, int64_t b, int64_t d, const float* w, float bias) {
  constexpr int K = W - 1;
  const int f = P.flags;
  const int64_t S = P.seqlen, sl = P.state_len;
  const int64_t xrow = b * P.x_s[0] + d * P.x_s[1], xs = P.x_s[2];
  const int64_t orow = b * P.out_s[0] + d * P.out_s[1], os = P.out_s[2];
  const int64_t slot = (f & CCV_F_STATE_IDX) ? (int64_t)P.state_idx[b * P.si_s] : b;
  if (slot < 0 || slot >= P.num_slots) {  // padding row (or a slot out of range): out = 0, state untouched
    for (int64_t s = 0; s < S; ++s) stf<T>(P.out, orow + s * os, 0.f);
    return;
  }
  const int64_t crow = slot * P.cs_s[0] + d * P.cs_s[1], cs = P.cs_s[2];
  float win[K > 0 ? K : 1];
  const bool silu = f & CCV_F_SILU;
  if (S == 1 && sl >= K && !(f & CCV_F_CACHE_SEQLENS)) {
    // The decode step: one token, state shifted by one. Each state element is read once.
    const float xv = ldf<T>(P.x, xrow);
#pragma unroll
    for (int j = 0; j < K; ++j) win[j] = ldf<T>(P.conv_state, crow + (sl - K + j) * cs);
    // positions [0, sl - max(K, 1)) take old[j + 1]; [sl - K, sl - 1) the window; sl - 1 takes x
    constexpr int KS = K > 0 ? K : 1;
    for (int64_t j = 0; j + KS < sl; ++j) stf<T>(P.conv_state, crow + j * cs, ldf<T>(P.conv_state, crow + (j + 1) * cs));
#pragma unroll
    for (int j = 1; j < K; ++j) stf<T>(P.conv_state, crow + (sl - K + j - 1) * cs, win[j]);
    if (sl > 0) stf<T>(P.conv_state, crow + (sl - 1) * cs, xv);
    float acc = bias + w[K] * xv;
#pragma unroll
    for (int k = 0; k < K; ++k) acc += w[k] * win[k];
    stf<T>(P.out, orow, act_f(acc, silu));
    return;
  }
  if (sl <= 0) {
    // state_len = 0 (width 1): no state to read or write
  } else if (f & CCV_F_CACHE_SEQLENS) {
    const int64_t c = P.cache_seqlens[b * P.csl_s];
    int64_t idx = emod(c - K, sl);
#pragma unroll
    for (int j = 0; j < K; ++j) {
      win[j] = ldf<T>(P.conv_state, crow + idx * cs);
      if (++idx == sl) idx = 0;
    }
    idx = emod(c, sl);
    for (int64_t s = 0; s < S; ++s) {  // later s wins
      stf<T>(P.conv_state, crow + idx * cs, ldf<T>(P.x, xrow + s * xs));
      if (++idx == sl) idx = 0;
    }
  } else {
#pragma unroll
    for (int j = 0; j < K; ++j) win[j] = ldf<T>(P.conv_state, crow + (sl - K + j) * cs);
    for (int64_t j = 0; j < sl; ++j) {  // state = concat(state, x)[S:], ascending (in-place safe)
      const float v = j + S < sl ? ldf<T>(P.conv_state, crow + (j + S) * cs) : ldf<T>(P.x, xrow + (j + S - sl) * xs);
      stf<T>(P.conv_state, crow + j * cs, v);
    }
  }
  for (int64_t s = 0; s < S; ++s) {
    const float xv = ldf<T>(P.x, xrow + s * xs);
    float acc = bias + w[K] * xv;
#pragma unroll
    for (int k = 0; k < K; ++k) acc += w[k] * win[k];
#pragma unroll
    for (int k = 0; k + 1 < K; ++k) win[k] = win[k + 1];
    if (K > 0) win[K > 0 ? K - 1 : 0] = xv;
    stf<T>(P.out, orow + s * os, act_f(acc, silu));
  }
}

// Offset of row b's conv_state slot, or -1 for a padding row (slot < 0 or out of the pool).
CCV_DEV int64_t update_slot_off(const ccv_params& P, int64_t b) {
  const int64_t slot = (P.flags & CCV_F_STATE_IDX) ? (int64_t)P.state_idx[b * P.si_s] : b;
  return (slot < 0 || slot >= P.num_slots) ? -1 : slot * P.cs_s[0];
}

template <typename T, int W>
CCV_DEV void update_body(const ccv_params& P) {
  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const uint32_t nct = (uint32_t)P.n_ctiles;
  const int64_t d = (int64_t)(blk % nct) * CCV_NT_update + threadIdx.x;
  if (d >= P.dim) return;
  const int64_t b0 = (int64_t)(blk / nct) * P.chunk;
  const int64_t b1 = min(P.batch, b0 + P.chunk);
  float w[W], bias;
  load_weights<W>(P, d, w, bias);
  for (int64_t b = b0; b < b1; ++b) update_row<T, W>(P, b, d, w, bias);
}

// ---------------------------------------------------------------- step (the staged decode step)
// kernels.rs picks this family over `update` when S == 1, there is no cache_seqlens, each slot's
// state is contiguous — channel-major [D, state_len] or position-major [state_len, D] (vLLM's
// newer layout; CCV_F_STEP_PM) — and P.chunk rows of CCV_NT_step channels fit CCV_UPD_SMEM bytes.
// Its own kernel so that update's general paths do not set its registers (40 against 63-118).
// Block = P.chunk batch rows x CCV_NT_step channels. The block's state is a few contiguous runs
// per row, copied into shared memory with 16-byte loads (CCV_F_VEC) and back with 16-byte stores;
// every load of every row (state, x, weights) is issued before any store, which keeps a whole
// block's traffic in flight (`update` waits on each row's few state bytes in turn: 2.7x the byte
// floor at B = 256).

// The block's state, rows b0.. b0+nrows, channels c0.. c0+n: channel-major = one run of n*sl
// elements per row, position-major = sl runs of n; shared memory holds row r at r * NT * sl, run j
// at j * NT. Vector q of the block (16 bytes, CCV_F_VEC) -> its global and shared addresses; false
// for a padding row. Element-wise copies (no CCV_F_VEC, or a run's tail) use step_elem.
struct StepRuns {
  int runs, len, nv, tail;
  int64_t grun;  // global elements between runs
  int srun;      // shared elements between runs
};
template <typename T>
CCV_DEV StepRuns step_runs(const ccv_params& P, int n, int sl, bool pm) {
  StepRuns R;
  R.runs = pm ? sl : 1;
  R.len = pm ? n : n * sl;
  R.nv = (P.flags & CCV_F_VEC) ? R.len / (16 / (int)sizeof(T)) : 0;
  R.tail = R.len - R.nv * (16 / (int)sizeof(T));
  R.grun = pm ? P.cs_s[2] : 0;
  R.srun = pm ? CCV_NT_step : 0;
  return R;
}
// i / m for 0 <= i < 2^16 and 0 < m < 2^16 without an integer division (~25 instructions): the
// float quotient is at least 0.5/m away from the next integer, far more than its rounding error
CCV_DEV int small_div(int i, int m) { return (int)(((float)i + 0.5f) * __frcp_rn((float)m)); }

// element e of run rj = r * runs + j: global and shared offsets (elements)
template <typename T>
CCV_DEV bool step_at(const ccv_params& P, const StepRuns& R, int64_t b0, int64_t c0, int sl, bool pm, int rj, int e,
                     int64_t& go, int& so) {
  const int r = small_div(rj, R.runs), j = rj - r * R.runs;
  const int64_t o = update_slot_off(P, b0 + r);
  go = o + c0 * (pm ? 1 : sl) + j * R.grun + e;
  so = r * CCV_NT_step * sl + j * R.srun + e;
  return o >= 0;
}

// global -> shared, state and x (xsm[r * NT + t]): every load of the thread is issued before the
// first shared store (a load followed by its store waits a memory round trip each)
template <typename T>
CCV_DEV void step_load(const ccv_params& P, T* sm, T* xsm, int64_t b0, int nrows, int64_t c0, int n, int sl, bool pm) {
  constexpr int V = 16 / sizeof(T), NQ = CCV_UPD_SMEM / 16 / CCV_NT_step;
  const StepRuns R = step_runs<T>(P, n, sl, pm);
  const T* cs = (const T*)P.conv_state;
  const int t = threadIdx.x;
  const int64_t d = c0 + t;
  T xv[CCV_UPD_ROWS];
#pragma unroll
  for (int r = 0; r < CCV_UPD_ROWS; ++r)
    if (r < nrows && t < n) xv[r] = ((const T*)P.x)[(b0 + r) * P.x_s[0] + d * P.x_s[1]];
  ccv_vec16 buf[NQ];
  int sofs[NQ];
#pragma unroll
  for (int q = 0; q < NQ; ++q) {
    const int i = threadIdx.x + q * CCV_NT_step;
    sofs[q] = -1;
    if (i < nrows * R.runs * R.nv) {
      const int rj = small_div(i, R.nv);
      int64_t go;
      int so;
      if (step_at<T>(P, R, b0, c0, sl, pm, rj, (i - rj * R.nv) * V, go, so)) {
        buf[q] = ccv_ld16(cs + go);
        sofs[q] = so;
      }
    }
  }
#pragma unroll
  for (int q = 0; q < NQ; ++q)
    if (sofs[q] >= 0) *(ccv_vec16*)(sm + sofs[q]) = buf[q];
#pragma unroll
  for (int r = 0; r < CCV_UPD_ROWS; ++r)
    if (r < nrows && t < n) xsm[r * CCV_NT_step + t] = xv[r];
  for (int i = threadIdx.x; i < nrows * R.runs * R.tail; i += CCV_NT_step) {
    const int rj = small_div(i, R.tail);
    int64_t go;
    int so;
    if (step_at<T>(P, R, b0, c0, sl, pm, rj, R.nv * V + (i - rj * R.tail), go, so)) sm[so] = cs[go];
  }
}

// shared -> global
template <typename T>
CCV_DEV void step_store(const ccv_params& P, const T* sm, int64_t b0, int nrows, int64_t c0, int n, int sl, bool pm) {
  constexpr int V = 16 / sizeof(T);
  const StepRuns R = step_runs<T>(P, n, sl, pm);
  T* cs = (T*)P.conv_state;
  for (int i = threadIdx.x; i < nrows * R.runs * R.nv; i += CCV_NT_step) {
    const int rj = small_div(i, R.nv);
    int64_t go;
    int so;
    if (step_at<T>(P, R, b0, c0, sl, pm, rj, (i - rj * R.nv) * V, go, so)) ccv_st16(cs + go, *(const ccv_vec16*)(sm + so));
  }
  for (int i = threadIdx.x; i < nrows * R.runs * R.tail; i += CCV_NT_step) {
    const int rj = small_div(i, R.tail);
    int64_t go;
    int so;
    if (step_at<T>(P, R, b0, c0, sl, pm, rj, R.nv * V + (i - rj * R.tail), go, so)) cs[go] = sm[so];
  }
}

template <typename T, int W>
CCV_DEV void step_body(const ccv_params& P) {
  constexpr int K = W - 1;
  constexpr int NT = CCV_NT_step;
  __shared__ float4 smem4[CCV_UPD_SMEM / 16];
  __shared__ T xsm[CCV_UPD_ROWS * NT];
  T* sm = (T*)smem4;
  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return;
  const uint32_t nct = (uint32_t)P.n_ctiles;
  const int64_t c0 = (int64_t)(blk % nct) * NT;
  const int64_t b0 = (int64_t)(blk / nct) * P.chunk;
  const int nrows = (int)min((int64_t)CCV_UPD_ROWS, min(P.chunk, P.batch - b0));
  const int n = (int)min((int64_t)NT, P.dim - c0);
  const int sl = (int)P.state_len;
  const bool pm = P.flags & CCV_F_STEP_PM;
  const int t = threadIdx.x;
  const int64_t d = c0 + t;
  float w[W], bias = 0.f;
  if (t < n) load_weights<W>(P, d, w, bias);
  // x goes through shared memory too, so that the row loop below need not be unrolled
  // (unrolled over registers it took up to 128 registers)
  step_load<T>(P, sm, xsm, b0, nrows, c0, n, sl, pm);
  __syncthreads();
  if (t < n) {
    const bool silu = P.flags & CCV_F_SILU;
    const int es_t = pm ? 1 : sl, es_j = pm ? NT : 1;  // element (t, j) of a row
#pragma unroll 1
    for (int r = 0; r < nrows; ++r) {
      const int64_t orow = (b0 + r) * P.out_s[0] + d * P.out_s[1];
      if (update_slot_off(P, b0 + r) < 0) {
        stf<T>(P.out, orow, 0.f);
        continue;
      }
      T* st = sm + r * NT * sl + t * es_t;
      const T xr = xsm[r * NT + t];
      float acc = bias + w[K] * Tr<T>::to_f(xr);
#pragma unroll
      for (int k = 0; k < K; ++k) acc += w[k] * Tr<T>::to_f(st[(sl - K + k) * es_j]);
      for (int j = 0; j + 1 < sl; ++j) st[j * es_j] = st[(j + 1) * es_j];  // shift by one token (raw bits)
      st[(sl - 1) * es_j] = xr;
      stf<T>(P.out, orow, act_f(acc, silu));
    }
  }
  __syncthreads();
  step_store<T>(P, sm, b0, nrows, c0, n, sl, pm);
}

// ---------------------------------------------------------------- stepv (the decode step in registers)
// The common decode step — one token, no cache_seqlens, state_len = W-1 or W, slots contiguous
// (channel-major or position-major), C channels per thread on the vector path everywhere (dim % 4
// == 0; kernels.rs checks every alignment) — without shared memory: thread = (C channels, the
// `chunk` batch rows of its block). It loads its weights once, then takes its rows RR at a time
// (8 / C, at most 4): those rows' state vectors and x are loaded before anything is stored; the
// shift is a register permutation known at compile time. No barrier (the staged `step` kernel has two).
// Each warp runs a few hundred instructions in all, in one wave of blocks, so the instructions
// before its loads go out and those per weight are what it costs beyond the copy (H100 ncu,
// docs/perf.md session 15): the grid is 2-D (no division), a row without conv_state_indices
// takes its slot without checks (validate.rs: num_slots >= batch there), and the weights come in
// vector loads and convert under one dtype branch.
// C = 4, except channel-major slots whose C state_len-long channel rows make one 16-byte vector
// (RUN, CCV_F_STEP_RUN: 16-bit state_len 4 takes C = 2, f32 state_len 4 C = 1): a thread's state
// is then one 16-byte load and store at a 16-byte lane stride, where 4 channels' 4 positions were
// 4 8-byte accesses at a 32-byte stride, each store a partial sector in L2 (H200 ncu, B = 256,
// D = 5376, bf16 state_len 4: 1.46 M store sectors for 0.43 M written; docs/perf.md session 46).
template <typename T, int W, int SL, bool PM, int C, bool RUN>
CCV_DEV void stepv_rows(const ccv_params& P, int64_t b0, int64_t b1, int64_t d0) {
  constexpr bool pm = PM;  // compile-time: register arrays are indexed by it
  // rows a pass: 8 channel-rows of loads in flight a thread, at most 4 rows (8 channels per 16-bit
  // thread, 2 rows: 146 registers, slower; in 1-row passes, position-major 16-byte vectors: 80
  // registers, slower still, bf16 B = 256 9.7-9.8 against 8.3-8.8 µs, H200, docs/perf.md session
  // 46; the RUN's 2 channels in 2-row passes: a second round trip, slower; f32's 1 channel in
  // 8-row passes: 136 registers where the others took 96)
  constexpr int K = W - 1, RR = C >= 2 ? 8 / C : 4;
  constexpr int EV = 16 / (int)sizeof(T), NV = RUN ? C * SL / EV : 1;  // a RUN's 16-byte vectors
  static_assert(!RUN || (!PM && NV * EV == C * SL), "a run is channel-major whole vectors");
  typedef QN<T, C> Q;
  const bool silu = P.flags & CCV_F_SILU, indexed = P.flags & CCV_F_STATE_IDX;
  // vector q of a row: position-major = position q of the C channels; channel-major = elements
  // [Cq, Cq+C) of the channels' concatenated SL-long rows (RUN: rv, 16-byte vectors of them)
  typename Q::raw raw[RR][SL], xr[RR];
  ccv_vec16 rv[RR][NV];
  int64_t o[RR];
  auto load_rows = [&](int64_t bb) {
#pragma unroll
    for (int j = 0; j < RR; ++j) {
      // < 0: padding row or past the block
      o[j] = bb + j >= b1 ? -1 : indexed ? update_slot_off(P, bb + j) : (bb + j) * P.cs_s[0];
      if (o[j] < 0) continue;
      const T* cs = (const T*)P.conv_state + o[j] + (pm ? d0 : d0 * SL);
      if constexpr (RUN) {
#pragma unroll
        for (int v = 0; v < NV; ++v) rv[j][v] = ccv_ld16(cs + v * EV);
      } else {
#pragma unroll
        for (int q = 0; q < SL; ++q) raw[j][q] = Q::ld(cs + (pm ? q * P.cs_s[2] : q * C));
      }
      xr[j] = Q::ld((const T*)P.x + (bb + j) * P.x_s[0] + d0);
    }
  };
  // the first rows' loads go out before the weights' (converted on arrival): one memory round
  // trip before the first store, not two (the usual grid gives each thread one row pair)
  float w[C][W], bias[C];
  {
    load_rows(b0);
    WeightBits<W, C> wb;
    load_weight_bits_rows<W, C>(P, d0, wb);
    weights_from_bits_u<W, C>(P, wb, w, bias);
  }
  for (int64_t bb = b0; bb < b1; bb += RR) {
    if (bb != b0) load_rows(bb);
#pragma unroll
    for (int j = 0; j < RR; ++j) {
      if (bb + j >= b1) break;
      T* outp = (T*)P.out + (bb + j) * P.out_s[0] + d0;
      if (o[j] < 0) {  // padding row: output 0, state untouched
        float z[C];
#pragma unroll
        for (int c = 0; c < C; ++c) z[c] = 0.f;
        Q::st(outp, Q::pack(z));
        continue;
      }
      float xv[C], out[C];
      Q::unpack(xr[j], xv);
      T* cs = (T*)P.conv_state + o[j] + (pm ? d0 : d0 * SL);
      if constexpr (PM) {
        // the window's K positions unpacked one vector at a time; the shift by one token moves
        // whole vectors (raw bits: position p takes p + 1, the last x), no state in floats
#pragma unroll
        for (int c = 0; c < C; ++c) out[c] = bias[c] + w[c][K] * xv[c];
#pragma unroll
        for (int k = 0; k < K; ++k) {
          float f[C];
          Q::unpack(raw[j][SL - K + k], f);
#pragma unroll
          for (int c = 0; c < C; ++c) out[c] += w[c][k] * f[c];
        }
#pragma unroll
        for (int c = 0; c < C; ++c) out[c] = act_f(out[c], silu);
        Q::st(outp, Q::pack(out));
#pragma unroll
        for (int q = 0; q < SL; ++q) Q::st(cs + q * P.cs_s[2], q + 1 < SL ? raw[j][q + 1] : xr[j]);
        continue;
      }
      float st[SL * C];  // st[c * SL + p] = position p of channel c
      if constexpr (RUN) {
#pragma unroll
        for (int v = 0; v < NV; ++v) Tr<T>::unpack(rv[j][v], st + v * EV);
      } else {
#pragma unroll
        for (int q = 0; q < SL; ++q) {
          float f[C];
          Q::unpack(raw[j][q], f);
#pragma unroll
          for (int e = 0; e < C; ++e) st[q * C + e] = f[e];
        }
      }
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float acc = bias[c] + w[c][K] * xv[c];
#pragma unroll
        for (int k = 0; k < K; ++k) acc += w[c][k] * st[c * SL + SL - K + k];
        out[c] = act_f(acc, silu);
      }
      Q::st(outp, Q::pack(out));
      if constexpr (RUN) {
        float nx[SL * C];  // shifted by one token: position p takes p + 1, the last x
#pragma unroll
        for (int i = 0; i < SL * C; ++i) nx[i] = i % SL + 1 < SL ? st[i + 1] : xv[i / SL];
#pragma unroll
        for (int v = 0; v < NV; ++v) ccv_st16(cs + v * EV, Tr<T>::pack(nx + v * EV));
      } else {
#pragma unroll
        for (int q = 0; q < SL; ++q) {  // shifted by one token: position p takes p + 1, the last x
          float f[C];
#pragma unroll
          for (int e = 0; e < C; ++e) {
            const int i = q * C + e, c = i / SL, p = i % SL;
            f[e] = p + 1 < SL ? st[c * SL + p + 1] : xv[c];
          }
          Q::st(cs + q * C, Q::pack(f));
        }
      }
    }
  }
}

// A thread's channels: C = 4, or on a RUN the channels whose SL-long rows fill 16 bytes (1, 2 or
// 4; 0: no RUN for this SL)
template <typename T, int SL>
struct StepvRun {
  static constexpr int row = SL * (int)sizeof(T);
  static constexpr int channels = 16 % row == 0 && 16 / row <= 4 ? 16 / row : 0;
};

template <typename T, int W, int SL, bool PM, int C, bool RUN>
CCV_DEV void stepv_tile(const ccv_params& P) {
  // grid = (channel tiles, row blocks), exactly (kernels.rs)
  const int64_t d0 = ((int64_t)blockIdx.x * CCV_NT_stepv + threadIdx.x) * C;
  const int64_t b0 = (int64_t)blockIdx.y * P.chunk, b1 = min(P.batch, b0 + P.chunk);
  if (d0 < P.dim) stepv_rows<T, W, SL, PM, C, RUN>(P, b0, b1, d0);
}

template <typename T, int W, int SL>
CCV_DEV void stepv_sl(const ccv_params& P) {
  constexpr int CR = StepvRun<T, SL>::channels;
  if (P.flags & CCV_F_STEP_PM) {
    stepv_tile<T, W, SL, true, 4, false>(P);
  } else if constexpr (CR != 0) {
    if (P.flags & CCV_F_STEP_RUN) stepv_tile<T, W, SL, false, CR, true>(P);
    else stepv_tile<T, W, SL, false, 4, false>(P);
  } else {
    stepv_tile<T, W, SL, false, 4, false>(P);
  }
}

template <typename T, int W>
CCV_DEV void stepv_body(const ccv_params& P) {
  if constexpr (W >= 2) {
    if (P.state_len == W - 1) stepv_sl<T, W, W - 1>(P);
    else stepv_sl<T, W, W>(P);
  }
}

// ---------------------------------------------------------------- states
// Thread = (sequence i, channel d). Launched after the main kernel, so a pool used as both
// initial_states and final_states is read (here and by the main kernel) before it is written,
// and each thread reads its whole row before writing it.
CCV_DEV bool states_thread(const ccv_params& P, int64_t& i, int64_t& d) {
  const uint32_t blk = block_linear();
  if (blk >= (uint64_t)P.n_blocks) return false;
  const uint32_t nct = (uint32_t)P.n_ctiles;
  i = blk / nct;
  d = (int64_t)(blk % nct) * CCV_NT_fwd_states + threadIdx.x;
  return d < P.dim && i < P.num_seqs;
}

template <typename T, int W>
CCV_DEV void fwd_states_w(const ccv_params& P, int64_t i, int64_t d) {
  constexpr int K = W - 1;
  const Seg g = seg_by_index(P, i);
  if (!g.valid) return;
  const int64_t b = (P.flags & CCV_F_PACKED) ? 0 : i;
  const bool seq = P.flags & CCV_F_SEQ_IDX;
  const int64_t len = g.e - g.s;
  const int64_t idl = (seq && len > 0) ? seqid(P, b, g.e - 1) : 0;
  float v[K];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int64_t p = g.e - K + j;
    float val = 0.f;
    if (p >= g.s) {
      if (!seq || (idl >= 0 && seqid(P, b, p) == idl)) val = ldf<T>(P.x, xoff(P, b, d, p));
    } else {
      bool ok = g.init;
      if (ok && seq && len > 0) ok = idl >= 0 && seqid(P, b, g.s) == idl;
      if (ok) val = ldf<T>(P.init, g.slot * P.init_s[0] + d * P.init_s[1] + (p - g.s + K) * P.init_s[2]);
    }
    v[j] = val;
  }
#pragma unroll
  for (int j = 0; j < K; ++j) stf<T>(P.final_st, g.slot * P.final_s[0] + d * P.final_s[1] + j * P.final_s[2], v[j]);
}

template <typename T, int W>
CCV_DEV void bwd_states_w(const ccv_params& P, int64_t i, int64_t d) {
  constexpr int K = W - 1;
  const Seg g = seg_by_index(P, i);
  if (!g.valid) return;
  const int64_t o = g.slot * P.dinit_s[0] + d * P.dinit_s[1];
  if (!g.init) {  // no initial state read: its gradient is 0
#pragma unroll
    for (int j = 0; j < K; ++j) stf<T>(P.dinit, o + j * P.dinit_s[2], 0.f);
    return;
  }
  const int64_t b = (P.flags & CCV_F_PACKED) ? 0 : i;
  const bool seq = P.flags & CCV_F_SEQ_IDX;
  const int64_t len = g.e - g.s;
  WArr<W> wa;
  float bias;
  load_weights<W>(P, d, wa.w, bias);
  float gq[K];  // g at the first K tokens; 0 past the end or for another seq_idx id
  const int64_t id0 = (seq && len > 0) ? seqid(P, b, g.s) : 0;
#pragma unroll 1
  for (int m = 0; m < K; ++m) {  // one call site (AMD inlines every call)
    float gm = 0.f;
    if (m < len && (!seq || seqid(P, b, g.s + m) == id0)) gm = grad_generic<T, W>(P, b, d, g.s + m, wa, bias);
    gq[m] = gm;
  }
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int64_t p = g.s - K + j;
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const int m = j - k;  // q = p + K - k = g.s + m
      if (m >= 0) acc += wa.w[k] * gq[m];
    }
    acc += dfinal_term<T>(P, g, b, d, p, K);
    stf<T>(P.dinit, o + j * P.dinit_s[2], acc);
  }
}

#define CCV_WIDTH_SWITCH(FN, T, ...)              \
  switch (P.width) {                              \
    case 2: FN<T, 2>(__VA_ARGS__); break;         \
    case 3: FN<T, 3>(__VA_ARGS__); break;         \
    case 4: FN<T, 4>(__VA_ARGS__); break;         \
    case 5: FN<T, 5>(__VA_ARGS__); break;         \
    case 6: FN<T, 6>(__VA_ARGS__); break;         \
    case 7: FN<T, 7>(__VA_ARGS__); break;         \
    case 8: FN<T, 8>(__VA_ARGS__); break;         \
    default: break; /* width 1: no states */      \
  }

template <typename T>
CCV_DEV void fwd_states_body(const ccv_params& P) {
  int64_t i, d;
  if (!states_thread(P, i, d)) return;
  CCV_WIDTH_SWITCH(fwd_states_w, T, P, i, d)
}

template <typename T>
CCV_DEV void bwd_states_body(const ccv_params& P) {
  int64_t i, d;
  if (!states_thread(P, i, d)) return;
  CCV_WIDTH_SWITCH(bwd_states_w, T, P, i, d)
}

// ---------------------------------------------------------------- dweight/dbias reduction
// Block = 32 outputs (channel d, tap k; k = W: dbias) x `lanes` = blockDim.x / 32 lanes (kernels.rs
// picks lanes from n_partials alone). Lane j sums the partial rows ws[r, d, k], r = j, j + lanes,
// ... in order, loading 8 rows ahead; then the lanes are added pairwise in shared memory in a
// fixed tree. The order depends only on n_partials, so dweight/dbias are bitwise reproducible.
// n_partials = 0 writes zeros. (One thread per output summing every row was latency-bound when
// there are many partial rows over few channels: 18 us for 792 rows x 1280 outputs.)
CCV_DEV void bwd_reduce_body(const ccv_params& P) {
  __shared__ float part[CCV_NT_bwd_reduce];
  ccv_wait_previous();  // may start before the main kernel ends (compat.h): wait for its partials
  const uint32_t W1 = (uint32_t)P.width + 1;
  const uint32_t n = (uint32_t)P.dim * W1;
  const int lanes = blockDim.x / 32, tx = threadIdx.x % 32, lane = threadIdx.x / 32;
  const uint32_t idx = block_linear() * 32 + tx;
  const int R = (int)P.n_partials;  // kernels.rs: below 2^31
  float s = 0.f;
  if (idx < n) {
    const float* src = P.ws + idx;
    constexpr int AHEAD = 8;
    int r = lane;
    for (; r + (AHEAD - 1) * lanes < R; r += AHEAD * lanes) {
      float v[AHEAD];
#pragma unroll
      for (int u = 0; u < AHEAD; ++u) v[u] = ccv_ld_last(src + (int64_t)(r + u * lanes) * n);
#pragma unroll
      for (int u = 0; u < AHEAD; ++u) s += v[u];
    }
    // the last rows in one round trip too: a row past R loads row R - 1 again and adds +0
    // instead (the same bits). A remainder loop of single loads waited a round trip a row.
    if (r < R) {
      float v[AHEAD];
#pragma unroll
      for (int u = 0; u < AHEAD; ++u) v[u] = ccv_ld_last(src + (int64_t)min(r + u * lanes, R - 1) * n);
#pragma unroll
      for (int u = 0; u < AHEAD; ++u) s += r + u * lanes < R ? v[u] : 0.f;
    }
  }
  part[threadIdx.x] = s;
  for (int h = lanes / 2; h >= 1; h /= 2) {
    __syncthreads();
    if (lane < h) part[threadIdx.x] = s = s + part[threadIdx.x + h * 32];
  }
  if (lane != 0 || idx >= n) return;
  const uint32_t d = idx / W1, k = idx % W1;
  if (k + 1 < W1) st_dt(P.dweight, d * P.dw_s[0] + k * P.dw_s[1], P.dw_dtype, s);
  else if (P.flags & CCV_F_DBIAS) st_dt(P.dbias, d * P.dbias_s, P.db_dtype, s);
}

CCV_INSTANTIATE_W(update)
CCV_INSTANTIATE_W(step)
CCV_INSTANTIATE_W(stepv)
CCV_INSTANTIATE_D(fwd_states)
CCV_INSTANTIATE_D(bwd_states)
CCV_EXTERN_KERNEL void CCV_LAUNCH_BOUNDS(CCV_NT_bwd_reduce) ccv1d_bwd_reduce(CCV_GRID_CONST ccv_params P) { bwd_reduce_body(P); }

// ---------------------------------------------------------------- copy (bench ceiling only)
// `seqlen` 16-byte vectors, grid-stride, one 16-byte load and store per thread per step: the
// device-copy reference `ccv1d bench` puts beside the driver's memcpy.
// x = src, out = dst (both 16-byte aligned).
CCV_EXTERN_KERNEL void CCV_LAUNCH_BOUNDS(256) ccv1d_copy16(CCV_GRID_CONST ccv_params P) {
  const ccv_vec16* src = (const ccv_vec16*)P.x;
  ccv_vec16* dst = (ccv_vec16*)P.out;
  const int64_t n = P.seqlen;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = src[i];
}
