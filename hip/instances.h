// instances.h — THE instantiation list. Kernel names are built from the dispatch keys exactly as
// src/gpu/kernels/ builds them:
//   ccv1d_<family>_<dtype>_w<width>   family ∈ fwd_cf, fwd_cfs (short rows), fwd_cfw (warp spans),
//                                      fwd_cl, fwd_cl11 (fwd_cl's 11-token burst: 16-bit, W <= 4 only),
//                                      fwd_clw (simple channel-last rows through per-warp rings
//                                      of 16-byte copies), fwd_pt (small channel-first problems, a vector per thread),
//                                      fwd_pe (the smallest problems of either layout, an element per thread),
//                                      bwd_cf, bwd_cfs, bwd_cfw (warp spans), bwd_cfw7 (bwd_cfw at 7
//                                      resident blocks: W <= 4 only), bwd_cfw2 (bwd_cfw in
//                                      256-thread blocks: W <= 4 only), bwd_cfwl (bwd_cfw in spans of
//                                      4 vectors a lane), bwd_cfwx / bwd_cfw7x (the same
//                                      for rows with state tensors or state_indices), bwd_cl,
//                                      bwd_cls (simple channel-last rows), bwd_clw (the same through
//                                      per-warp rings of 16-byte copies), bwd_slab (tiny channel-last
//                                      backward in one launch), bwd_pt (small channel-first backward,
//                                      a vector per thread), bwd_pe (the smallest backwards, an element per thread), update, step (staged decode step), stepv (decode step in registers)
//   ccv1d_<family>_<dtype>            family ∈ fwd_states, bwd_states
//   ccv1d_bwd_reduce
// dtype ∈ f32, f16, bf16 (of x); width ∈ 1..8. Everything else is a run-time flag in ccv_params.
// Each translation unit defines <family>_body templates and expands its own families:
//   fwd_cf.hip: fwd_cf, fwd_cfs, fwd_cfw fwd_cl.hip: fwd_cl, fwd_cl11   fwd_clw.hip: fwd_clw   fwd_pt.hip: fwd_pt, fwd_pe
//   bwd_cf.hip: bwd_cf, bwd_cfs, bwd_cfw, bwd_cfw7, bwd_cfw2, bwd_cfwl, bwd_cfwx, bwd_cfw7x   bwd_cl.hip: bwd_cl, bwd_cls   bwd_clw.hip: bwd_clw
//   bwd_slab.hip: bwd_slab   bwd_pt.hip: bwd_pt, bwd_pe
//   misc.hip:   update, step, stepv, fwd_states, bwd_states, bwd_reduce
#pragma once
#include "common.h"

#define CCV_FOR_DTYPES(M, FAM) M(FAM, f32, float) M(FAM, f16, ccv_f16) M(FAM, bf16, ccv_bf16)
#define CCV_FOR_WIDTHS(M, FAM, DN, T) \
  M(FAM, DN, T, 1) M(FAM, DN, T, 2) M(FAM, DN, T, 3) M(FAM, DN, T, 4) \
  M(FAM, DN, T, 5) M(FAM, DN, T, 6) M(FAM, DN, T, 7) M(FAM, DN, T, 8)

// families templated on <T, W>: block size CCV_NT_<family>
#define CCV_INST_W(FAM, DN, T, W)                                                              \
  CCV_EXTERN_KERNEL void CCV_LB_##FAM##_##DN(W) ccv1d_##FAM##_##DN##_w##W(CCV_GRID_CONST ccv_params P) { \
    FAM##_body<T, W>(P);                                                                        \
  }
#define CCV_INST_DT_W(FAM, DN, T) CCV_FOR_WIDTHS(CCV_INST_W, FAM, DN, T)
#define CCV_INSTANTIATE_W(FAM) CCV_FOR_DTYPES(CCV_INST_DT_W, FAM)
// families at W <= 4 only (bwd_cfw7, bwd_cfw2, bwd_cfw7x)
#define CCV_INST_DT_W4(FAM, DN, T) CCV_INST_W(FAM, DN, T, 1) CCV_INST_W(FAM, DN, T, 2) CCV_INST_W(FAM, DN, T, 3) CCV_INST_W(FAM, DN, T, 4)
#define CCV_INSTANTIATE_W4(FAM) CCV_FOR_DTYPES(CCV_INST_DT_W4, FAM)
// ... and 16-bit only (fwd_cl11)
#define CCV_INSTANTIATE_W4_16(FAM) CCV_INST_DT_W4(FAM, f16, ccv_f16) CCV_INST_DT_W4(FAM, bf16, ccv_bf16)

// families templated on <T> only
#define CCV_INST_D(FAM, DN, T)                                                                 \
  CCV_EXTERN_KERNEL void CCV_LAUNCH_BOUNDS(CCV_NT_##FAM) ccv1d_##FAM##_##DN(CCV_GRID_CONST ccv_params P) { \
    FAM##_body<T>(P);                                                                           \
  }
#define CCV_INSTANTIATE_D(FAM) CCV_FOR_DTYPES(CCV_INST_D, FAM)

// Block sizes (threads). kernels.rs uses the same numbers.
#define CCV_NT_fwd_cf 128
#define CCV_NT_fwd_cfs 128
#define CCV_NT_fwd_cfw 128
#define CCV_NT_fwd_cl 128
#define CCV_NT_fwd_cl11 128
#define CCV_NT_fwd_clw 128
#define CCV_NT_fwd_pt 128
#define CCV_NT_fwd_pe 128
#define CCV_NT_bwd_cf 128
#define CCV_NT_bwd_cfs 128
#define CCV_NT_bwd_cfw 128
#define CCV_NT_bwd_cfw7 128
#define CCV_NT_bwd_cfw2 256
#define CCV_NT_bwd_cfwl 128
#define CCV_NT_bwd_cfwx 128
#define CCV_NT_bwd_cfw7x 128
#define CCV_NT_bwd_cl 128
#define CCV_NT_bwd_cls 128
#define CCV_NT_bwd_clw 128
#define CCV_NT_bwd_slab 256
// bwd_pt: the most threads a block (launched with 128, or 256 when a channel needs more)
#define CCV_NT_bwd_pt 256
// bwd_pe: the most threads a block (launched with 2^k of them, at least a wave)
#define CCV_NT_bwd_pe 512
#define CCV_NT_update 128
#define CCV_NT_step 128
#define CCV_NT_stepv 128
#define CCV_NT_fwd_states 128
#define CCV_NT_bwd_states 128
// most threads per block; a launch uses 32 outputs x lanes (kernels.rs: reduce_lanes)
#define CCV_NT_bwd_reduce 1024
// Launch bounds per family, x dtype and width W. On NVIDIA a minimum of resident blocks caps
// registers at 65536 / (128 * b): used where it was measured to help on the H100 (fwd_cf: 12
// blocks = 42 registers for W <= 5 — 4x5376x4096 f32 83 -> 94 % of copy, bf16 71 -> 82 %; wider
// windows spill there, so 10 = 51 (W = 6-8 5-9 % faster than 8 = 64); since session 47 12 at W = 6
// (f32: 0 bytes spilled; H200 SiLU 4x5376x4096 177.9 -> 170.0 us, bf16 100.0 -> 97.7) and at 16-bit
// W = 7, whose raw 16-byte edges (fwd_cf.hip) spill 12 bytes there (bf16 101.9 -> 95.9; f32 W = 7
// lost, 179.4 -> 190.9, and 16-bit W = 8, 44 bytes spilled, 99.8 -> 111.1); fwd_cl: 6 (80) for
// W <= 4, else 4 (its general path spills there, the streaming path does not; kernels.rs's
// cl_blocks_per_sm assumes these);
// bwd_cf: 8 (64) for W <= 4, 7 (72) above (W = 8 spills 8 bytes; against 6 blocks every W = 5-8
// row was 4-7 % faster, f32 and bf16); bwd_cfs: 5 (its least without spills);
// f32 bwd_cls: 5 (96) for W <= 4, 4 (128) for W = 5-7 (W = 6-8 6-19 % faster than ptxas's
// choice), 3 (170: 162 used, no spills) for W = 8 (4x5376x4096 486.5 -> 401.9 us; 200 bytes
// spilled at 4);
// 16-bit bwd_cls: 4 (128) for W <= 2 (bf16 W = 3 354.8 -> 275.4 us in session 6), 3 (168) for
// W >= 3, the widths with the shared-memory ring (W = 4 with the ring: 219.2 at 3, 234.6 at 4;
// with 2 channels per thread at W >= 5, session 10: W = 7 233.1 at 3 against 246.3 at 4 (spills),
// W = 8 254.6 / 258.8, W = 5 / 6 equal); f32 bwd_cl: 4 = 128;
// 16-bit bwd_cl: 5 = 102); 16-bit stepv: 6 (80) for W <= 4, 5 for W = 5, 4 above (its rows'
// loads issued before the weights' took W = 4 from 79 to 92 registers and 5 blocks: B = 64 went
// from one wave to two, bf16 5.4 -> 6.1 us; at 6 it is 5.2, B = 256 10.8, no spills),
// fwd_cfw / bwd_cfw: as fwd_cf up to W = 5 (10 from 6) / bwd_cf (40-48 / 64-72 registers, no
// spills up to W = 6 in bwd_cfw); 16-bit bwd_cfw at W = 8 was at 6 (80 registers) from session
// 18 until its right halo went to shared memory (session 32: at 7, bf16 4x5376x4096 SiLU 201.6 ->
// 200.0 us, f16 206.4 -> 201.1; with the halo carried in the SiLU pass 197.7, bf16 / f16 32 / 4
// bytes spilled);
// left to ptxas elsewhere. On AMD every family gets its bare block-size bound. Each can be overridden
// for tuning builds by a header pre-included with `-include` in CAUSAL_CONV1D_NVCC_FLAGS (nvcc splits
// -D values at commas).
#ifndef CCV_LB_fwd_cf_f32
#define CCV_LB_fwd_cf_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cf, (W) <= 6 ? 12 : 10)
#endif
#ifndef CCV_LB_fwd_cf_f16
#define CCV_LB_fwd_cf_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cf, (W) <= 7 ? 12 : 10)
#endif
#ifndef CCV_LB_fwd_cf_bf16
#define CCV_LB_fwd_cf_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cf, (W) <= 7 ? 12 : 10)
#endif
#ifndef CCV_LB_fwd_cfs_f32
#define CCV_LB_fwd_cfs_f32(W) CCV_LAUNCH_BOUNDS(CCV_NT_fwd_cfs)
#endif
#ifndef CCV_LB_fwd_cfs_f16
#define CCV_LB_fwd_cfs_f16(W) CCV_LAUNCH_BOUNDS(CCV_NT_fwd_cfs)
#endif
#ifndef CCV_LB_fwd_cfs_bf16
#define CCV_LB_fwd_cfs_bf16(W) CCV_LAUNCH_BOUNDS(CCV_NT_fwd_cfs)
#endif
#ifndef CCV_LB_fwd_cfw_f32
#define CCV_LB_fwd_cfw_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cfw, (W) <= 5 ? 12 : 10)
#endif
#ifndef CCV_LB_fwd_cfw_f16
#define CCV_LB_fwd_cfw_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cfw, (W) <= 5 ? 12 : 10)
#endif
#ifndef CCV_LB_fwd_cfw_bf16
#define CCV_LB_fwd_cfw_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cfw, (W) <= 5 ? 12 : 10)
#endif
#ifndef CCV_LB_fwd_pt_f32
#define CCV_LB_fwd_pt_f32(W) CCV_LAUNCH_BOUNDS(CCV_NT_fwd_pt)
#endif
#ifndef CCV_LB_fwd_pt_f16
#define CCV_LB_fwd_pt_f16(W) CCV_LAUNCH_BOUNDS(CCV_NT_fwd_pt)
#endif
#ifndef CCV_LB_fwd_pt_bf16
#define CCV_LB_fwd_pt_bf16(W) CCV_LAUNCH_BOUNDS(CCV_NT_fwd_pt)
#endif
#ifndef CCV_LB_fwd_pe_f32
#define CCV_LB_fwd_pe_f32(W) CCV_LAUNCH_BOUNDS(CCV_NT_fwd_pe)
#endif
#ifndef CCV_LB_fwd_pe_f16
#define CCV_LB_fwd_pe_f16(W) CCV_LAUNCH_BOUNDS(CCV_NT_fwd_pe)
#endif
#ifndef CCV_LB_fwd_pe_bf16
#define CCV_LB_fwd_pe_bf16(W) CCV_LAUNCH_BOUNDS(CCV_NT_fwd_pe)
#endif
#ifndef CCV_LB_fwd_cl_f32
#define CCV_LB_fwd_cl_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cl, (W) <= 4 ? 6 : 4)
#endif
#ifndef CCV_LB_fwd_cl_f16
#define CCV_LB_fwd_cl_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cl, (W) <= 4 ? 6 : 4)
#endif
#ifndef CCV_LB_fwd_cl_bf16
#define CCV_LB_fwd_cl_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cl, (W) <= 4 ? 6 : 4)
#endif
#ifndef CCV_LB_fwd_cl11_f16
#define CCV_LB_fwd_cl11_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cl11, 6)
#endif
#ifndef CCV_LB_fwd_cl11_bf16
#define CCV_LB_fwd_cl11_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cl11, 6)
#endif
#ifndef CCV_LB_fwd_clw_f32
#define CCV_LB_fwd_clw_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_clw, CCV_FWD_CLW_BLOCKS)
#endif
#ifndef CCV_LB_fwd_clw_f16
#define CCV_LB_fwd_clw_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_clw, CCV_FWD_CLW_BLOCKS)
#endif
#ifndef CCV_LB_fwd_clw_bf16
#define CCV_LB_fwd_clw_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_clw, CCV_FWD_CLW_BLOCKS)
#endif
#ifndef CCV_LB_bwd_cf_f32
#define CCV_LB_bwd_cf_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cf, (W) <= 4 ? 8 : 7)
#endif
#ifndef CCV_LB_bwd_cf_f16
#define CCV_LB_bwd_cf_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cf, (W) <= 4 ? 8 : 7)
#endif
#ifndef CCV_LB_bwd_cf_bf16
#define CCV_LB_bwd_cf_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cf, (W) <= 4 ? 8 : 7)
#endif
#ifndef CCV_LB_bwd_cfs_f32
#define CCV_LB_bwd_cfs_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfs, 5)
#endif
#ifndef CCV_LB_bwd_cfs_f16
#define CCV_LB_bwd_cfs_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfs, 5)
#endif
#ifndef CCV_LB_bwd_cfs_bf16
#define CCV_LB_bwd_cfs_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfs, 5)
#endif
#ifndef CCV_LB_bwd_cfw_f32
#define CCV_LB_bwd_cfw_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfw, (W) <= 4 ? 8 : 7)
#endif
#ifndef CCV_LB_bwd_cfw_f16
#define CCV_LB_bwd_cfw_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfw, (W) <= 4 ? 8 : 7)
#endif
#ifndef CCV_LB_bwd_cfw_bf16
#define CCV_LB_bwd_cfw_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfw, (W) <= 4 ? 8 : 7)
#endif
// bwd_cfw7: W <= 4 at 7 blocks (72 registers) for grids whose last wave is fuller at 7 than at 8
// (kernels.rs bwd_cfw_rows): 4x5376x4096 SiLU bf16 188.0 -> 185.8 us, f32 361.0 -> 360.2, 2x5376x4096
// f32 184.7 -> 181.6 (docs/perf.md, session 24)
#ifndef CCV_LB_bwd_cfw7_f32
#define CCV_LB_bwd_cfw7_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfw7, 7)
#endif
#ifndef CCV_LB_bwd_cfw7_f16
#define CCV_LB_bwd_cfw7_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfw7, 7)
#endif
#ifndef CCV_LB_bwd_cfw7_bf16
#define CCV_LB_bwd_cfw7_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfw7, 7)
#endif
// bwd_cfw2: W <= 4 in 256-thread blocks at 4 blocks (bwd_cfw's 64 registers; kernels/bwd.rs
// bwd_cfw2 says where)
#ifndef CCV_LB_bwd_cfw2_f32
#define CCV_LB_bwd_cfw2_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfw2, 4)
#endif
#ifndef CCV_LB_bwd_cfw2_f16
#define CCV_LB_bwd_cfw2_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfw2, 4)
#endif
#ifndef CCV_LB_bwd_cfw2_bf16
#define CCV_LB_bwd_cfw2_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfw2, 4)
#endif
// bwd_cfwl: spans of CCV_CFWL_ITEMS vectors a lane hold more registers: f32 at 6 blocks (80
// registers; no spills up to W = 5, 28-68 bytes at 6-8), 16-bit at 5 (96; none up to W = 3, 20-88
// bytes at 4-5). H200 (docs/perf.md session 45; SiLU, us, 4 blocks / 5): bf16 4x5376x4096 W = 3
// 140.2 / 131.0, W = 4 145.9 / 143.3, W = 5 161.3 / 155.5; f32 at 7 blocks (72 registers) lost
// (4x5376x4096 W = 4 265.6 at 6, 298.8 at 7).
#ifndef CCV_LB_bwd_cfwl_f32
#define CCV_LB_bwd_cfwl_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfwl, 6)
#endif
#ifndef CCV_LB_bwd_cfwl_f16
#define CCV_LB_bwd_cfwl_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfwl, 5)
#endif
#ifndef CCV_LB_bwd_cfwl_bf16
#define CCV_LB_bwd_cfwl_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cfwl, 5)
#endif
// its 16-byte vectors a lane a span (kernels.rs CFWL_ITEMS mirrors it) and the least width that
// takes silu_grad_fma at 16-bit (as bwd_cfw7: W = 4 too)
#ifndef CCV_CFWL_ITEMS
#define CCV_CFWL_ITEMS 4
#endif
#ifndef CCV_CFWL_FAST_MINW
#define CCV_CFWL_FAST_MINW 4
#endif
// bwd_cfwx / bwd_cfw7x: the launch bounds of bwd_cfw / bwd_cfw7
#define CCV_LB_bwd_cfwx_f32(W) CCV_LB_bwd_cfw_f32(W)
#define CCV_LB_bwd_cfwx_f16(W) CCV_LB_bwd_cfw_f16(W)
#define CCV_LB_bwd_cfwx_bf16(W) CCV_LB_bwd_cfw_bf16(W)
#define CCV_LB_bwd_cfw7x_f32(W) CCV_LB_bwd_cfw7_f32(W)
#define CCV_LB_bwd_cfw7x_f16(W) CCV_LB_bwd_cfw7_f16(W)
#define CCV_LB_bwd_cfw7x_bf16(W) CCV_LB_bwd_cfw7_bf16(W)
#ifndef CCV_LB_bwd_cl_f32
#define CCV_LB_bwd_cl_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cl, 4)
#endif
#ifndef CCV_LB_bwd_cl_f16
#define CCV_LB_bwd_cl_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cl, 5)
#endif
#ifndef CCV_LB_bwd_cl_bf16
#define CCV_LB_bwd_cl_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cl, 5)
#endif
#ifndef CCV_LB_bwd_cls_f32
#define CCV_LB_bwd_cls_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cls, (W) <= 4 ? 5 : (W) <= 7 ? 4 : 3)
#endif
#ifndef CCV_LB_bwd_cls_f16
#define CCV_LB_bwd_cls_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cls, (W) <= 2 ? 4 : 3)
#endif
#ifndef CCV_LB_bwd_cls_bf16
#define CCV_LB_bwd_cls_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_cls, (W) <= 2 ? 4 : 3)
#endif
#ifndef CCV_LB_bwd_clw_f32
#define CCV_LB_bwd_clw_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_clw, (W) >= CCV_CLW_WIDE ? CCV_CLW_BLOCKS_WIDE : CCV_CLW_BLOCKS)
#endif
#ifndef CCV_LB_bwd_clw_f16
#define CCV_LB_bwd_clw_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_clw, (W) >= CCV_CLW_WIDE ? CCV_CLW_BLOCKS_WIDE : CCV_CLW_BLOCKS)
#endif
#ifndef CCV_LB_bwd_clw_bf16
#define CCV_LB_bwd_clw_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_bwd_clw, (W) >= CCV_CLW_WIDE ? CCV_CLW_BLOCKS_WIDE : CCV_CLW_BLOCKS)
#endif
#ifndef CCV_LB_bwd_pt_f32
#define CCV_LB_bwd_pt_f32(W) CCV_LAUNCH_BOUNDS(CCV_NT_bwd_pt)
#endif
#ifndef CCV_LB_bwd_pt_f16
#define CCV_LB_bwd_pt_f16(W) CCV_LAUNCH_BOUNDS(CCV_NT_bwd_pt)
#endif
#ifndef CCV_LB_bwd_pt_bf16
#define CCV_LB_bwd_pt_bf16(W) CCV_LAUNCH_BOUNDS(CCV_NT_bwd_pt)
#endif
#ifndef CCV_LB_bwd_pe_f32
#define CCV_LB_bwd_pe_f32(W) CCV_LAUNCH_BOUNDS(CCV_NT_bwd_pe)
#endif
#ifndef CCV_LB_bwd_pe_f16
#define CCV_LB_bwd_pe_f16(W) CCV_LAUNCH_BOUNDS(CCV_NT_bwd_pe)
#endif
#ifndef CCV_LB_bwd_pe_bf16
#define CCV_LB_bwd_pe_bf16(W) CCV_LAUNCH_BOUNDS(CCV_NT_bwd_pe)
#endif
#ifndef CCV_LB_bwd_slab_f32
#define CCV_LB_bwd_slab_f32(W) CCV_LAUNCH_BOUNDS(CCV_NT_bwd_slab)
#endif
#ifndef CCV_LB_bwd_slab_f16
#define CCV_LB_bwd_slab_f16(W) CCV_LAUNCH_BOUNDS(CCV_NT_bwd_slab)
#endif
#ifndef CCV_LB_bwd_slab_bf16
#define CCV_LB_bwd_slab_bf16(W) CCV_LAUNCH_BOUNDS(CCV_NT_bwd_slab)
#endif
#ifndef CCV_LB_update_f32
#define CCV_LB_update_f32(W) CCV_LAUNCH_BOUNDS(CCV_NT_update)
#endif
#ifndef CCV_LB_update_f16
#define CCV_LB_update_f16(W) CCV_LAUNCH_BOUNDS(CCV_NT_update)
#endif
#ifndef CCV_LB_update_bf16
#define CCV_LB_update_bf16(W) CCV_LAUNCH_BOUNDS(CCV_NT_update)
#endif
#ifndef CCV_LB_step_f32
#define CCV_LB_step_f32(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_step, (W) <= 7 ? 8 : 7)
#endif
#ifndef CCV_LB_step_f16
#define CCV_LB_step_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_step, (W) <= 7 ? 8 : 7)
#endif
#ifndef CCV_LB_stepv_f32
#define CCV_LB_stepv_f32(W) CCV_LAUNCH_BOUNDS(CCV_NT_stepv)
#endif
#ifndef CCV_LB_stepv_f16
#define CCV_LB_stepv_f16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_stepv, (W) <= 4 ? 6 : (W) == 5 ? 5 : 4)
#endif
#ifndef CCV_LB_stepv_bf16
#define CCV_LB_stepv_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_stepv, (W) <= 4 ? 6 : (W) == 5 ? 5 : 4)
#endif
#ifndef CCV_LB_step_bf16
#define CCV_LB_step_bf16(W) CCV_LAUNCH_BOUNDS_MIN(CCV_NT_step, (W) <= 7 ? 8 : 7)
#endif

// bwd_cfw, 16-bit with SiLU: the least width taking silu_grad_fma (up to 7, 8 without states;
// bwd_cf.hip; bwd_cfw7 takes it at W = 4)
#ifndef CCV_CFW_FAST_MINW
#define CCV_CFW_FAST_MINW 5
#endif

// 16-byte loads a thread issues before storing them while staging a channel-last tile
// (stage_cl in common.h), per family and x element size: fewer keep registers down so more blocks
// fit; measured on the H100 with the registers these allow (docs/perf.md, 2026-11-22 session 2).
#ifndef CCV_SB_bwd_cl_f32
#define CCV_SB_bwd_cl_f32 3
#endif
#ifndef CCV_SB_bwd_cl_16
#define CCV_SB_bwd_cl_16 2
#endif

// Channel-last streaming walks (fwd_cl, bwd_cls) load U tokens per step; with prefetch on, the
// next step's loads are issued before the current step's math, so a lane always has loads in
// flight (more registers). Measured on the H100 (docs/perf.md, session 6), 4x5376x4096:
// fwd_cl 16-bit: prefetch with U = 8 at W >= 5 (at W <= 4, where U = 4 had taken bf16 148.0 ->
// 138.5 us, the burst walk below replaced it); f32: no prefetch (it cost 3 %). bwd_cls with
// SiLU: prefetch, U = 2 for W = 4 (bf16 321.8 -> 284.5 us) and 4 elsewhere (W = 6 453 -> 356;
// since the pointer-stepped loads of session 7 also W = 3 and 5: 230.1 -> 211.0, 273.7 -> 251.9
// against U = 2); without activation no prefetch (it cost 4 %).
#ifndef CCV_CL_AHEAD_f32
#define CCV_CL_AHEAD_f32(W) 4
#endif
#ifndef CCV_CL_AHEAD_16
#define CCV_CL_AHEAD_16(W) 8
#endif
#ifndef CCV_CL_PREFETCH_f32
#define CCV_CL_PREFETCH_f32 0
#endif
#ifndef CCV_CL_PREFETCH_16
#define CCV_CL_PREFETCH_16 1
#endif
// fwd_cl 16-bit, W <= CCV_CL_BURST_MAXW: U loads per step without prefetch (kernels.rs picks
// chunks of 64 tokens, 8 a lane, up to 4 waves of them, else 128).
// H100 (docs/perf.md, sessions 14 and 27), bf16 4x5376x4096 SiLU: 122.9 us against 128.2
// (prefetch with U = 4 in one wave); U = 16 155.2, prefetch with U = 8 140.6. On one-wave grids
// (session 27): 4x256x4096 9.4 -> 9.1, 4x4096x512 15.1 -> 14.9 against the prefetch walk; U = 16
// 9.7 / 19.6.
#ifndef CCV_CL_BURST_16
#define CCV_CL_BURST_16 8
#endif
// fwd_cl11: CCV_CL_BURST_LONG a step, kernels.rs launching it on chunks of 8 such steps (88
// tokens) where that makes at most 2 waves. U = 11 in chunks of 88 against the
// above (session 33, bf16 SiLU, us): H100 4x256x4096 (0.95 waves instead of 1.3) 8.9 -> 8.7-8.9,
// without activation 8.3 -> 7.9, 4x4096x512 14.9 -> 14.8, 1x2048x4096 14.9 -> 14.5; H200
// 8.5 -> 7.5, 13.8 -> 12.8, 13.7 -> 12.5. Everywhere (in place of U = 8): 4x5376x4096 H100 122.0
// -> 120.6 but H200 95.1 -> 98.3, 8x2048x1024 26.1 -> 26.2 / 21.6 -> 22.0.
#ifndef CCV_CL_BURST_LONG
#define CCV_CL_BURST_LONG 11
#endif
// widths with a burst walk (kernels.rs asks for it up to W = 4; at W >= 5 it was slower: bf16
// W = 5 143.6 us against 136.8 with the prefetch walk)
#ifndef CCV_CL_BURST_MAXW
#define CCV_CL_BURST_MAXW 4
#endif
#ifndef CCV_CL_AHEAD_bwd
#define CCV_CL_AHEAD_bwd 4
#endif
#ifndef CCV_CL_AHEAD_bwd_silu
#define CCV_CL_AHEAD_bwd_silu(W) ((W) == 4 ? 2 : 4)
#endif
// bwd_cls: tokens per thread in flight through a shared-memory ring of asynchronous copies
// (compat.h ccv_cp8), a power of 2, per x element size and width; 0 = the register prefetch
// above. Measured on the H100 (docs/perf.md, session 9), 4x5376x4096 SiLU, us, ring against
// registers: bf16 W = 4 219.2 against 271.2 (no activation 207.4 / 237.7), W = 5 232.7 / 252.6,
// W = 6 250.0 / 255.7 with 8 (bound 3), W = 7 / 8 247.7 / 264.5 and 265.2 / 281.5 (no bound);
// W = 2 slower (208.2 / 196.1). f32 with 4: W = 4 384.1 / 407.6, W = 7 378.0 / 400.1; with 8 at
// W = 8 389.1 / 401.9; W = 5, 6 slower (377.7 / 370.4, 378.3 / 376.6).
#ifndef CCV_CL_RING_bwd_16
#define CCV_CL_RING_bwd_16(W) ((W) >= 3 ? 8 : 0)
#endif
#ifndef CCV_CL_RING_bwd_f32
#define CCV_CL_RING_bwd_f32(W) ((W) == 5 || (W) == 6 ? 0 : (W) == 8 ? 8 : 4)
#endif
// bwd_clw: the most ring slots per 32-thread group (kernels.rs's CLW_RING mirrors it and picks
// 2 to it per grid), 16-byte copies of x and of dout per thread and step (a step is 1 KB a copy:
// TS tokens x 64 channels of each; 2 measured faster than 1 where the ring is 3-4 deep), and the
// resident blocks its launch bound asks for (kernels.rs's CLW_BLOCKS_PER_SM, CLW_WIDE and
// CLW_BLOCKS_PER_SM_WIDE mirror them): 5 (96 registers), 4 (128) from W = CCV_CLW_WIDE on, where
// 5 spilled 20-336 bytes (bf16 4x5376x4096 SiLU W = 7 on 4 blocks 207.7 us with 512-token chunks;
// on 3 blocks 229.5, on bwd_cls 222.4; H100, docs/perf.md session 26)
#ifndef CCV_CLW_RING
#define CCV_CLW_RING 4
#endif
#ifndef CCV_CLW_COPIES
#define CCV_CLW_COPIES 2
#endif
#ifndef CCV_CLW_BLOCKS
#define CCV_CLW_BLOCKS 5
#endif
#ifndef CCV_CLW_WIDE
#define CCV_CLW_WIDE 6
#endif
#ifndef CCV_CLW_BLOCKS_WIDE
#define CCV_CLW_BLOCKS_WIDE 4
#endif
// bwd_clw: the widest instances compiled with the halo (CCV_F_CLW_HALO; kernels.rs's
// CLW_HALO_MAX_W, at most this, turns it on). W = 6 and 8 ran slower with it (docs/perf.md,
// session 34), so their instances keep the code and the shared memory of before.
#ifndef CCV_CLW_HALO_MAXW
#define CCV_CLW_HALO_MAXW 5
#endif
// fwd_clw: 16-byte copies per thread and step (a step is 1 KB: TS tokens x 64 channels of x),
// steps in flight per 32-thread group, and the resident blocks its launch bound asks for
// (kernels.rs's FWD_CLW_BLOCKS_PER_SM mirrors it; 16 KB of shared memory a block)
#ifndef CCV_FWD_CLW_COPIES
#define CCV_FWD_CLW_COPIES 2
#endif
#ifndef CCV_FWD_CLW_RING
#define CCV_FWD_CLW_RING 4
#endif
#ifndef CCV_FWD_CLW_BLOCKS
#define CCV_FWD_CLW_BLOCKS 8
#endif
// channels per bwd_cls thread (4 or 2), per x element size and width: f32 with 2 (8-byte
// accesses, 96 registers at W = 4) ran 4x5376x4096 bwd in 0.449 ms against 0.533 with 4; 16-bit
// with 4 up to W = 4 (bf16 W = 4 with the ring 213.1 against 229.9 us with 2), with 2 above: the
// window's registers leave room for the ring (bf16 W = 5 217.0 against 226.1, W = 7 233.1 against
// 248.1, W = 8 254.6 against 265.5; H100, docs/perf.md, sessions 9-10)
#ifndef CCV_CL_BWD_CV_f32
#define CCV_CL_BWD_CV_f32 2
#endif
#ifndef CCV_CL_BWD_CV_16
#define CCV_CL_BWD_CV_16(W) ((W) >= 5 ? 2 : 4)
#endif

// Staged decode step (step_body in misc.hip): shared-memory bytes and the most batch rows
// per block. kernels.rs mirrors both (UPD_SMEM, UPD_ROWS).
#define CCV_UPD_SMEM 12288
#define CCV_UPD_ROWS 8

// Tile shapes (kernels.rs mirrors them: CF_ITEMS, CL_TT, CL_CC).
// channel-first: a tile is NT threads x ITEMS vectors of 16 bytes along L
//   = 2048 tokens (f16/bf16) or 1024 tokens (f32); a block walks chunk/tile tiles of its row.
#define CCV_CF_ITEMS 2
// channel-last: a tile is CL_TT tokens x CL_CC channels; a block walks chunk/CL_TT tiles.
#define CCV_CL_TT 64
#define CCV_CL_CC 64
// bwd_slab (bwd_slab.hip; kernels.rs mirrors all three: SLAB_*): 16-byte vectors of x (and of
// dout) a thread stages, floats of each of its two tiles ([batch][L + K][channels]), batch rows.
#define CCV_SLAB_VECS 1
#define CCV_SLAB_ELEMS 4608
#define CCV_SLAB_ROWS 64
