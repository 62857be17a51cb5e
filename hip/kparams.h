// kparams.h — the ONE by-value argument of every kernel. Mirrored field for field by
// `KParams` in src/gpu/kernels/mod.rs (a Rust unit test checks size and offsets; the static_asserts
// below check the same numbers here). Strides are in elements, int64; unused fields are 0.
#pragma once
#include <stdint.h>

// dtype codes (= CCV1D_DTYPE_* of the C API)
#define CCV_DT_F32 1
#define CCV_DT_F16 2
#define CCV_DT_BF16 3

// flags
#define CCV_F_BIAS (1 << 0)        // bias given
#define CCV_F_SILU (1 << 1)        // activation = SiLU
#define CCV_F_SEQ_IDX (1 << 2)     // seq_idx given (rows mode only)
#define CCV_F_PACKED (1 << 3)      // cu_seqlens given: batch 1, sequences packed along L
#define CCV_F_INIT (1 << 4)        // initial_states given
#define CCV_F_FINAL (1 << 5)       // final_states wanted
#define CCV_F_STATE_IDX (1 << 6)   // state_indices (fwd/bwd) or conv_state_indices (update) given
#define CCV_F_HAS_INIT (1 << 7)    // has_initial_state given (hi_bytes = 4 or 1)
#define CCV_F_VEC (1 << 8)         // 16-byte vector path allowed (alignment checked on the host)
#define CCV_F_DFINAL (1 << 9)      // dfinal_states given
#define CCV_F_DINIT (1 << 10)      // dinitial_states wanted
#define CCV_F_DBIAS (1 << 11)      // dbias wanted
#define CCV_F_CACHE_SEQLENS (1 << 12)  // update: cache_seqlens given (circular buffer)
#define CCV_F_STATES_ANY (1 << 13)     // some state tensor exists: slot >= num_slots skips
#define CCV_F_DIRECT (1 << 14)         // bwd: one partial row; dweight/dbias stored by the main kernel
#define CCV_F_STEP_PM (1 << 15)        // step: conv_state slots position-major ([state_len, D], channels contiguous)
#define CCV_F_CLW_HALO (1 << 16)       // bwd_clw, fwd_clw: each group copies the tokens it shares with the next group at its start
#define CCV_F_W_ROWS (1 << 17)         // stepv: weight [D, W] with tap stride 1, bias (if any) stride 1, both aligned to 4 elements
#define CCV_F_PE_TOKENS (1 << 18)      // fwd_pe, bwd_pe: consecutive threads take consecutive tokens (channel-first x), not channels
#define CCV_F_STEP_RUN (1 << 19)       // stepv: channel-major slots, a thread's channels' state rows as whole 16-byte vectors (aligned)

struct ccv_params {
  // ---- data pointers (device addresses; NULL when absent) -------------------------- offset 0
  const void* x;
  const void* weight;
  const void* bias;
  void* out;
  const void* dout;
  void* dx;
  void* dweight;
  void* dbias;
  const void* init;        // initial_states [slots, D, K]
  void* final_st;          // final_states   [slots, D, K] (may alias init)
  const void* dfinal;      // dfinal_states  [slots, D, K]
  void* dinit;             // dinitial_states[slots, D, K]
  void* conv_state;        // update: [slots, D, state_len]
  const int32_t* seq_idx;  // [B, L]
  const int32_t* cu_seqlens;     // [N+1]
  const int32_t* state_idx;      // [N] (fwd/bwd state_indices; update conv_state_indices [B])
  const void* has_init;          // [N] int32 or bool
  const int32_t* cache_seqlens;  // update: [B]
  float* ws;                     // bwd workspace: fp32 partials [n_partials, D, W+1]
  // ---- strides (elements) ---------------------------------------------------------- offset 152
  int64_t x_s[3], out_s[3], dout_s[3], dx_s[3];
  int64_t w_s[2], dw_s[2];
  int64_t bias_s, dbias_s;
  int64_t init_s[3], final_s[3], dfinal_s[3], dinit_s[3], cs_s[3];
  int64_t seq_s[2];
  int64_t cu_s, si_s, hi_s, csl_s;
  // ---- dims ------------------------------------------------------------------------ offset 464
  int64_t batch, dim, seqlen;  // x is [batch, dim, seqlen] (update: seqlen = S)
  int64_t num_seqs;            // batch rows, or N when packed
  int64_t num_slots;           // first dim of the state tensors / conv_state
  int64_t state_len;           // update
  // ---- geometry (chosen by kernels.rs) ----------------------------------------------- offset 512
  int64_t chunk;       // tokens per block along L (update: batch rows per thread)
  int64_t n_chunks;    // blocks along L per batch row
  int64_t n_ctiles;    // channel tiles (channel-last kernels), 1 otherwise
  int64_t n_blocks;    // blocks of work in the grid (the grid may be larger; extra blocks exit)
  int64_t n_partials;  // bwd: rows of partials in ws (= batch * n_chunks)
  // ---- small ints ------------------------------------------------------------------- offset 552
  int32_t width;
  int32_t flags;
  int32_t w_dtype, b_dtype, dw_dtype, db_dtype;
  int32_t hi_bytes;  // 4 (int32) or 1 (bool)
  int32_t rows_log2;  // fwd_cf: a block covers 2^rows_log2 (batch, channel) rows (short rows), else 0;
                      // bwd_slab: 2^rows_log2 channels per block; fwd_pt, bwd_pt, fwd_pe: threads
                      // along the fast dimension (see each kernel); bwd_pe: log2 of L padded;
                      // bwd_clw: ring slots in use (2 to CCV_CLW_RING), not a log
  int32_t brows;      // bwd_cf: consecutive batch rows per block (same channel), >= 1;
                      // bwd_cfs: > 1 = batch, rows channel-major (whole channels per block);
                      // bwd_pe: log2 of a channel's threads (B and L padded);
                      // bwd_pt: log2 of a thread's vectors (0-1)
  int32_t pad0;
};  // 592 bytes

#define CCV_PARAMS_SIZE 592
static_assert(sizeof(void*) == 8, "64-bit targets only");
static_assert(sizeof(ccv_params) == CCV_PARAMS_SIZE, "ccv_params size: keep kernels/mod.rs KParams in sync");
static_assert(__builtin_offsetof(ccv_params, x_s) == 152, "ccv_params layout");
static_assert(__builtin_offsetof(ccv_params, batch) == 464, "ccv_params layout");
static_assert(__builtin_offsetof(ccv_params, chunk) == 512, "ccv_params layout");
static_assert(__builtin_offsetof(ccv_params, width) == 552, "ccv_params layout");
