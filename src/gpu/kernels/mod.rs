//! Kernel selection and launch geometry: pure Rust, no driver calls.
//!
//! Fills the one by-value kernel argument (`KParams`, a `#[repr(C)]` mirror of `hip/kparams.h`),
//! picks the kernel names (built from the dispatch keys exactly as `hip/instances.h` builds them)
//! and the grid/block shapes from a validated plan and the device facts. The driver layer runs the
//! returned launches in order on the caller's stream.
//!
//! Kernels (see `hip/*.hip`):
//! - `ccv1d_fwd_{cf,cfs,cfw,cl,clw,pt}_{dt}_w{W}`: forward, channel-first tiles (`cfs`: short rows,
//!   several per block; `cfw`: simple rows on the vector path in warp spans, no shared memory;
//!   `pt`: small problems, one output vector per thread) / channel-last streaming (`cl`: 4
//!   channels x a run of tokens per thread; `clw`: simple rows fed by per-warp rings of 16-byte
//!   copies, two channels a thread);
//! - `ccv1d_fwd_states_{dt}`: final_states (after the main kernel: safe when the pool is both
//!   initial_states and final_states);
//! - `ccv1d_bwd_{cf,cfs,cfw,cfw7,cl,cls,clw}_{dt}_w{W}`: dx and per-row, per-chunk fp32 dweight/dbias
//!   partials into the workspace (`cfs`: short channel-first rows, several per block; `cfw`:
//!   channel-first simple rows on the vector path in warp spans, no shared memory; `cfw7`: the
//!   same at 7 resident blocks, W <= 4 only, for grids whose last wave is fuller; `cls`:
//!   channel-last streaming, simple rows on the vector path; `clw`: the same fed by per-warp rings
//!   of 16-byte copies, two channels a thread; `cl`: tiles);
//! - `ccv1d_bwd_slab_{dt}_w{W}`: tiny channel-last backward in one launch (a block holds whole
//!   channels of every row and token, and stores dweight/dbias itself);
//! - `ccv1d_bwd_pt_{dt}_w{W}`: small channel-first backward in one launch (1 or 2 vectors a
//!   thread, a channel's vectors in one block; it stores dweight/dbias itself);
//! - `ccv1d_fwd_pe_{dt}_w{W}` / `ccv1d_bwd_pe_{dt}_w{W}`: the smallest forwards / backwards of
//!   either layout, one output element per thread (the backward holds a channel's every token in
//!   one block and stores dweight/dbias itself);
//! - `ccv1d_bwd_reduce`: sums the partials in a fixed order (deterministic) into dweight/dbias;
//! - `ccv1d_bwd_states_{dt}`: dinitial_states;
//! - `ccv1d_update_{dt}_w{W}`: decode update; `ccv1d_stepv_{dt}_w{W}` / `ccv1d_step_{dt}_w{W}`: its
//!   one-token step in registers / staged through shared memory.

use super::launch::{DeviceInfo, Launch, Vendor};
use crate::error::*;
use crate::plan::*;

// ------------------------------------------------------------------ mirror of hip/kparams.h

pub const DT_F32: i32 = 1;
#[allow(dead_code)] // (the kernels read these codes; Rust passes DType::code())
pub const DT_F16: i32 = 2;
#[allow(dead_code)]
pub const DT_BF16: i32 = 3;

pub const F_BIAS: i32 = 1 << 0;
pub const F_SILU: i32 = 1 << 1;
pub const F_SEQ_IDX: i32 = 1 << 2;
pub const F_PACKED: i32 = 1 << 3;
pub const F_INIT: i32 = 1 << 4;
pub const F_FINAL: i32 = 1 << 5;
pub const F_STATE_IDX: i32 = 1 << 6;
pub const F_HAS_INIT: i32 = 1 << 7;
pub const F_VEC: i32 = 1 << 8;
pub const F_DFINAL: i32 = 1 << 9;
pub const F_DINIT: i32 = 1 << 10;
pub const F_DBIAS: i32 = 1 << 11;
pub const F_CACHE_SEQLENS: i32 = 1 << 12;
pub const F_STATES_ANY: i32 = 1 << 13;
pub const F_DIRECT: i32 = 1 << 14;
pub const F_STEP_PM: i32 = 1 << 15;
pub const F_W_ROWS: i32 = 1 << 17;
pub const F_PE_TOKENS: i32 = 1 << 18;

/// The kernels' single argument. Field for field `struct ccv_params` of `hip/kparams.h`
/// (592 bytes; both sides assert the size and a few offsets).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KParams {
    // data pointers
    pub x: u64,
    pub weight: u64,
    pub bias: u64,
    pub out: u64,
    pub dout: u64,
    pub dx: u64,
    pub dweight: u64,
    pub dbias: u64,
    pub init: u64,
    pub final_st: u64,
    pub dfinal: u64,
    pub dinit: u64,
    pub conv_state: u64,
    pub seq_idx: u64,
    pub cu_seqlens: u64,
    pub state_idx: u64,
    pub has_init: u64,
    pub cache_seqlens: u64,
    pub ws: u64,
    // strides (elements)
    pub x_s: [i64; 3],
    pub out_s: [i64; 3],
    pub dout_s: [i64; 3],
    pub dx_s: [i64; 3],
    pub w_s: [i64; 2],
    pub dw_s: [i64; 2],
    pub bias_s: i64,
    pub dbias_s: i64,
    pub init_s: [i64; 3],
    pub final_s: [i64; 3],
    pub dfinal_s: [i64; 3],
    pub dinit_s: [i64; 3],
    pub cs_s: [i64; 3],
    pub seq_s: [i64; 2],
    pub cu_s: i64,
    pub si_s: i64,
    pub hi_s: i64,
    pub csl_s: i64,
    // dims
    pub batch: i64,
    pub dim: i64,
    pub seqlen: i64,
    pub num_seqs: i64,
    pub num_slots: i64,
    pub state_len: i64,
    // geometry
    pub chunk: i64,
    pub n_chunks: i64,
    pub n_ctiles: i64,
    pub n_blocks: i64,
    pub n_partials: i64,
    // small ints
    pub width: i32,
    pub flags: i32,
    pub w_dtype: i32,
    pub b_dtype: i32,
    pub dw_dtype: i32,
    pub db_dtype: i32,
    pub hi_bytes: i32,
    /// fwd_cf: a block covers `2^rows_log2` (batch, channel) rows of one chunk each (short rows);
    /// other kernels as hip/kparams.h says (bwd_clw: its ring slots in use, not a log).
    pub rows_log2: i32,
    /// bwd_cf: consecutive batch rows a block walks (same channel, one dweight partial), >= 1;
    /// bwd_cfs: > 1 = the batch, rows in channel-major order (a block holds whole channels);
    /// bwd_pe: log2 of a channel's threads; bwd_pt: log2 of a thread's vectors (0-1).
    pub brows: i32,
    pub pad0: i32,
}

pub const KPARAMS_SIZE: usize = 592;
const _: () = assert!(std::mem::size_of::<KParams>() == KPARAMS_SIZE);

impl KParams {
    /// The bytes passed as the kernel's parameter (`void* args[] = { bytes.as_ptr() }`).
    pub fn to_bytes(&self) -> Vec<u8> {
        // SAFETY: KParams is repr(C), made only of u64/i64/i32 fields laid out without padding
        // (checked by the size assertion), so every byte is initialised.
        let p = self as *const KParams as *const u8;
        unsafe { std::slice::from_raw_parts(p, KPARAMS_SIZE) }.to_vec()
    }
}

// ------------------------------------------------------------------ tile shapes (hip/instances.h)

/// Threads per block of the main kernels, update and states kernels.
pub const NT: u32 = 128;
/// Most threads per block of `ccv1d_bwd_reduce` (a launch uses 32 outputs x `reduce_lanes`).
pub const NT_REDUCE: u32 = 1024;
/// Channel-first: 16-byte vectors per thread per tile (`CCV_CF_ITEMS`).
pub const CF_ITEMS: i64 = 2;
/// Channel-last tile: tokens x channels (`CCV_CL_TT`, `CCV_CL_CC`).
pub const CL_TT: i64 = 64;
pub const CL_CC: i64 = 64;
/// Smallest chunk of the streaming channel-last kernels: a multiple of their lanes per block
/// (fwd_cl 8; bwd_cls: 16-bit 8, or 4 with 2 channels per thread at W >= 5, f32 4), so every lane
/// gets chunk / lanes tokens.
pub const CL_SUB: i64 = 8;
/// `ccv1d_bwd_slab_*` (`CCV_NT_bwd_slab`, `CCV_SLAB_*`): threads per block, 16-byte vectors
/// of x (and of dout) per thread, floats per shared-memory tile, most batch rows.
pub const NT_SLAB: u32 = 256;
pub const SLAB_VECS: i64 = 1;
pub const SLAB_ELEMS: i64 = 4608;
pub const SLAB_ROWS: i64 = 64;
/// `ccv1d_bwd_pt_*` (`CCV_NT_bwd_pt`): the most threads of a block (a channel's 16-byte vectors
/// lie in one block; blocks of 128 threads unless a channel needs more), and the most tokens (B L)
/// of a channel it takes on any grid and width by default (bf16: up to its 512 vectors).
pub const NT_BWD_PT: u32 = 256;
pub const NT_BWD_PT_MIN: u32 = 128;
pub const BWD_PT_TOKENS: i64 = 2048;
pub const BWD_PT_TOKENS_BF16: i64 = 4096;

/// `ccv1d_bwd_pt_*`'s split: 2^lg threads a channel (rows_log2), 2^vl vectors a thread (brows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtShape {
    pub lg: i32,
    pub vl: i32,
}

impl PtShape {
    /// Threads a block: 128, or a channel's 2^lg when more.
    pub fn threads(self) -> u32 {
        NT_BWD_PT_MIN.max(1 << self.lg)
    }
}

/// `ccv1d_bwd_pe_*` (`CCV_NT_bwd_pe`): the most threads of a block (a block holds a channel's
/// every token, padded to powers of two), and the fewest (two 32-wide or one 64-wide wave).
pub const NT_BWD_PE: i64 = 512;
pub const BWD_PE_MIN_BLOCK: i64 = 64;

/// The small-problem backward kernels a call may take (tests turn them off to reach the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmallBwd {
    pub pt: bool,
    pub pe: bool,
    /// `bwd_pt`'s most tokens (B L) a channel on any grid when given (tests); else the rule of
    /// `bwd_pt_shape`.
    pub pt_tokens: Option<i64>,
}

impl SmallBwd {
    pub const ALL: SmallBwd = SmallBwd { pt: true, pe: true, pt_tokens: None };
    #[cfg(test)]
    pub const NONE: SmallBwd = SmallBwd { pt: false, pe: false, pt_tokens: None };
    #[cfg(test)]
    pub const NO_PE: SmallBwd = SmallBwd { pt: true, pe: false, pt_tokens: None };
}

/// Staged decode step: shared-memory bytes per block and most batch rows per block
/// (`CCV_UPD_SMEM`, `CCV_UPD_ROWS`).
pub const UPD_SMEM: i64 = 12288;
pub const UPD_ROWS: i64 = 8;
/// A block walks at most this many tiles of its row (bounds the serial part of a block).
const MAX_TILES_PER_BLOCK: i64 = 16;
/// Resident 128-thread blocks per multiprocessor assumed when sizing chunks (about 2 waves).
const BLOCKS_PER_SM: i64 = 16;
/// Largest linear block count (block indices are decoded in 32 bits on the device).
const MAX_BLOCKS: i64 = i32::MAX as i64;
const MAX_GRID_X: i64 = 1 << 20;
/// gridDim.y limit of both vendors
const MAX_GRID_Y: i64 = 65535;

/// Which kernel family handles a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// tiles along L; 16-byte vectors along L when every big tensor has L-stride 1
    ChannelFirst,
    /// [tokens x channels] tiles; 16-byte vectors along D when every big tensor has D-stride 1
    ChannelLast,
}

impl Layout {
    fn tag(self) -> &'static str {
        match self {
            Layout::ChannelFirst => "cf",
            Layout::ChannelLast => "cl",
        }
    }
}

fn dt_name(d: DType) -> &'static str {
    d.name()
}

/// Every kernel name the kernel binaries export (for the driver's module checks and tests).
#[allow(dead_code)]
pub fn all_kernel_names() -> Vec<String> {
    let mut v = Vec::new();
    for dt in ["f32", "f16", "bf16"] {
        for fam in ["fwd_cf", "fwd_cfs", "fwd_cfw", "fwd_cl", "fwd_clw", "fwd_pt", "fwd_pe", "bwd_cf", "bwd_cfs", "bwd_cfw", "bwd_cl", "bwd_cls", "bwd_clw", "bwd_slab", "bwd_pt", "bwd_pe", "update", "step", "stepv"] {
            for w in 1..=8 {
                v.push(format!("ccv1d_{fam}_{dt}_w{w}"));
            }
        }
        v.push(format!("ccv1d_fwd_states_{dt}"));
        v.push(format!("ccv1d_bwd_states_{dt}"));
        v.extend((1..=4).map(|w| format!("ccv1d_bwd_cfw7_{dt}_w{w}")));
    }
    v.push("ccv1d_bwd_reduce".to_string());
    v.push("ccv1d_copy16".to_string());
    v
}

/// The 16-byte-vector copy kernel of `ccv1d bench`'s ceiling: `bytes` (a multiple of 16, both
/// pointers 16-byte aligned) from `src` to `dst`, grid-stride over 4 blocks per multiprocessor.
pub fn copy_launch(dst: usize, src: usize, bytes: usize, dev: &DeviceInfo) -> Launch {
    let mut k = KParams::default();
    k.x = src as u64;
    k.out = dst as u64;
    k.seqlen = (bytes / 16) as i64;
    let blocks = (4 * dev.multiprocessors.max(1) as i64).min(ceil_div(k.seqlen.max(1), 256));
    k.n_blocks = blocks;
    launch("ccv1d_copy16".to_string(), blocks, 256, &k)
}

/// Layout of x as seen by the kernels: channel-first when the L-stride is 1 (or L is 1 and the
/// D-stride is not), channel-last when the D-stride is 1; otherwise the one whose stride is
/// smaller (the scalar path of that family handles any strides).
pub fn choose_layout(x: &View, dim: i64, seqlen: i64) -> Layout {
    let unit_l = x.stride[2] == 1 || seqlen <= 1;
    let unit_d = x.stride[1] == 1 || dim <= 1;
    match (unit_l, unit_d) {
        (true, false) => Layout::ChannelFirst,
        (false, true) => Layout::ChannelLast,
        (true, true) => {
            if seqlen <= 1 && dim > 1 {
                Layout::ChannelLast
            } else {
                Layout::ChannelFirst
            }
        }
        (false, false) => {
            if x.stride[1].unsigned_abs() < x.stride[2].unsigned_abs() {
                Layout::ChannelLast
            } else {
                Layout::ChannelFirst
            }
        }
    }
}

/// Whether a `[batch, dim, seqlen]` view allows 16-byte vectors along the layout's unit dim:
/// that stride is 1, the base is 16-byte aligned, and every other stride (of a dim longer
/// than 1) is a multiple of 16 bytes.
fn vec_ok(v: &View, layout: Layout, dims: [i64; 3]) -> bool {
    let es = v.dtype.size() as i64;
    let unit = match layout {
        Layout::ChannelFirst => 2,
        Layout::ChannelLast => 1,
    };
    if v.stride[unit] != 1 || v.addr % 16 != 0 {
        return false;
    }
    (0..3).all(|i| i == unit || dims[i] <= 1 || (v.stride[i].wrapping_mul(es)) % 16 == 0)
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// Tokens per tile of a layout for an x dtype.
pub fn tile_tokens(layout: Layout, dt: DType) -> i64 {
    match layout {
        Layout::ChannelFirst => NT as i64 * (16 / dt.size() as i64) * CF_ITEMS,
        Layout::ChannelLast => CL_TT,
    }
}

/// Main-kernel geometry: (chunk tokens, chunks per row, channel tiles, blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MainGeom {
    pub layout: Layout,
    pub chunk: i64,
    pub n_chunks: i64,
    pub n_ctiles: i64,
    pub n_blocks: i64,
    /// Batch rows per block (`bwd_cf`, the `cfw` kernels: `cf_row_group`), 1 elsewhere.
    pub brows: i64,
}

/// Split each row into chunks of whole tiles: one tile per block while that leaves fewer than
/// about two waves of blocks, more tiles per block (up to MAX_TILES_PER_BLOCK) when there is
/// plenty of parallel work anyway. Deterministic for a given (plan, device).
pub fn main_geometry(layout: Layout, dt: DType, batch: i64, dim: i64, seqlen: i64, dev: &DeviceInfo) -> Result<MainGeom> {
    if dim > i32::MAX as i64 || batch > i32::MAX as i64 {
        bail!(CCV1D_ERR_OVERFLOW, "GPU kernels take batch and dim below 2^31 (batch {batch}, dim {dim})");
    }
    let tile = tile_tokens(layout, dt);
    let tiles_per_row = ceil_div(seqlen.max(1), tile);
    let n_ctiles = match layout {
        Layout::ChannelFirst => 1,
        Layout::ChannelLast => ceil_div(dim.max(1), CL_CC),
    };
    let rows = match layout {
        Layout::ChannelFirst => batch.saturating_mul(dim),
        Layout::ChannelLast => batch.saturating_mul(n_ctiles),
    };
    let total = rows.saturating_mul(tiles_per_row);
    let target = (dev.multiprocessors.max(1) as i64) * BLOCKS_PER_SM;
    let tuned = if layout == Layout::ChannelFirst { knob(Knob::CfTiles) } else { None };
    let per_block = tuned.unwrap_or(total / target).clamp(1, MAX_TILES_PER_BLOCK.min(tiles_per_row));
    let chunk = per_block * tile;
    let n_chunks = ceil_div(seqlen.max(1), chunk);
    let n_blocks = rows.saturating_mul(n_chunks);
    if n_blocks > MAX_BLOCKS {
        bail!(CCV1D_ERR_OVERFLOW, "problem too large for one launch ({n_blocks} blocks)");
    }
    Ok(MainGeom { layout, chunk, n_chunks, n_ctiles, n_blocks, brows: 1 })
}

/// Channel-last streaming kernels (`ccv1d_fwd_cl_*`: each thread walks chunk / 8 consecutive
/// tokens of 4 channels, reading K tokens before them again; the backward's `ccv1d_bwd_cls_*`).
/// Chunks of whole CL_TT tiles, balanced along the row; slots = `fit.blocks_per_sm` resident
/// blocks per multiprocessor. Two ways to cut rows (`cl_fit` says which kernel takes which):
/// - `one_wave`: when the (batch, channel tile) rows fit in the slots, into as many chunks as one
///   wave holds, no more, and at most `max_chunk` tokens long: the longest lanes that still fill
///   the slots;
/// - otherwise the fewest wave-quantized tiles per block slot, cost = waves * (tiles per block +
///   1/2 for the halo a lane re-reads).
/// A problem under one wave even at one tile per block (few short rows: the seeds' Tiny and
/// Small) cuts its tiles into as many chunks of CL_SUB-multiples as the slots hold: a lane then
/// walks 1-2 tokens instead of 8 in sequence.
pub fn cl_stream_geometry(batch: i64, dim: i64, seqlen: i64, fit: ClFit, dev: &DeviceInfo) -> Result<MainGeom> {
    if dim > i32::MAX as i64 || batch > i32::MAX as i64 {
        bail!(CCV1D_ERR_OVERFLOW, "GPU kernels take batch and dim below 2^31 (batch {batch}, dim {dim})");
    }
    let tiles_per_row = ceil_div(seqlen.max(1), CL_TT);
    let n_ctiles = ceil_div(dim.max(1), CL_CC);
    let rows = batch.saturating_mul(n_ctiles);
    let slots = (dev.multiprocessors.max(1) as i64) * fit.blocks_per_sm;
    let mut n_chunks = 1;
    if let (Some(max_chunk), true) = (fit.one_wave, rows <= slots) {
        let per_row = (slots / rows.max(1)).max(ceil_div(tiles_per_row, (max_chunk / CL_TT).max(1)));
        n_chunks = ceil_div(tiles_per_row, ceil_div(tiles_per_row, per_row.min(tiles_per_row)));
    } else {
        // every per-block tile count gives a candidate (the fewest chunks for it)
        let mut best = f64::INFINITY;
        let mut per_block = tiles_per_row;
        while per_block >= 1 {
            let n = ceil_div(tiles_per_row, per_block);
            let pb = ceil_div(tiles_per_row, n);
            let cost = ceil_div(rows.saturating_mul(n), slots) as f64 * (pb as f64 + 0.5);
            if cost < best {
                (best, n_chunks) = (cost, n);
            }
            if pb == 1 {
                break;
            }
            per_block = pb - 1;
        }
    }
    if let Some(t) = knob(Knob::ClTiles) {
        n_chunks = ceil_div(tiles_per_row, t);
    }
    let mut chunk = ceil_div(tiles_per_row, n_chunks) * CL_TT;
    if knob(Knob::ClTiles).is_none() && chunk == CL_TT && rows.saturating_mul(tiles_per_row) < slots {
        let per_row = (slots / rows.max(1)).max(1);
        chunk = (ceil_div(seqlen.max(1), per_row.saturating_mul(CL_SUB)) * CL_SUB).clamp(CL_SUB, CL_TT);
    }
    if let Some(c) = knob(Knob::ClChunk) {
        chunk = ceil_div(c, CL_SUB) * CL_SUB;
    }
    let n_chunks = ceil_div(seqlen.max(1), chunk);
    let n_blocks = rows.saturating_mul(n_chunks);
    if n_blocks > MAX_BLOCKS {
        bail!(CCV1D_ERR_OVERFLOW, "problem too large for one launch ({n_blocks} blocks)");
    }
    Ok(MainGeom { layout: Layout::ChannelLast, chunk, n_chunks, n_ctiles, n_blocks, brows: 1 })
}

/// How `cl_stream_geometry` fits a streaming channel-last kernel to the device.
#[derive(Clone, Copy, Debug)]
pub struct ClFit {
    /// resident blocks per multiprocessor
    pub blocks_per_sm: i64,
    /// Some(most tokens per chunk): rows that fit in one wave are cut into as many chunks as the
    /// wave holds; None: the wave-quantized cost everywhere
    pub one_wave: Option<i64>,
}

/// The streaming channel-last kernels' fit. Blocks per SM: the forward's launch bounds (6 for
/// W <= 4, else 4); the backward's f32 ones (5, else 4; W = 8 is bound to 3 but was measured with
/// the chunks of 4); 16-bit backward: its launch bounds (4 for W <= 2, 3 above, the widths with
/// the shared-memory ring). Chunks, as measured on the H100 (docs/perf.md, session 9; 4x5376x4096
/// SiLU, us): one wave for the 16-bit forward (bf16 W = 4 138.1 -> 132.1, W = 5 146.2 -> 138.0)
/// and the f32 backward (W = 4 384.0 -> 376.7); the f32 forward keeps the wave-quantized cost (W
/// = 4 258.1 against 268.3 in one wave); the 16-bit backward one wave (8x2048x1024 bf16 54.2 ->
/// 45.8, 4x4096x512 37.4 -> 27.7, 4x5376x4096 W = 5 / 6 226.0 / 228.1), in chunks of at most 2048
/// tokens at W = 3 / 4 (W = 4 210.9 against 226.6 in 4096, W = 3 206.9 against 221.0) and the
/// wave-quantized cost at W <= 2 (no ring there: W = 2 195.9 against 205.4 in one wave).
fn cl_fit(backward: bool, dt: DType, width: i64) -> ClFit {
    let wide = i64::MAX;
    let (blocks_per_sm, one_wave) = match (backward, dt) {
        (false, DType::F32) => (if width <= 4 { 6 } else { 4 }, None),
        (false, _) => (if width <= 4 { 6 } else { 4 }, Some(wide)),
        (true, DType::F32) => (if width <= 4 { 5 } else { 4 }, Some(wide)),
        (true, _) if width <= 2 => (4, None),
        (true, _) => (3, Some(if width <= 4 { 2048 } else { wide })),
    };
    ClFit { blocks_per_sm, one_wave }
}

/// The channel-last forward's chunks. Big problems run fastest as many waves of short blocks
/// (H100, docs/perf.md, session 14; µs, SiLU, against `cl_stream_geometry`'s chunks):
/// - f32 at W <= 4 in chunks of 32 tokens (one step of 4 per lane): 4x5376x4096 232.6 against
///   250.5, 8x2048x1024 46.5 / 52.0, 4x256x4096 13.7 / 14.9, 4x4096x512 24.7 / 27.7; at W = 5 / 6
///   in chunks of 64 (235.8 / 236.0 against 255.3 / 255.0; in 32: 267.0 / 262.2). W = 7 / 8 keep
///   theirs (316.2 / 279.7 in chunks of 64 against 257.6 / 256.1).
/// - 16-bit at W <= 4 (the burst walk, fwd_cl.hip) in chunks of 64 tokens (one step a lane) up to
///   FWD_CL_FINE_WAVES waves of them, else 128: session 27, bf16 SiLU, 64 against the chunks of
///   before (128 from two waves on, else one wave), single rows: 4x256x4096 (1.3 waves) 8.9 /
///   9.1, 1x2048x4096 14.9 / 15.1, 4x256x2048 5.5 / 5.7, 1x256x4096 4.1 / 4.3, 4x4096x512 14.9 /
///   14.9; 1x5376x4096 and 8x5376x512 (6.8 waves) 33.3-33.4 / 33.5-33.6, 8x2048x1024 (5.2 waves)
///   26.1 / 26.1, but 26.3-26.5 / 25.9-26.0 in the full bench; 2x5376x4096 (13.6 waves) 63.6 /
///   63.0, 4x5376x4096 124.0 / 121.9 (128 had beaten the one-wave chunks there in session 14:
///   122.9 against 128.2). W >= 5 keeps its chunks (W = 5 139.3 in chunks of 128 against 136.9).
/// The `CCV1D_CL_TILES` / `CCV1D_CL_CHUNK` knobs set the chunk instead.
fn fwd_cl_geometry(batch: i64, dim: i64, seqlen: i64, dt: DType, width: i64, dev: &DeviceInfo) -> Result<MainGeom> {
    let fit = cl_fit(false, dt, width);
    let mut g = cl_stream_geometry(batch, dim, seqlen, fit, dev)?;
    let tuned = knob(Knob::ClChunk).is_some() || knob(Knob::ClTiles).is_some();
    let slots = (dev.multiprocessors.max(1) as i64) * fit.blocks_per_sm;
    let fine = batch.saturating_mul(g.n_ctiles).saturating_mul(ceil_div(seqlen.max(1), CL_TT)) <= FWD_CL_FINE_WAVES * slots;
    let short = match (dt, width) {
        (DType::F32, ..=4) => 32,
        (DType::F32, 5 | 6) => 64,
        (_, ..=4) if fine => CL_TT,
        (_, ..=4) => 128,
        _ => return Ok(g),
    };
    if !tuned {
        recut_chunks(&mut g, batch, seqlen, short, 0);
    }
    Ok(g)
}

/// The most waves of 64-token chunks `fwd_cl_geometry` gives the 16-bit forward at W <= 4.
const FWD_CL_FINE_WAVES: i64 = 4;

/// Cuts a streaming channel-last geometry's rows into chunks of `short` tokens where its chunks
/// are longer and that makes at least `min_blocks` blocks (within one launch).
fn recut_chunks(g: &mut MainGeom, batch: i64, seqlen: i64, short: i64, min_blocks: i64) {
    let n_chunks = ceil_div(seqlen.max(1), short);
    let n_blocks = batch.saturating_mul(g.n_ctiles).saturating_mul(n_chunks);
    if g.chunk > short && n_blocks <= MAX_BLOCKS && n_blocks >= min_blocks {
        (g.chunk, g.n_chunks, g.n_blocks) = (short, n_chunks, n_blocks);
    }
}

/// `fwd_clw`'s chunks: `cl_stream_geometry`'s (wave-quantized, 8 blocks per SM), cut into
/// FWD_CLW_CHUNK tokens where that makes at least two waves. H100 (docs/perf.md, session 18;
/// bf16 4x5376x4096 SiLU, µs, chunks of 256 / 128 / 512 / the stream geometry's): W = 5 130.2 /
/// 140.1 / 134.9 / 147.0, W = 8 135.1 / 159.9 / 137.6 / 153.6. Knobs set the chunk instead.
fn fwd_clw_geometry(batch: i64, dim: i64, seqlen: i64, dev: &DeviceInfo) -> Result<MainGeom> {
    let fit = ClFit { blocks_per_sm: FWD_CLW_BLOCKS_PER_SM, one_wave: None };
    let mut g = cl_stream_geometry(batch, dim, seqlen, fit, dev)?;
    if knob(Knob::ClChunk).is_none() && knob(Knob::ClTiles).is_none() {
        let waves2 = 2 * (dev.multiprocessors.max(1) as i64) * FWD_CLW_BLOCKS_PER_SM;
        recut_chunks(&mut g, batch, seqlen, FWD_CLW_CHUNK, waves2);
    }
    Ok(g)
}

/// Resident `bwd_cf` / `bwd_cfw` blocks per multiprocessor: their launch bounds in instances.h
/// (8 for W <= 4, else 7, and 6 for 16-bit `bwd_cfw` at W = 8; shared memory allows 9).
fn bwd_cf_blocks_per_sm(width: i64, warp_16bit: bool) -> i64 {
    match width {
        ..=4 => 8,
        8 if warp_16bit => 6,
        _ => 7,
    }
}

/// Resident `fwd_cfw` blocks per multiprocessor: its launch bound in instances.h (12 for W <= 5,
/// else 10, as fwd_cf).
fn fwd_cfw_blocks_per_sm(width: i64) -> i64 {
    if width <= 5 { 12 } else { 10 }
}

/// `bwd_cf`, `bwd_cfw` and `fwd_cfw` on rows a block covers whole (one chunk per row): several
/// batch rows of one channel per block, one set of weights (and one dweight/dbias partial) for
/// all of them. A block's setup and final reduction cost about one step (H100 ncu of 4x5376x4096
/// bf16 on bwd_cf: 13 of 57 instructions per element, a fifth of the stall samples in the
/// weights' loads, with 2 tiles per block), so G rows per block is chosen for the fewest wave-quantized
/// (steps + 1) per block slot. A row is `spans` units of work and a block does `per_step` at a
/// time (bwd_cf: tiles, 1; the cfw kernels: warp spans, their warps), at most
/// MAX_TILES_PER_BLOCK steps. `CCV1D_BWD_ROWS` overrides it (tuning).
fn cf_row_group(batch: i64, dim: i64, g: &MainGeom, spans: i64, per_step: i64, slots: i64, whole_batch_on_tie: bool) -> i64 {
    if g.n_chunks != 1 || batch <= 1 {
        return 1;
    }
    if let Some(v) = knob(Knob::BwdRows) {
        return v.clamp(1, batch);
    }
    let (spans, per_step) = (spans.max(1), per_step.max(1));
    let mut best = (i64::MAX, 1);
    for rows in 1..=batch.min(MAX_TILES_PER_BLOCK * per_step / spans).max(1) {
        let cost = cf_block_cost(batch, dim, 1, rows, spans, per_step, slots);
        // backward: a tie with the whole batch goes to it (one partial row: no reduce launch)
        if cost < best.0 || (whole_batch_on_tie && cost == best.0 && rows == batch) {
            best = (cost, rows);
        }
    }
    best.1
}

/// `cf_row_group`'s cost of a channel-first grid: wave-quantized blocks (`rows` batch rows of a
/// channel and one of `n_chunks` chunks each) times a block's steps + 1 (its setup and final
/// reduction), a row being `spans` units of work and a step `per_step` of them.
fn cf_block_cost(batch: i64, dim: i64, n_chunks: i64, rows: i64, spans: i64, per_step: i64, slots: i64) -> i64 {
    let blocks = ceil_div(batch, rows).saturating_mul(dim).saturating_mul(n_chunks);
    let steps = ceil_div(rows.saturating_mul(spans), per_step.max(1));
    ceil_div(blocks, slots.max(1)).saturating_mul(steps + 1)
}

/// A 2-D grid holding `n` blocks (the kernels decode `blockIdx.y * gridDim.x + blockIdx.x` and
/// blocks past `n` return at once).
fn grid_for(n: i64) -> [u32; 3] {
    let gx = n.clamp(1, MAX_GRID_X);
    let gy = ceil_div(n.max(1), gx);
    [gx as u32, gy as u32, 1]
}

fn launch(kernel: String, n_blocks: i64, threads: u32, p: &KParams) -> Launch {
    Launch { kernel, grid: grid_for(n_blocks), block: [threads, 1, 1], shared_mem_bytes: 0, params: p.to_bytes(), overlap_previous: false }
}

// ------------------------------------------------------------------ params from plans

fn set_view3(dst_ptr: &mut u64, dst_s: &mut [i64; 3], v: &View) {
    *dst_ptr = v.addr as u64;
    *dst_s = v.stride;
}

fn conv_params(inp: &ConvInputs) -> KParams {
    let mut k = KParams::default();
    set_view3(&mut k.x, &mut k.x_s, &inp.x);
    k.weight = inp.weight.addr as u64;
    k.w_s = [inp.weight.stride[0], inp.weight.stride[1]];
    k.w_dtype = inp.weight.dtype.code();
    k.b_dtype = DT_F32;
    k.dw_dtype = DT_F32;
    k.db_dtype = DT_F32;
    k.hi_bytes = 4;
    k.brows = 1;
    let mut f = 0;
    if let Some(b) = &inp.bias {
        k.bias = b.addr as u64;
        k.bias_s = b.stride[0];
        k.b_dtype = b.dtype.code();
        f |= F_BIAS;
    }
    if inp.act == Act::Silu {
        f |= F_SILU;
    }
    if let Some(s) = &inp.seq_idx {
        k.seq_idx = s.addr as u64;
        k.seq_s = s.stride;
        f |= F_SEQ_IDX;
    }
    if let Seqs::Packed { cu_seqlens, .. } = &inp.seqs {
        k.cu_seqlens = cu_seqlens.addr as u64;
        k.cu_s = cu_seqlens.stride[0];
        f |= F_PACKED;
    }
    if let Some(s) = &inp.initial_states {
        set_view3(&mut k.init, &mut k.init_s, s);
        f |= F_INIT | F_STATES_ANY;
    }
    if let Some(s) = &inp.pool.state_indices {
        k.state_idx = s.addr as u64;
        k.si_s = s.stride[0];
        f |= F_STATE_IDX;
    }
    if let Some(s) = &inp.pool.has_initial_state {
        k.has_init = s.addr as u64;
        k.hi_s = s.stride[0];
        k.hi_bytes = s.elem_bytes as i32;
        f |= F_HAS_INIT;
    }
    k.batch = inp.batch;
    k.dim = inp.dim;
    k.seqlen = inp.seqlen;
    k.num_seqs = inp.num_seqs();
    k.num_slots = inp.pool.num_slots;
    k.width = inp.width as i32;
    k.flags = f;
    k
}

fn check_width(w: i64) -> Result<()> {
    if !(1..=8).contains(&w) {
        bail!(CCV1D_ERR_WIDTH, "width {w} outside 1..=8");
    }
    Ok(())
}

/// The launch of a per-(sequence, channel) states kernel, or None when there is nothing to do.
fn states_launch(name: String, p: &KParams) -> Option<Launch> {
    if p.width <= 1 || p.num_seqs <= 0 || p.dim <= 0 {
        return None;
    }
    let mut k = *p;
    k.n_ctiles = ceil_div(p.dim, NT as i64);
    k.n_blocks = p.num_seqs.saturating_mul(k.n_ctiles);
    k.chunk = 0;
    k.n_chunks = 0;
    Some(launch(name, k.n_blocks, NT, &k))
}

fn main_params(p: &KParams, g: &MainGeom, vec: bool) -> KParams {
    let mut k = *p;
    k.chunk = g.chunk;
    k.n_chunks = g.n_chunks;
    k.n_ctiles = g.n_ctiles;
    k.n_blocks = g.n_blocks;
    k.brows = g.brows as i32;
    if vec {
        k.flags |= F_VEC;
    }
    k
}

/// Channel-first forward on rows shorter than half a tile: log2 of the rows a block covers (its
/// threads split into 2^r sub-blocks of one row each, at least 16 threads per row; kernel
/// `ccv1d_fwd_cfs_*`), else 0. Only when each row is one chunk (n_chunks = 1) and the row index
/// fits the kernel's 32 bits.
pub fn short_rows_log2(rows: i64, seqlen: i64, g: &MainGeom, dt: DType) -> i32 {
    let tile = tile_tokens(Layout::ChannelFirst, dt);
    let mut r = 0;
    while g.n_chunks == 1 && rows < (1 << 31) && r < 3 && seqlen.max(1) * (2 << r) <= tile {
        r += 1;
    }
    r
}

/// Channel-first short rows (forward and backward `*_cfs_*` kernels): sets the main kernel's
/// rows_log2 and block count and answers true when the rows are split into sub-blocks.
fn split_short_rows(km: &mut KParams, inp: &ConvInputs, g: &MainGeom) -> bool {
    if g.layout != Layout::ChannelFirst {
        return false;
    }
    km.rows_log2 = short_rows_log2(inp.batch * inp.dim, inp.seqlen, g, inp.x.dtype);
    if km.rows_log2 == 0 {
        return false;
    }
    km.n_blocks = ceil_div(inp.batch * inp.dim, 1 << km.rows_log2) * g.n_chunks;
    true
}

/// Launches of a forward call, in order.
pub fn fwd_launches(p: &FwdPlan, dev: &DeviceInfo) -> Result<Vec<Launch>> {
    fwd_launches_pt(p, dev, None, None)
}

/// `fwd_launches` with `fwd_pt` taking problems of at most `pt_max` vectors and `fwd_pe` of at
/// most `pe_max` elements (`Some(0)`: never; tests reach the other kernels on small problems this
/// way; None: the library's limits, `pt_max_vectors` / `pe_max_elems` or their knobs).
pub fn fwd_launches_pt(p: &FwdPlan, dev: &DeviceInfo, pt_max: Option<i64>, pe_max: Option<i64>) -> Result<Vec<Launch>> {
    let inp = &p.inp;
    check_width(inp.width)?;
    let mut k = conv_params(inp);
    set_view3(&mut k.out, &mut k.out_s, &p.out);
    if let Some(f) = &p.final_states {
        set_view3(&mut k.final_st, &mut k.final_s, f);
        k.flags |= F_FINAL | F_STATES_ANY;
    }
    let mut v = Vec::new();
    if inp.batch <= 0 || inp.dim <= 0 {
        return Ok(v);
    }
    let dt = inp.x.dtype;
    if inp.seqlen > 0 {
        let layout = choose_layout(&inp.x, inp.dim, inp.seqlen);
        let dims = [inp.batch, inp.dim, inp.seqlen];
        let vec = vec_ok(&inp.x, layout, dims) && vec_ok(&p.out, layout, dims);
        let pe = fwd_pe_launch(p, layout, &k, pe_max.unwrap_or_else(|| knob(Knob::FwdPe).unwrap_or_else(|| pe_max_elems(dt, layout))));
        let pt = || fwd_pt_launch(p, layout, vec, &k, pt_max.unwrap_or_else(|| knob(Knob::FwdPt).unwrap_or_else(|| pt_max_vectors(dt))));
        if let Some(l) = pe.or_else(pt) {
            v.push(l);
        } else {
            let clw = layout == Layout::ChannelLast && vec && fwd_clw(p);
            let mut g = match layout {
                Layout::ChannelFirst => main_geometry(layout, dt, inp.batch, inp.dim, inp.seqlen, dev)?,
                Layout::ChannelLast if clw => fwd_clw_geometry(inp.batch, inp.dim, inp.seqlen, dev)?,
                Layout::ChannelLast => fwd_cl_geometry(inp.batch, inp.dim, inp.seqlen, dt, inp.width, dev)?,
            };
            let warp = layout == Layout::ChannelFirst && fwd_warp_spans(p, dev);
            if warp {
                let slots = dev.multiprocessors.max(1) as i64 * fwd_cfw_blocks_per_sm(inp.width);
                let spans = ceil_div(g.chunk.min(inp.seqlen), warp_span_tokens(dt, dev));
                g.brows = cf_row_group(inp.batch, inp.dim, &g, spans, NT as i64 / dev.warp_size.max(1) as i64, slots, false);
                g.n_blocks = ceil_div(inp.batch, g.brows).saturating_mul(inp.dim).saturating_mul(g.n_chunks);
            }
            let mut km = main_params(&k, &g, vec);
            let family = if warp {
                "cfw"
            } else if clw {
                "clw"
            } else if split_short_rows(&mut km, inp, &g) {
                "cfs"
            } else {
                layout.tag()
            };
            v.push(launch(format!("ccv1d_fwd_{family}_{}_w{}", dt_name(dt), inp.width), km.n_blocks, NT, &km));
        }
    }
    if p.final_states.is_some() {
        v.extend(states_launch(format!("ccv1d_fwd_states_{}", dt_name(dt)), &k));
    }
    Ok(v)
}

/// Most vectors (16 bytes of x each) of a forward that `fwd_pt` takes: one thread per output
/// vector, whose loads (its vector, the one before it, the channel's weights) all go out before
/// anything waits. Up to here it beat the tiled and warp-span kernels on the H100 (docs/perf.md,
/// session 19; W = 4 SiLU, µs, `fwd_pt` against the default before): bf16 2^21 vectors
/// 8x2048x1024 24.60 / 26.12, 16x2048x512 24.86 / 26.09, 4x4096x512 (2^20) 13.58 / 14.41,
/// 4x256x4096 (2^19) 7.84 / 8.62; f32 2^21 4x4096x512 24.46 / 25.01; f16 2^19 4x256x4096 8.23 /
/// 8.62. Past it, it lost or tied: bf16 4x5376x4096 123.85 / 121.94, f32 2^22 8x2048x1024
/// 47.36 / 47.03, f16 2^20 4x4096x512 14.45 / 14.41, f16 2^21 8x2048x1024 26.10 / 26.08.
/// `CCV1D_FWD_PT` overrides it for every dtype (0: never).
fn pt_max_vectors(dt: DType) -> i64 {
    match dt {
        DType::F16 => 1 << 19,
        DType::BF16 | DType::F32 => 1 << 21,
    }
}

/// The small-problem forward (`ccv1d_fwd_pt_*`, one output vector per thread): channel-first
/// simple rows (rows mode, no seq_idx) on the vector path, L a multiple of the vector, at most
/// `pt_max` vectors (`pt_max_vectors` by default). Grid: x = channel groups, y = segments of a
/// row's vectors, z = batch rows (hip/fwd_pt.hip). Channel-last problems keep `fwd_cl`: a
/// channel-last version was slower there (docs/perf.md, session 16).
fn fwd_pt_launch(p: &FwdPlan, layout: Layout, vec: bool, k: &KParams, pt_max: i64) -> Option<Launch> {
    let inp = &p.inp;
    let v = 16 / inp.x.dtype.size() as i64;
    if layout != Layout::ChannelFirst || !vec || k.flags & (F_SEQ_IDX | F_PACKED) != 0 || inp.seqlen % v != 0 {
        return None;
    }
    let inner = inp.seqlen / v;
    let n = inp.batch.saturating_mul(inp.dim).saturating_mul(inner);
    if n > pt_max || inp.dim > i32::MAX as i64 || inp.seqlen > i32::MAX as i64 {
        return None;
    }
    // 2^lg vectors of a row per channel, 128 >> lg channels per block
    let lg = (inner.min(NT as i64) as u64).next_power_of_two().trailing_zeros() as i64;
    let (gx, gy) = (ceil_div(inp.dim, NT as i64 >> lg), ceil_div(inner, 1 << lg));
    if gx > MAX_GRID_X || gy > MAX_GRID_Y || inp.batch > MAX_GRID_Y {
        return None;
    }
    let mut kp = *k;
    kp.rows_log2 = lg as i32;
    kp.n_blocks = gx * gy * inp.batch;
    let mut l = launch(format!("ccv1d_fwd_pt_{}_w{}", dt_name(inp.x.dtype), inp.width), kp.n_blocks, NT, &kp);
    l.grid = [gx as u32, gy as u32, inp.batch as u32];
    Some(l)
}

/// Most elements of x (threads) of a forward on `fwd_pe`. Measured on the H100 (docs/perf.md,
/// session 21; seeds' rows, µs, against the kernels it replaces):
/// - channel-last, every dtype, against `fwd_cl`: faster up to 2^17 (Tiny 1.7 against 2.2-2.3,
///   4x64x512 2.4-2.5 against 2.6-2.7), slower past it (4x64x1024 3.7 against 2.8-3.1);
/// - channel-first f32 / f16, against `fwd_pt`: faster or equal up to 2^15 (Small 2x64x256 2.0 /
///   2.0 against 2.2 / 2.1), slower at 2^17 (4x64x512 2.6 against 2.5 / 2.4);
/// - channel-first bf16: `fwd_pt` is as fast or faster everywhere (Tiny 1.8 against 1.9).
/// `CCV1D_FWD_PE` sets one limit for all (0: never).
fn pe_max_elems(dt: DType, layout: Layout) -> i64 {
    match (layout, dt) {
        (Layout::ChannelLast, _) => 1 << 17,
        (Layout::ChannelFirst, DType::BF16) => 0,
        (Layout::ChannelFirst, _) => 1 << 15,
    }
}

/// The smallest forwards (`ccv1d_fwd_pe_*`, one output element per thread): simple rows (rows
/// mode, no seq_idx) of either layout, any strides, at most `max` elements. Consecutive threads
/// take consecutive channels (channel-last) or tokens (channel-first, `F_PE_TOKENS`). Grid: x =
/// groups of 2^lg along that dimension, y = groups of 128 >> lg along the other, z = batch rows
/// (hip/fwd_pt.hip).
fn fwd_pe_launch(p: &FwdPlan, layout: Layout, k: &KParams, max: i64) -> Option<Launch> {
    let inp = &p.inp;
    if k.flags & (F_SEQ_IDX | F_PACKED) != 0 {
        return None;
    }
    let n = inp.batch.saturating_mul(inp.dim).saturating_mul(inp.seqlen);
    if n > max || inp.dim > i32::MAX as i64 || inp.seqlen > i32::MAX as i64 {
        return None;
    }
    let tokens = layout == Layout::ChannelFirst;
    let (fast, slow) = if tokens { (inp.seqlen, inp.dim) } else { (inp.dim, inp.seqlen) };
    let lg = (fast.min(NT as i64) as u64).next_power_of_two().trailing_zeros() as i64;
    let (gx, gy) = (ceil_div(fast, 1 << lg), ceil_div(slow, NT as i64 >> lg));
    if gx > MAX_GRID_X || gy > MAX_GRID_Y || inp.batch > MAX_GRID_Y {
        return None;
    }
    let mut kp = *k;
    kp.rows_log2 = lg as i32;
    kp.n_blocks = gx * gy * inp.batch;
    if tokens {
        kp.flags |= F_PE_TOKENS;
    }
    let mut l = launch(format!("ccv1d_fwd_pe_{}_w{}", dt_name(inp.x.dtype), inp.width), kp.n_blocks, NT, &kp);
    l.grid = [gx as u32, gy as u32, inp.batch as u32];
    Some(l)
}

fn bwd_params(p: &BwdPlan) -> KParams {
    let inp = &p.inp;
    let mut k = conv_params(inp);
    set_view3(&mut k.dout, &mut k.dout_s, &p.dout);
    set_view3(&mut k.dx, &mut k.dx_s, &p.dx);
    k.dweight = p.dweight.addr as u64;
    k.dw_s = [p.dweight.stride[0], p.dweight.stride[1]];
    k.dw_dtype = p.dweight.dtype.code();
    if let Some(b) = &p.dbias {
        k.dbias = b.addr as u64;
        k.dbias_s = b.stride[0];
        k.db_dtype = b.dtype.code();
        k.flags |= F_DBIAS;
    }
    if let Some(s) = &p.dfinal_states {
        set_view3(&mut k.dfinal, &mut k.dfinal_s, s);
        k.flags |= F_DFINAL | F_STATES_ANY;
    }
    if let Some(s) = &p.dinitial_states {
        set_view3(&mut k.dinit, &mut k.dinit_s, s);
        k.flags |= F_DINIT | F_STATES_ANY;
    }
    k
}

/// Main backward geometry, or None when there is no token (no main kernel, no partials).
/// `small`: the small-problem kernels it may take (`bwd_pe_shape`, `bwd_pt_shape`).
fn bwd_geometry(p: &BwdPlan, dev: &DeviceInfo, small: SmallBwd) -> Result<Option<MainGeom>> {
    let inp = &p.inp;
    if inp.batch <= 0 || inp.dim <= 0 || inp.seqlen <= 0 {
        return Ok(None);
    }
    let layout = choose_layout(&inp.x, inp.dim, inp.seqlen);
    if let Some(pe) = bwd_pe_shape(p).filter(|_| small.pe) {
        // a channel's every batch row and token in one block: one partial row, stored directly
        let n = ceil_div(inp.dim, 1 << pe.c);
        return Ok(Some(MainGeom { layout, chunk: inp.seqlen, n_chunks: 1, n_ctiles: n, n_blocks: n, brows: inp.batch }));
    }
    if let Some(pt) = bwd_pt_shape(p, small, dev) {
        // a channel's every batch row in one block: one partial row, stored directly
        let n = ceil_div(inp.dim, pt.threads() as i64 >> pt.lg);
        return Ok(Some(MainGeom { layout, chunk: inp.seqlen, n_chunks: 1, n_ctiles: n, n_blocks: n, brows: inp.batch }));
    }
    if let Some(lc) = bwd_slab_channels_log2(p, dev) {
        let n = ceil_div(inp.dim, 1 << lc);
        return Ok(Some(MainGeom { layout, chunk: inp.seqlen, n_chunks: 1, n_ctiles: n, n_blocks: n, brows: inp.batch }));
    }
    if layout == Layout::ChannelLast && bwd_clw(p) {
        return bwd_clw_geometry(inp.batch, inp.dim, inp.seqlen, inp.width, dev).map(Some);
    }
    if layout == Layout::ChannelLast && bwd_streams(p) {
        let fit = cl_fit(true, inp.x.dtype, inp.width);
        return cl_stream_geometry(inp.batch, inp.dim, inp.seqlen, fit, dev).map(Some);
    }
    let mut g = main_geometry(layout, inp.x.dtype, inp.batch, inp.dim, inp.seqlen, dev)?;
    let warp = layout == Layout::ChannelFirst && bwd_warp_spans(p, dev);
    if warp {
        if inp.x.dtype != DType::F32 && knob(Knob::CfTiles).is_none() {
            g = bwd_cfw_chunks(p, g, dev);
        }
        g.brows = bwd_cfw_rows(p, &g, dev).0;
    } else if layout == Layout::ChannelFirst {
        let r = short_rows_log2(inp.batch * inp.dim, inp.seqlen, &g, inp.x.dtype);
        if r == 0 {
            let slots = dev.multiprocessors.max(1) as i64 * bwd_cf_blocks_per_sm(inp.width, false);
            let spans = ceil_div(g.chunk.min(inp.seqlen), tile_tokens(layout, inp.x.dtype));
            g.brows = cf_row_group(inp.batch, inp.dim, &g, spans, 1, slots, true);
        } else if inp.batch > 1 && inp.batch & (inp.batch - 1) == 0 && inp.batch <= 1 << r {
            // bwd_cfs: every batch row of a channel in one block (channel-major rows), so one
            // partial row, stored directly: no reduce launch (seeds' Small bf16: 2 launches -> 1)
            g.brows = inp.batch;
        }
    }
    if layout == Layout::ChannelFirst {
        g.n_blocks = ceil_div(inp.batch, g.brows).saturating_mul(inp.dim).saturating_mul(g.n_chunks);
    }
    Ok(Some(g))
}

/// Tiny channel-last problems on `ccv1d_bwd_slab_*` (bwd_slab.hip): one block per slab of 2^r
/// channels over every batch row and token, so dweight/dbias need no second launch. Simple rows
/// (rows mode, no seq_idx) with x, dout and dx on the vector path (D a multiple of the vector),
/// at most SLAB_ROWS batch rows; 2^r is the fewest channels (at least a vector's) that leave at
/// most one block per multiprocessor, and a block's slab is at most one 16-byte vector per
/// thread. Measured on the H100 (docs/perf.md, session 13; us, against the streaming kernel and
/// its reduce launch): seeds' Tiny 1x32x64 f32 / f16 / bf16 3.3 / 3.4 / 3.4 against 5.3 / 6.0 /
/// 5.9 (1-2 elements per thread); 003's Small 2x64x128 4.5 / 5.4 / 5.4 against 5.6 / 6.4 / 6.3,
/// with SiLU 4.6 / 5.7 / 5.7 against 6.3 / 7.0 / 7.0 (4 / 8 / 8 elements per thread). An earlier
/// version that took any layout and up to 4 vectors per thread lost elsewhere: 000's Small
/// 2x64x256 channel-last 6.1 / 8.2 / 8.3 against 5.8 / 6.5 / 6.5 (8 blocks walk the whole
/// problem), channel-first Tiny 4.0 against 3.9 on `bwd_cfs`, Small 4.3-4.4 against 3.4-3.7.
/// Returns r, or None for the other kernels.
fn bwd_slab_channels_log2(p: &BwdPlan, dev: &DeviceInfo) -> Option<i32> {
    let inp = &p.inp;
    let (b, d, l, k) = (inp.batch, inp.dim, inp.seqlen, inp.width - 1);
    let v = 16 / inp.x.dtype.size() as i64;
    let lay = Layout::ChannelLast;
    let simple = inp.seq_idx.is_none() && matches!(inp.seqs, Seqs::Rows);
    let vec = [&inp.x, &p.dout, &p.dx].iter().all(|t| vec_ok(t, lay, [b, d, l]));
    if choose_layout(&inp.x, d, l) != lay || !simple || !vec || d % v != 0 || b < 1 || b > SLAB_ROWS || l < 1 {
        return None;
    }
    let mut r = v.trailing_zeros() as i32;
    while ceil_div(d, 1 << r) > dev.multiprocessors.max(1) as i64 {
        r += 1;
    }
    let c = 1i64 << r;
    let fits = b.saturating_mul(l).saturating_mul(c) <= SLAB_VECS * NT_SLAB as i64 * v && b * (l + k) * c <= SLAB_ELEMS;
    fits.then_some(r)
}

/// `ccv1d_bwd_pe_*`'s block: 2^r threads a channel (2^rl >= L tokens of each of 2^(r - rl) >=
/// B batch rows) and 2^c channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PeShape {
    rl: i32,
    r: i32,
    c: i32,
}

/// The smallest backwards on `ccv1d_bwd_pe_*` (bwd_pt.hip: a token of a channel per thread, a
/// channel's every token in one block that stores its dweight/dbias, one launch): simple rows
/// (rows mode, no seq_idx) of either layout, any strides, B L padded to powers of two at most
/// NT_BWD_PE, at most `BWD_PE_MAX_ELEMS` elements; 2^c channels a block make it at least
/// BWD_PE_MIN_BLOCK threads. Measured on the H100 (docs/perf.md, session 21; µs, against the
/// kernels it replaces): seeds' Tiny 1x32x64 2.4-2.5 against 2.8-3.1 (`bwd_pt`, channel-first) and
/// 3.3-3.4 (`bwd_slab`, channel-last); Small 2x64x256 channel-first 2.9 against 3.4-3.7 (tiled),
/// channel-last 3.9-4.2 against 5.8-6.4 (two launches). `CCV1D_BWD_PE=0` turns it off.
fn bwd_pe_shape(p: &BwdPlan) -> Option<PeShape> {
    let inp = &p.inp;
    let (b, d, l) = (inp.batch, inp.dim, inp.seqlen);
    let simple = inp.seq_idx.is_none() && matches!(inp.seqs, Seqs::Rows);
    if knob(Knob::BwdPe) == Some(0) || !simple || b < 1 || l < 1 || d > i32::MAX as i64 {
        return None;
    }
    let log2 = |v: i64| (v as u64).next_power_of_two().trailing_zeros() as i32;
    let (rl, rb) = (log2(l), log2(b));
    let r = rl + rb;
    if (1i64 << r) > NT_BWD_PE || b.saturating_mul(d).saturating_mul(l) > BWD_PE_MAX_ELEMS {
        return None;
    }
    let c = (log2(BWD_PE_MIN_BLOCK) - r).max(0);
    Some(PeShape { rl, r, c })
}

/// Most elements (B D L) of a backward on `bwd_pe`: the seeds' Small (2x64x256), the largest
/// shape it was measured on.
const BWD_PE_MAX_ELEMS: i64 = 1 << 15;

/// Channel-first backwards on `ccv1d_bwd_pt_*` (bwd_pt.hip: 16-byte vectors of a channel's
/// tokens per thread, every load issued before the first wait, a channel's vectors in one block
/// that sums and stores its dweight/dbias, no reduce launch): simple rows (rows mode, no seq_idx),
/// x, dout and dx on the vector path, L a multiple of a thread's vectors. A thread takes one
/// vector up to 128 a channel (blocks of 128 threads), and up to 256 on narrow grids (one
/// channel a block of 256); else 2 (blocks of 128, or 256 past 256 vectors a channel), so a
/// channel fits up to 512 vectors. The default takes it up to BWD_PT_TOKENS tokens (B L) a
/// channel, BWD_PT_TOKENS_BF16 for bf16, at any width and grid (H100, docs/perf.md session 23;
/// µs, SiLU / none, against the other kernels):
/// - up to 2048 tokens, faster wherever measured but one row: 4x4096x512 f32 37.0 / 36.4 against
///   38.0 / 37.7, bf16 21.7 / 19.9 against 24.6 / 22.6; 8x2048x256 bf16 13.3 / 11.2 against 19.8
///   / 17.6; 4x64x512 f32 3.4 / 3.1 against 4.4 / 3.9 (the session 22 default); W = 2, 3, 5, 8 at
///   4x4096x512, 8x512x256 and 4x64x512 faster or within 0.2 µs. Slower: 4x1024x512 16-bit with
///   SiLU, 8.7-8.9 against 8.3-8.4 (without SiLU 7.3-7.5 against 7.9); 8x512x256 f16 with SiLU
///   takes 7.2 against session 22's 6.3 (2 vectors a thread then; one now, which bf16 preferred:
///   5.6 against 6.2).
/// - bf16 past 2048 (up to 4096: 512 vectors): 8x4096x384 35.2 / 30.5 against 71.4 / 62.7 (rows
///   shorter than a warp span), 1x5376x4096 50.7 / 46.5 against 53.8 / 50.8, 8x256x512 5.6 / 5.0
///   against 7.9 / 7.5; slower with SiLU on 1024 channels (8x1024x512 13.7 against 13.2). f16
///   there lost with SiLU (8x1024x512 14.9 against 13.3, 1x5376x4096 59.6 against 53.9: its 71
///   registers), so it stops at 2048.
/// `CCV1D_BWD_PT=N` (or `small.pt_tokens`) takes it up to N tokens instead (0: never).
fn bwd_pt_shape(p: &BwdPlan, small: SmallBwd, dev: &DeviceInfo) -> Option<PtShape> {
    let inp = &p.inp;
    let (b, d, l) = (inp.batch, inp.dim, inp.seqlen);
    let v = 16 / inp.x.dtype.size() as i64;
    let lay = Layout::ChannelFirst;
    let dims = [b, d, l];
    let simple = inp.seq_idx.is_none() && matches!(inp.seqs, Seqs::Rows);
    let vec = [&inp.x, &p.dout, &p.dx].iter().all(|t| vec_ok(t, lay, dims));
    let fits = small.pt
        && choose_layout(&inp.x, d, l) == lay
        && simple
        && vec
        && l % v == 0
        && b >= 1
        && l >= v
        && d <= i32::MAX as i64;
    if !fits {
        return None;
    }
    // one vector a thread up to 128 a channel, and up to 256 on a grid of at most
    // BWD_PT_ONE_VECTOR_BLOCKS_PER_SM blocks a multiprocessor (blocks of 256 threads); else 2
    // (blocks of 256 threads past 256 vectors a channel)
    let vectors = b.checked_mul(l / v)?;
    let few_blocks = d <= BWD_PT_ONE_VECTOR_BLOCKS_PER_SM * dev.multiprocessors as i64;
    let one = vectors <= NT_BWD_PT_MIN as i64 || (vectors <= NT_BWD_PT as i64 && few_blocks);
    let vl = if one { 0 } else { 1 };
    if vectors > (NT_BWD_PT as i64) << vl || (l / v) % (1 << vl) != 0 {
        return None;
    }
    let lg = (ceil_div(vectors, 1 << vl) as u64).next_power_of_two().trailing_zeros() as i32;
    let tokens = b * l;
    let default = if inp.x.dtype == DType::BF16 { BWD_PT_TOKENS_BF16 } else { BWD_PT_TOKENS };
    (tokens <= small.pt_tokens.or(knob(Knob::BwdPt)).unwrap_or(default)).then_some(PtShape { lg, vl })
}

/// `bwd_pt`'s grids of one vector a thread past 128 vectors a channel: the most blocks a
/// multiprocessor.
const BWD_PT_ONE_VECTOR_BLOCKS_PER_SM: i64 = 4;

/// Tokens of one warp span of `ccv1d_{fwd,bwd}_cfw_*`: CF_ITEMS 16-byte vectors per lane.
fn warp_span_tokens(dt: DType, dev: &DeviceInfo) -> i64 {
    dev.warp_size.max(1) as i64 * (16 / dt.size() as i64) * CF_ITEMS
}

/// Channel-first forward / backward on `ccv1d_{fwd,bwd}_cfw_*` (warp spans: no shared memory, no
/// barriers; fwd_cf.hip, bwd_cf.hip): simple rows (rows mode, no seq_idx), every row tensor
/// (`views`) on the vector path, L a multiple of the 16-byte vector, rows of at least one warp
/// span (a row's last span is moved back to end at L; shorter rows go to the `cfs` kernels), and
/// `faster`: where it was measured faster than the tile kernels on the H100 (docs/perf.md,
/// session 8). `CCV1D_CF_WARP=0` / `1` turns it off / on wherever it can run (tuning and tests).
fn cf_warp_spans(inp: &ConvInputs, views: &[&View], faster: bool, dev: &DeviceInfo) -> bool {
    let dt = inp.x.dtype;
    let dims = [inp.batch, inp.dim, inp.seqlen];
    let allowed = inp.seq_idx.is_none()
        && matches!(inp.seqs, Seqs::Rows)
        && inp.seqlen % (16 / dt.size() as i64) == 0
        && inp.seqlen >= warp_span_tokens(dt, dev)
        && views.iter().all(|v| vec_ok(v, Layout::ChannelFirst, dims));
    match knob(Knob::CfWarp) {
        Some(v) => allowed && v == 1,
        None => allowed && faster,
    }
}

/// The backward on `ccv1d_bwd_cfw_*`, every width (bf16 4x5376x4096 W=4 220.9 -> 189.2 us, W=6
/// 230.6 -> 220.7, 8x2048x1024 64.1 -> 40.0; W=7 / 8 since session 9's span halos by shuffles:
/// 206.7 / 225.9 against 251.2 / 269.1 on `bwd_cf`, f32 364.0 / 364.1 against 385.0 / 411.7).
fn bwd_warp_spans(p: &BwdPlan, dev: &DeviceInfo) -> bool {
    cf_warp_spans(&p.inp, &[&p.inp.x, &p.dout, &p.dx], true, dev)
}

/// `bwd_cfw`'s 16-bit chunks: `main_geometry`'s tiles a block (sized for 16 blocks a
/// multiprocessor, twice what `bwd_cfw` holds) or more, up to a whole row: the fewest
/// wave-quantized block steps (steps + 1 a block, as `cf_row_group` counts them, with its row
/// groups); a tie keeps `main_geometry`'s. H100 (docs/perf.md, session 28; SiLU, µs, its chunks /
/// whole rows): bf16 4x256x4096 15.5 / 14.7-14.9 (1024 blocks, a wave, against 2048), f16 15.5
/// / 14.8-14.9, 4x512x4096 25.5 / 23.8 (2 rows a block), 2x256x4096 10.3-10.4 / 10.9 (kept: 512
/// blocks of whole rows are half a wave). f32 keeps `main_geometry`'s: 4x256x4096 23.1 against
/// 23.4 in 2 tiles and 23.1-23.2 in 4 (whole rows).
fn bwd_cfw_chunks(p: &BwdPlan, g: MainGeom, dev: &DeviceInfo) -> MainGeom {
    let inp = &p.inp;
    let tile = tile_tokens(Layout::ChannelFirst, inp.x.dtype);
    let slots = dev.multiprocessors.max(1) as i64 * bwd_cf_blocks_per_sm(inp.width, true);
    let per_step = NT as i64 / dev.warp_size.max(1) as i64;
    let cost = |g: &MainGeom| {
        let spans = ceil_div(g.chunk.min(inp.seqlen), warp_span_tokens(inp.x.dtype, dev));
        let rows = cf_row_group(inp.batch, inp.dim, g, spans, per_step, slots, true);
        cf_block_cost(inp.batch, inp.dim, g.n_chunks, rows, spans, per_step, slots)
    };
    let mut best = (cost(&g), g);
    for tiles in g.chunk / tile + 1..=ceil_div(inp.seqlen, tile).min(MAX_TILES_PER_BLOCK) {
        let n_chunks = ceil_div(inp.seqlen, tiles * tile);
        let c = MainGeom { chunk: tiles * tile, n_chunks, n_blocks: inp.batch.saturating_mul(inp.dim).saturating_mul(n_chunks), ..g };
        let k = cost(&c);
        if k < best.0 {
            best = (k, c);
        }
    }
    best.1
}

/// Resident blocks per multiprocessor of `ccv1d_bwd_cfw7_*` (its launch bound in instances.h).
const CFW7_BLOCKS_PER_SM: i64 = 7;

/// A `bwd_cfw` call's batch rows a block (`cf_row_group` over its warp spans) and whether it runs
/// as `ccv1d_bwd_cfw7_*`: at W <= 4 (NVIDIA), the same kernel at 7 resident blocks (72
/// registers) instead of 8 (64), where the grid's last wave is fuller at 7 blocks a
/// multiprocessor than at 8 and the grid is at least a wave at 8, each grid with its own row
/// groups. Measured on the
/// H100 (docs/perf.md, session 24; µs, `CCV1D_CFW7=0` / default): 4x5376x4096 (16-bit: 5376
/// blocks, 5.09 / 5.82 waves) bf16 SiLU 188.0 / 185.8, f16 188.3 / 185.1, without activation
/// 183.5 / 181.2, W = 2 185.3 / 181.4, W = 3 187.1 / 183.1; f32 (2 rows a block at 8 blocks, 4 at
/// 7) SiLU 361.0 / 360.2, without activation 360.8 / 360.5, 2x5376x4096 184.7 / 181.6,
/// 1x5376x4096 95.3 / 94.4. Kernel images at 7 blocks on 2048-block grids (1.94 / 2.22 waves):
/// 8x2048x1024 bf16 39.5 -> 41.4 and f32 74.0 -> 75.9, 4x256x4096 bf16 15.8 -> 16.6 and f32 23.1
/// -> 23.6, so those keep 8. With SiLU at 16-bit W = 4 it takes silu_grad_fast (hip/bwd_cf.hip).
/// `CCV1D_CFW7=0 / 1`: never / wherever it can run.
fn bwd_cfw_rows(p: &BwdPlan, g: &MainGeom, dev: &DeviceInfo) -> (i64, bool) {
    let inp = &p.inp;
    let spans = ceil_div(g.chunk.min(inp.seqlen), warp_span_tokens(inp.x.dtype, dev));
    let per_step = NT as i64 / dev.warp_size.max(1) as i64;
    // (rows a block, blocks, idle fraction of the last wave, slots) at `per_sm` blocks a
    // multiprocessor
    let grid = |per_sm: i64| {
        let slots = dev.multiprocessors.max(1) as i64 * per_sm;
        let rows = cf_row_group(inp.batch, inp.dim, g, spans, per_step, slots, true);
        let n = ceil_div(inp.batch, rows).saturating_mul(inp.dim).saturating_mul(g.n_chunks);
        (rows, n, ceil_div(n, slots) as f64 - n as f64 / slots as f64, slots)
    };
    let (rows8, n8, idle8, slots8) = grid(bwd_cf_blocks_per_sm(inp.width, inp.x.dtype != DType::F32));
    if inp.width <= 4 && dev.vendor == Vendor::Nvidia && knob(Knob::Cfw7) != Some(0) {
        let (rows7, _, idle7, _) = grid(CFW7_BLOCKS_PER_SM);
        if knob(Knob::Cfw7) == Some(1) || (n8 >= slots8 && idle7 < idle8) {
            return (rows7, true);
        }
    }
    (rows8, false)
}

/// The forward on `ccv1d_fwd_cfw_*`: 16-bit only, at W >= 6 (bf16 4x5376x4096 W=8 130.8 ->
/// 126.4 us) and on rows of at most half a tile in problems of 2^22 elements and up
/// (8x2048x1024 28.4 -> 26.3, 4x4096x512 15.8 -> 14.8). Elsewhere the tile kernel was as fast or
/// faster (f32 4x5376x4096 242.1 against 244.8; bf16 W=4 121.7 against 123.0; 4x256x512 3.2
/// against 3.5).
fn fwd_warp_spans(p: &FwdPlan, dev: &DeviceInfo) -> bool {
    let inp = &p.inp;
    let short = inp.seqlen * 2 <= tile_tokens(Layout::ChannelFirst, inp.x.dtype);
    let big = inp.batch.saturating_mul(inp.dim).saturating_mul(inp.seqlen) >= 1 << 22;
    let faster = inp.x.dtype != DType::F32 && (inp.width >= 6 || (short && big));
    cf_warp_spans(inp, &[&inp.x, &p.out], faster, dev)
}

/// Channel-last backward on the streaming kernel `ccv1d_bwd_cls_*` (simple rows: no seq_idx, no
/// cu_seqlens; x, dout and dx on the vector path with whole 4-channel groups), else `bwd_cl`.
fn bwd_streams(p: &BwdPlan) -> bool {
    let inp = &p.inp;
    let dims = [inp.batch, inp.dim, inp.seqlen];
    let lay = Layout::ChannelLast;
    inp.seq_idx.is_none()
        && matches!(inp.seqs, Seqs::Rows)
        && inp.dim % 4 == 0
        && vec_ok(&inp.x, lay, dims)
        && vec_ok(&p.dout, lay, dims)
        && vec_ok(&p.dx, lay, dims)
}

/// Resident `fwd_clw` blocks per multiprocessor: its launch bound (`CCV_FWD_CLW_BLOCKS`).
const FWD_CLW_BLOCKS_PER_SM: i64 = 8;
/// `fwd_clw`'s tokens per block on grids of at least two waves (`fwd_clw_geometry`).
const FWD_CLW_CHUNK: i64 = 256;

/// The channel-last forward on `ccv1d_fwd_clw_*` (per-warp rings of 16-byte copies, two channels
/// a thread, 8 blocks per SM) instead of `fwd_cl` (four channels a thread, register prefetch or
/// burst loads): simple rows (no seq_idx, no cu_seqlens), x and out on the vector path (the
/// caller's `vec`), D a multiple of the 16-byte vector, L below 2^30 (32-bit token indices), and
/// where it was measured faster: 16-bit x at W >= 5, where `fwd_cl`'s four-channel windows leave
/// its prefetch walk short of registers (H100, docs/perf.md, session 18; bf16 4x5376x4096 SiLU,
/// µs, `fwd_cl` against it: W = 5 137.1 / 130.2, W = 6 138.6 / 131.9, W = 7 145.0 / 133.6, W = 8
/// 151.9 / 135.1). At W = 4 `fwd_cl`'s burst walk stays (124.1 against 128.5), and f32 keeps
/// `fwd_cl` (W = 4 233.4 against 247.7, W = 8 255.8 / 256.3). `CCV1D_CL_FWD=0` / `1`: never /
/// wherever it can run.
fn fwd_clw(p: &FwdPlan) -> bool {
    let inp = &p.inp;
    let allowed = inp.seq_idx.is_none()
        && matches!(inp.seqs, Seqs::Rows)
        && inp.dim % (16 / inp.x.dtype.size() as i64) == 0
        && inp.seqlen <= (i32::MAX / 2) as i64;
    match knob(Knob::ClFwd) {
        Some(v) => allowed && v == 1,
        None => allowed && inp.x.dtype != DType::F32 && inp.width >= 5,
    }
}

/// Resident `bwd_clw` blocks per multiprocessor: its launch bound (`CCV_CLW_BLOCKS`), and from
/// W = CLW_WIDE on `CCV_CLW_BLOCKS_WIDE` (instances.h: 128 registers instead of 96, which spilled
/// at W >= 6).
const CLW_BLOCKS_PER_SM: i64 = 5;
const CLW_BLOCKS_PER_SM_WIDE: i64 = 4;
const CLW_WIDE: i64 = 6;

fn clw_blocks_per_sm(width: i64) -> i64 {
    if width >= CLW_WIDE { CLW_BLOCKS_PER_SM_WIDE } else { CLW_BLOCKS_PER_SM }
}

/// The streaming channel-last backward on `ccv1d_bwd_clw_*` (per-warp rings of 16-byte copies,
/// two channels a thread, 4-5 blocks per SM) instead of `bwd_cls` (four channels a thread at W <=
/// 4, 3-5 blocks per SM): D a multiple of the 16-byte vector (whole vectors per copy), L below
/// 2^30 (32-bit token indices, chunk starts included), and where it was measured faster: 16-bit x
/// at W >= 2. H100, bf16 SiLU, µs, `bwd_cls` against it: session 17 at W = 3-5 (4x5376x4096 W = 4
/// 211.7 / 209.6, 4x256x4096 20.5 / 18.7, 4x4096x512 27.5 / 27.0, 8x2048x1024 45.3 / 45.5);
/// session 26, once a block's start took one round trip (docs/perf.md): W = 2 195.9 / 192.7
/// (8x5376x256 34.2 / 31.7, 4x4096x512 24.0 / 23.4, 1x5376x4096 52.9 / 53.3), W = 6-8 on 4 blocks
/// a SM 219.0 / 203.5, 222.4 / 207.7, 231.0 / 215.3 (W = 6 4x4096x512 29.7 / 25.5, 8x2048x1024
/// 50.4 / 43.8). f32 (375 / 383 at W = 4) and W = 1 keep `bwd_cls`. `CCV1D_CL_BWD=0` / `1`: never
/// / wherever it can run.
fn bwd_clw(p: &BwdPlan) -> bool {
    let inp = &p.inp;
    let allowed = bwd_streams(p) && inp.dim % (16 / inp.x.dtype.size() as i64) == 0 && inp.seqlen <= (i32::MAX / 2) as i64;
    match knob(Knob::ClBwd) {
        Some(v) => allowed && v == 1,
        None => allowed && inp.x.dtype != DType::F32 && inp.width >= 2,
    }
}

/// `bwd_clw`'s chunks: `cl_stream_geometry`'s (wave-quantized at its blocks per SM), or chunks of
/// CLW_CHUNK tokens (64 a warp) wherever rows are that long and those make at least two waves:
/// with two 16-byte copies a step the deep ring's walks want 64 tokens a warp (H100, docs/perf.md
/// session 25; bf16 SiLU W = 4, µs, the stream geometry's chunks / 256): 4x5376x4096 (320) 202.8
/// / 201.6, 8x5376x512 (128) 66.0 / 61.8, 4x5376x1024 (128) 65.8 / 61.9, 4x5376x2048 (192) 109.4
/// / 108.7, 1x5376x4096 (640, 0.9 waves) 62.0 / 61.7, 2x5376x4096 (384) 108.7 / 108.9,
/// 8x2048x2048 (448) 85.3 / 86.1. From W = CLW_LONG_W on, chunks of CLW_CHUNK_LONG instead: a
/// warp's walk recomputes K = W - 1 tokens past its end, 11 % more tokens at W = 8 on 64-token
/// walks (session 26, 4 blocks a SM, µs, 256 / 512: W = 7 4x5376x4096 214.2 / 207.7, W = 8 235.8
/// / 215.3, 2x5376x4096 126.1 / 116.5; W = 6 203.5 / 204.9). Under two waves the stream
/// geometry's one wave wins (W = 7 / 8, µs, 512 / the stream geometry's 704: 1x5376x4096 68.5 /
/// 57.8, 66.8 / 60.0; at 8x5376x512 W = 8 lost, 66.7 against its 256: 71.4). Knobs set the
/// chunk instead.
fn bwd_clw_geometry(batch: i64, dim: i64, seqlen: i64, width: i64, dev: &DeviceInfo) -> Result<MainGeom> {
    let fit = ClFit { blocks_per_sm: clw_blocks_per_sm(width), one_wave: None };
    let mut g = cl_stream_geometry(batch, dim, seqlen, fit, dev)?;
    let chunk = if width >= CLW_LONG_W { CLW_CHUNK_LONG } else { CLW_CHUNK };
    let n_chunks = ceil_div(seqlen, chunk);
    let n_blocks = batch.saturating_mul(g.n_ctiles).saturating_mul(n_chunks);
    let tuned = knob(Knob::ClChunk).is_some() || knob(Knob::ClTiles).is_some();
    if !tuned && seqlen >= chunk && n_blocks >= 2 * clw_wave(dev, width) && n_blocks <= MAX_BLOCKS {
        (g.chunk, g.n_chunks, g.n_blocks) = (chunk, n_chunks, n_blocks);
    }
    Ok(g)
}

/// `bwd_clw_geometry`'s chunks where the grid allows them: below CLW_LONG_W, and from it on.
const CLW_CHUNK: i64 = 256;
const CLW_CHUNK_LONG: i64 = 512;
const CLW_LONG_W: i64 = 7;

/// Blocks of one wave of `bwd_clw` at this width.
fn clw_wave(dev: &DeviceInfo, width: i64) -> i64 {
    dev.multiprocessors.max(1) as i64 * clw_blocks_per_sm(width)
}

/// `bwd_clw`'s ring slots in use (its steps in flight + 1; at most CLW_RING): 2 on grids under
/// two waves, where every block starts at once and a deeper ring's first requests only queue; on
/// more, 4 where each of a block's 4 warps walks at least 64 tokens, else 3. H100 (docs/perf.md,
/// session 25; images with a fixed ring, on the stream geometry's chunks, bf16 SiLU W = 4, µs,
/// 2 / 3 / 4 slots; one copy a step and 4 slots before this session): 4x5376x4096 (6.6 waves, 80 tokens a warp) 208.0 / 204.3 /
/// 203.7 (206.6); 16x5376x512 (4.1, 64) 113.9 / 109.6 / 109.2 (111.4); 8x5376x256 (2.0, 32) 37.8
/// / 37.7 / 38.6 (37.1); 1x5376x4096 (0.9) 60.9 / 64.3 / 65.6 (63.1); 4x256x4096 (0.8) 17.6 /
/// 19.2 / 20.4 (17.5); 8x2048x1024 (0.8) 43.9 / 44.8 / 45.8 (44.2).
fn clw_ring(g: &MainGeom, width: i64, dev: &DeviceInfo) -> i32 {
    let warp_tokens = g.chunk / (NT as i64 / 32);
    match (g.n_blocks >= 2 * clw_wave(dev, width), warp_tokens >= 64) {
        (false, _) => 2,
        (true, true) => CLW_RING,
        (true, false) => 3,
    }
}

/// `bwd_clw`'s most ring slots (`CCV_CLW_RING`).
const CLW_RING: i32 = 4;

/// Rows of fp32 partials in the workspace: one per (group of brows batch rows, chunk).
fn bwd_partials(p: &BwdPlan, g: &Option<MainGeom>) -> i64 {
    g.map(|g| ceil_div(p.inp.batch, g.brows) * g.n_chunks).unwrap_or(0)
}

/// One partial row (batch 1 or every batch row in one `bwd_cf` block, one chunk): the main kernel
/// stores dweight/dbias itself (`CCV_F_DIRECT`), with no workspace and no reduce launch (a launch
/// is ~2 µs of a small call).
fn bwd_direct(n_partials: i64) -> bool {
    n_partials == 1
}

/// Lanes per output of `ccv1d_bwd_reduce` (its block = 32 outputs x lanes): about 8 partial rows
/// per lane (one batch of loads), 4 to 32 lanes. A function of n_partials alone (and of the
/// `CCV1D_REDUCE_ROWS` tuning knob), so the summation order is too. H100 (docs/perf.md, session
/// 25; µs, SiLU, 4 rows a lane / 8): 4x5376x4096 bf16 channel-last 206.8 / 205.7, 4x256x4096 17.5
/// / 17.1, 4x64x256 f32 7.5 / 7.1, 8x2048x1024 bf16 44.2 / 44.3; the others within 0.1.
fn reduce_lanes(n_partials: i64) -> u32 {
    let rows = knob(Knob::ReduceRows).unwrap_or(8);
    (ceil_div(n_partials.max(1), rows) as u64).next_power_of_two().clamp(4, NT_REDUCE as u64 / 32) as u32
}

/// Workspace bytes `bwd_launches` needs: fp32 partials `[batch * n_chunks, dim, width + 1]`.
/// 0 when there is nothing to reduce or a single partial row (stored directly). Same (plan, device) → same size and the same summation
/// order, so dweight/dbias are bitwise reproducible.
pub fn bwd_workspace_bytes(p: &BwdPlan, dev: &DeviceInfo) -> usize {
    bwd_workspace_bytes_pt(p, dev, SmallBwd::ALL)
}

/// `bwd_workspace_bytes` with the small-problem kernels allowed or not (tests run both).
pub fn bwd_workspace_bytes_pt(p: &BwdPlan, dev: &DeviceInfo, small: SmallBwd) -> usize {
    match bwd_geometry(p, dev, small) {
        Ok(g) => {
            let n = bwd_partials(p, &g);
            if bwd_direct(n) {
                return 0;
            }
            (n.max(0) as usize)
                .saturating_mul(p.inp.dim.max(0) as usize)
                .saturating_mul(p.inp.width.max(0) as usize + 1)
                .saturating_mul(4)
        }
        Err(_) => 0, // bwd_launches reports the error
    }
}

/// Launches of a backward call, in order: main (dx + partials) → reduce (dweight/dbias) →
/// states (dinitial_states). `workspace`: device address of at least `bwd_workspace_bytes`
/// bytes, 256-byte aligned; its content is never assumed (every partial slot is written before
/// it is read).
pub fn bwd_launches(p: &BwdPlan, dev: &DeviceInfo, workspace: usize) -> Result<Vec<Launch>> {
    bwd_launches_pt(p, dev, workspace, SmallBwd::ALL)
}

/// `bwd_launches` with the small-problem kernels allowed or not (tests give the other kernels
/// small problems too).
pub fn bwd_launches_pt(p: &BwdPlan, dev: &DeviceInfo, workspace: usize, small: SmallBwd) -> Result<Vec<Launch>> {
    let inp = &p.inp;
    check_width(inp.width)?;
    let mut k = bwd_params(p);
    let mut v = Vec::new();
    if inp.dim <= 0 {
        return Ok(v);
    }
    let dt = inp.x.dtype;
    let g = bwd_geometry(p, dev, small)?;
    let n_partials = bwd_partials(p, &g);
    let mut overlap = false;  // the reduce launch overlaps the main kernel's end
    let direct = bwd_direct(n_partials);
    if n_partials > 0 && !direct && workspace == 0 {
        bail!(CCV1D_ERR_WORKSPACE, "backward needs a workspace of {} bytes", bwd_workspace_bytes_pt(p, dev, small));
    }
    k.ws = if direct { 0 } else { workspace as u64 };
    k.n_partials = n_partials;
    if direct {
        k.flags |= F_DIRECT;
    }
    if let Some(g) = &g {
        let dims = [inp.batch, inp.dim, inp.seqlen];
        let vec = vec_ok(&inp.x, g.layout, dims) && vec_ok(&p.dout, g.layout, dims) && vec_ok(&p.dx, g.layout, dims);
        let mut km = main_params(&k, g, vec);
        let pe = bwd_pe_shape(p).filter(|_| small.pe);
        let (family, threads) = if let Some(pe) = pe {
            km.rows_log2 = pe.rl;
            km.brows = pe.r;
            if g.layout == Layout::ChannelFirst {
                km.flags |= F_PE_TOKENS;
            }
            ("pe", 1u32 << (pe.c + pe.r))
        } else if let Some(pt) = bwd_pt_shape(p, small, dev) {
            km.rows_log2 = pt.lg;
            km.brows = pt.vl;
            ("pt", pt.threads())
        } else if let Some(lc) = bwd_slab_channels_log2(p, dev) {
            km.rows_log2 = lc;
            ("slab", NT_SLAB)
        } else if g.layout == Layout::ChannelFirst && bwd_warp_spans(p, dev) {
            (if bwd_cfw_rows(p, g, dev).1 { "cfw7" } else { "cfw" }, NT)
        } else if split_short_rows(&mut km, inp, g) {
            ("cfs", NT)
        } else if g.layout == Layout::ChannelLast && bwd_clw(p) {
            km.rows_log2 = clw_ring(g, inp.width, dev);
            ("clw", NT)
        } else if g.layout == Layout::ChannelLast && bwd_streams(p) {
            ("cls", NT)
        } else {
            (g.layout.tag(), NT)
        };
        v.push(launch(format!("ccv1d_bwd_{family}_{}_w{}", dt_name(dt), inp.width), km.n_blocks, threads, &km));
        overlap = matches!(family, "cl" | "cls" | "clw") && overlap_launches(dev);
    }
    // dweight/dbias are always written (zeros when there is no token): by the main kernel when
    // direct, else by the reduce kernel.
    if !direct {
        let nred = inp.dim * (inp.width + 1);
        if nred > MAX_BLOCKS {
            bail!(CCV1D_ERR_OVERFLOW, "dim too large");
        }
        // bwd_reduce indexes rows in 32 bits, a batch of loads past the last row included
        if n_partials > i32::MAX as i64 - 1024 {
            bail!(CCV1D_ERR_OVERFLOW, "too many partial rows ({n_partials}) for one reduce launch");
        }
        let mut kr = k;
        kr.n_blocks = ceil_div(nred, 32);
        let mut l = launch("ccv1d_bwd_reduce".to_string(), kr.n_blocks, 32 * reduce_lanes(n_partials), &kr);
        l.overlap_previous = overlap;
        v.push(l);
    }
    if p.dinitial_states.is_some() && inp.batch > 0 {
        v.extend(states_launch(format!("ccv1d_bwd_states_{}", dt_name(dt)), &k));
    }
    Ok(v)
}

/// Whether a launch that waits for the kernel before it (`Launch::overlap_previous`) may start
/// before that kernel ends: NVIDIA sm_90+ (hip/compat.h: `griddepcontrol`). The backward's reduce
/// launch does after the channel-last kernels (`bwd_cl`, `bwd_cls`, `bwd_clw`, which release it
/// at their start), so its blocks are resident when the main kernel's last blocks finish instead
/// of being launched then. H100 (docs/perf.md, session 28; SiLU, µs, plain / overlapped): bf16
/// 4x256x4096 15.1-15.2 / 14.8, f32 24.1-24.2 / 23.8, 8x2048x1024 bf16 42.6-42.9 / 42.1-42.2,
/// f32 76.7-76.8 / 76.2, 4x5376x4096 bf16 199.9-200.2 / 199.6, 4x64x512 bf16 6.2 / 5.9, f32 7.1 /
/// 6.8; 4x4096x512 bf16 24.3-24.4 / 24.7 (kept for one rule). After `bwd_cfw` it lost (bf16
/// 4x256x4096 14.8-14.9 / 15.7, f32 23.1 / 23.8; cause not found), so the channel-first kernels
/// neither release nor overlap. `CCV1D_OVERLAP=0` turns it off (tuning and tests).
fn overlap_launches(dev: &DeviceInfo) -> bool {
    dev.vendor == Vendor::Nvidia && dev.arch >= 90 && knob(Knob::Overlap) != Some(0)
}

/// Launches of a decode update (one kernel).
pub fn update_launches(p: &UpdatePlan, dev: &DeviceInfo) -> Result<Vec<Launch>> {
    check_width(p.width)?;
    let mut v = Vec::new();
    if p.batch <= 0 || p.dim <= 0 || p.seqlen <= 0 {
        return Ok(v);
    }
    if p.dim > i32::MAX as i64 || p.batch > i32::MAX as i64 {
        bail!(CCV1D_ERR_OVERFLOW, "GPU kernels take batch and dim below 2^31");
    }
    let mut k = KParams::default();
    set_view3(&mut k.x, &mut k.x_s, &p.x);
    set_view3(&mut k.out, &mut k.out_s, &p.out);
    set_view3(&mut k.conv_state, &mut k.cs_s, &p.conv_state);
    k.weight = p.weight.addr as u64;
    k.w_s = [p.weight.stride[0], p.weight.stride[1]];
    k.w_dtype = p.weight.dtype.code();
    k.b_dtype = DT_F32;
    k.dw_dtype = DT_F32;
    k.db_dtype = DT_F32;
    k.hi_bytes = 4;
    let mut f = F_STATES_ANY;
    if let Some(b) = &p.bias {
        k.bias = b.addr as u64;
        k.bias_s = b.stride[0];
        k.b_dtype = b.dtype.code();
        f |= F_BIAS;
    }
    if p.act == Act::Silu {
        f |= F_SILU;
    }
    if let Some(c) = &p.cache_seqlens {
        k.cache_seqlens = c.addr as u64;
        k.csl_s = c.stride[0];
        f |= F_CACHE_SEQLENS;
    }
    if let Some(c) = &p.conv_state_indices {
        k.state_idx = c.addr as u64;
        k.si_s = c.stride[0];
        f |= F_STATE_IDX;
    }
    k.flags = f;
    k.batch = p.batch;
    k.dim = p.dim;
    k.seqlen = p.seqlen;
    k.num_seqs = p.batch;
    k.num_slots = p.num_slots;
    k.state_len = p.state_len;
    k.width = p.width as i32;
    k.n_ctiles = ceil_div(p.dim, NT as i64);
    let wave = (dev.multiprocessors.max(1) as i64) * BLOCKS_PER_SM;
    // Register step for 16-bit x on grids past a wave of one-row `update` blocks (H100, B = 256,
    // D = 5376, bf16: 12.0 µs against the staged step's 16.8; for f32 the staged step was faster,
    // 21.9 against 24.4 µs, and at B = 1 both lose to `update`: 2.9-3.2 against 2.3-2.6 µs).
    let big_grid = p.batch.saturating_mul(k.n_ctiles) > wave / 2;
    let family = if let Some(pm) = stepv_fits(p).filter(|_| big_grid && p.x.dtype != DType::F32) {
        // The decode step in registers: thread = (4 channels, `chunk` batch rows), weights loaded
        // once per thread; rows enough to bring the grid back to about one wave of blocks.
        k.n_ctiles = ceil_div(p.dim / 4, NT as i64);
        k.chunk = knob(Knob::StepRows).unwrap_or_else(|| ceil_div(p.batch.saturating_mul(k.n_ctiles), wave)).clamp(1, UPD_ROWS);
        if pm {
            k.flags |= F_STEP_PM;
        }
        // Weights as whole contiguous rows and a contiguous bias: each thread's 4 channels in
        // vector loads (the checks here, not in each thread before its loads go out).
        let aligned4 = |v: &View| v.addr % (4 * v.dtype.size()) == 0;
        let w_rows = p.weight.stride[1] == 1 && p.weight.stride[0] == p.width && aligned4(&p.weight);
        if w_rows && p.bias.as_ref().map_or(true, |b| b.stride[0] == 1 && aligned4(b)) {
            k.flags |= F_W_ROWS;
        }
        // A 2-D grid, (channel tiles, row blocks) exactly: the kernel takes both from blockIdx
        // without dividing (stepv_fits keeps the tiles and the row blocks in range).
        let row_blocks = ceil_div(p.batch, k.chunk);
        k.n_blocks = row_blocks * k.n_ctiles;
        let mut l = launch(format!("ccv1d_stepv_{}_w{}", dt_name(p.x.dtype), p.width), k.n_blocks, NT, &k);
        l.grid = [k.n_ctiles as u32, row_blocks as u32, 1];
        v.push(l);
        return Ok(v);
    } else if let Some((rows, pm)) = staged_rows(p, wave / 2) {
        // The staged decode step: `chunk` batch rows per block, all loaded before any store.
        k.chunk = rows;
        let es = p.conv_state.dtype.size() as i64;
        let s = p.conv_state.stride;
        let run_aligned = !pm || p.state_len == 1 || s[2].wrapping_mul(es) % 16 == 0;
        if p.conv_state.addr % 16 == 0 && s[0].wrapping_mul(es) % 16 == 0 && run_aligned {
            k.flags |= F_VEC;
        }
        if pm {
            k.flags |= F_STEP_PM;
        }
        "step"
    } else {
        // Batch rows per thread (`chunk`): 1 while the grid is at most about one wave of blocks,
        // else enough rows to bring it back to one wave (weights loaded once per thread), at most 8.
        k.chunk = (p.batch.saturating_mul(k.n_ctiles) / wave).clamp(1, 8);
        "update"
    };
    k.n_blocks = ceil_div(p.batch, k.chunk).saturating_mul(k.n_ctiles);
    if k.n_blocks > MAX_BLOCKS {
        bail!(CCV1D_ERR_OVERFLOW, "problem too large for one launch");
    }
    v.push(launch(format!("ccv1d_{family}_{}_w{}", dt_name(p.x.dtype), p.width), k.n_blocks, NT, &k));
    Ok(v)
}

/// Batch rows per block of the staged decode step (`ccv1d_step_*`, hip/misc.hip) and whether
/// its slots are position-major, or None when the call needs the general kernel: more than one
/// new token, a circular buffer, or a slot that is neither a contiguous `[dim, state_len]`
/// block (channel-major) nor `state_len` runs of `dim` contiguous channels (position-major).
/// Also None while one-row blocks would fit in `resident` blocks (about what stays resident at
/// the kernel's occupancy): there the general kernel is faster (H100, B = 1, D = 5376: 2.3 µs
/// against 3.2). Rows: enough that the grid is at most `resident` blocks, at most what `UPD_SMEM`
/// holds and `UPD_ROWS`; `CCV1D_STEP_ROWS` overrides the first part (a tuning knob for
/// `ccv1d bench`).
fn staged_rows(p: &UpdatePlan, resident: i64) -> Option<(i64, bool)> {
    let sl = p.state_len;
    let position_major = one_token_slots(p)?;
    let row_bytes = (NT as i64).checked_mul(sl)?.checked_mul(p.conv_state.dtype.size() as i64)?;
    let fit = UPD_SMEM / row_bytes;
    if fit < 1 {
        return None;
    }
    let tiles = ceil_div(p.dim, NT as i64);
    if p.batch.saturating_mul(tiles) <= resident {
        return None;
    }
    let groups = (resident / tiles).max(1);
    let rows = knob(Knob::StepRows).unwrap_or_else(|| ceil_div(p.batch, groups));
    Some((rows.clamp(1, fit.min(UPD_ROWS)), position_major))
}

/// For a one-token update without cache_seqlens whose slots are contiguous: whether they are
/// position-major (`[state_len, D]` per slot, channels contiguous) rather than channel-major
/// (`[D, state_len]`); None for any other call.
fn one_token_slots(p: &UpdatePlan) -> Option<bool> {
    let sl = p.state_len;
    let s = &p.conv_state.stride;
    let channel_major = s[2] == 1 && (s[1] == sl || p.dim == 1);
    let position_major = !channel_major && s[1] == 1 && (sl == 1 || s[2] >= p.dim);
    let ok = p.seqlen == 1 && p.cache_seqlens.is_none() && (channel_major || position_major) && sl >= (p.width - 1).max(1);
    ok.then_some(position_major)
}

/// Whether the register decode step (`ccv1d_stepv_*`) takes the call, and with position-major
/// slots: a one-token update with contiguous slots, width >= 2, state_len W-1 or W (its shift is
/// unrolled for those two), dim a multiple of 4 and every access of 4 channels aligned (8 bytes
/// for 16-bit types, 16 for f32): conv_state, x and out with unit channel stride.
fn stepv_fits(p: &UpdatePlan) -> Option<bool> {
    let pm = one_token_slots(p)?;
    let w = p.width;
    if w < 2 || !(p.state_len == w - 1 || p.state_len == w) || p.dim % 4 != 0 {
        return None;
    }
    // its 2-D grid: channel tiles along x, row blocks (of at least one row) along y
    if p.batch > MAX_GRID_Y || ceil_div(p.dim / 4, NT as i64) > MAX_GRID_X {
        return None;
    }
    let es = p.x.dtype.size() as i64;
    let a = 4 * es;
    let aligned = |v: &View, extra: &[i64]| v.addr as i64 % a == 0 && extra.iter().all(|s| s.wrapping_mul(es) % a == 0);
    let cs = &p.conv_state;
    let state_ok = aligned(cs, &[cs.stride[0], if pm { cs.stride[2] } else { 0 }]);
    let rows_ok = |v: &View| v.stride[1] == 1 && aligned(v, &[if p.batch > 1 { v.stride[0] } else { 0 }]);
    (state_ok && rows_ok(&p.x) && rows_ok(&p.out)).then_some(pm)
}

/// Tuning knobs for `ccv1d bench` (README): integer environment variables, read once.
#[derive(Clone, Copy)]
enum Knob {
    /// `CCV1D_STEP_ROWS`: batch rows per block of the decode-step kernels.
    StepRows,
    /// `CCV1D_CL_TILES`: CL_TT-token tiles per block of the streaming channel-last kernels.
    ClTiles,
    /// `CCV1D_BWD_ROWS`: batch rows per block of `bwd_cf` and `bwd_cfw`.
    BwdRows,
    /// `CCV1D_CF_WARP`: 0 / 1 = channel-first forward and backward never / wherever allowed on
    /// the warp-span kernels (`fwd_cfw`, `bwd_cfw`).
    CfWarp,
    /// `CCV1D_CL_CHUNK`: tokens per block of the streaming channel-last kernels (rounded up to a
    /// multiple of 8; wins over `CCV1D_CL_TILES`).
    ClChunk,
    /// `CCV1D_FWD_PT`: most 16-byte vectors of a forward on `fwd_pt` (0: never).
    FwdPt,
    /// `CCV1D_CL_BWD`: 0 / 1 = the channel-last backward of simple rows on `bwd_cls` / on
    /// `bwd_clw` wherever it can run.
    ClBwd,
    /// `CCV1D_CL_FWD`: 0 / 1 = the channel-last forward of simple rows on `fwd_cl` / on
    /// `fwd_clw` wherever it can run.
    ClFwd,
    /// `CCV1D_BWD_PT`: `bwd_pt` up to N tokens a channel on any grid and width; 0 = never.
    BwdPt,
    /// `CCV1D_FWD_PE`: most elements of x of a forward on `fwd_pe` (0: never).
    FwdPe,
    /// `CCV1D_BWD_PE`: 0 = the smallest backwards never on `bwd_pe`.
    BwdPe,
    /// `CCV1D_CFW7`: 0 / 1 = `bwd_cfw` at W <= 4 never / wherever it can run on `bwd_cfw7`.
    Cfw7,
    /// `CCV1D_REDUCE_ROWS`: partial rows per lane of `bwd_reduce` (the lanes: a power of two).
    ReduceRows,
    /// `CCV1D_CF_TILES`: tiles per block of the channel-first tile and warp-span kernels.
    CfTiles,
    /// `CCV1D_OVERLAP`: 0 = no programmatic dependent launches (`overlap_launches`).
    Overlap,
}

fn knob(k: Knob) -> Option<i64> {
    use std::sync::OnceLock;
    static VALUES: [OnceLock<Option<i64>>; 15] = [const { OnceLock::new() }; 15];
    let name = match k {
        Knob::StepRows => "CCV1D_STEP_ROWS",
        Knob::ClTiles => "CCV1D_CL_TILES",
        Knob::BwdRows => "CCV1D_BWD_ROWS",
        Knob::CfWarp => "CCV1D_CF_WARP",
        Knob::ClChunk => "CCV1D_CL_CHUNK",
        Knob::FwdPt => "CCV1D_FWD_PT",
        Knob::ClBwd => "CCV1D_CL_BWD",
        Knob::ClFwd => "CCV1D_CL_FWD",
        Knob::BwdPt => "CCV1D_BWD_PT",
        Knob::FwdPe => "CCV1D_FWD_PE",
        Knob::BwdPe => "CCV1D_BWD_PE",
        Knob::Cfw7 => "CCV1D_CFW7",
        Knob::ReduceRows => "CCV1D_REDUCE_ROWS",
        Knob::CfTiles => "CCV1D_CF_TILES",
        Knob::Overlap => "CCV1D_OVERLAP",
    };
    let least = if matches!(k, Knob::CfWarp | Knob::FwdPt | Knob::ClBwd | Knob::ClFwd | Knob::BwdPt | Knob::FwdPe | Knob::BwdPe | Knob::Cfw7 | Knob::Overlap) { 0 } else { 1 };
    *VALUES[k as usize].get_or_init(|| std::env::var(name).ok()?.trim().parse().ok().filter(|&v: &i64| v >= least))
}

// ------------------------------------------------------------------ tests

/// A launch's parameters, back from its bytes (tests).
#[cfg(test)]
fn params_of(l: &Launch) -> KParams {
    assert_eq!(l.params.len(), KPARAMS_SIZE);
    let mut k = KParams::default();
    unsafe { std::ptr::copy_nonoverlapping(l.params.as_ptr(), &mut k as *mut KParams as *mut u8, KPARAMS_SIZE) };
    k
}

/// On-GPU checks of every kernel against an f64 reference (needs an NVIDIA GPU; `--ignored`).
#[cfg(all(test, ccv1d_cuda))]
mod gputest;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    const KPARAMS_H: &str = include_str!("../../../hip/kparams.h");
    const INSTANCES_H: &str = include_str!("../../../hip/instances.h");

    fn h100() -> DeviceInfo {
        DeviceInfo { vendor: Vendor::Nvidia, warp_size: 32, multiprocessors: 132, max_threads_per_block: 1024, max_shared_mem_per_block: 49152, arch: 90 }
    }
    fn mi300() -> DeviceInfo {
        DeviceInfo { vendor: Vendor::Amd, warp_size: 64, multiprocessors: 304, max_threads_per_block: 1024, max_shared_mem_per_block: 65536, arch: 942 }
    }

    #[test]
    fn kparams_layout_matches_header() {
        assert_eq!(std::mem::size_of::<KParams>(), 592);
        assert_eq!(std::mem::align_of::<KParams>(), 8);
        assert_eq!(offset_of!(KParams, x), 0);
        assert_eq!(offset_of!(KParams, ws), 144);
        assert_eq!(offset_of!(KParams, x_s), 152);
        assert_eq!(offset_of!(KParams, w_s), 152 + 12 * 8);
        assert_eq!(offset_of!(KParams, csl_s), 456);
        assert_eq!(offset_of!(KParams, batch), 464);
        assert_eq!(offset_of!(KParams, state_len), 504);
        assert_eq!(offset_of!(KParams, chunk), 512);
        assert_eq!(offset_of!(KParams, n_partials), 544);
        assert_eq!(offset_of!(KParams, width), 552);
        assert_eq!(offset_of!(KParams, hi_bytes), 576);
        assert_eq!(offset_of!(KParams, brows), 584);
        // the header asserts the same numbers on the device side
        assert!(KPARAMS_H.contains("#define CCV_PARAMS_SIZE 592"));
        for (name, off) in [("x_s", 152), ("batch", 464), ("chunk", 512), ("width", 552)] {
            assert!(KPARAMS_H.contains(&format!("offsetof(ccv_params, {name}) == {off}")), "{name}");
        }
    }

    fn header_define(text: &str, name: &str) -> i64 {
        let line = text.lines().find(|l| l.starts_with(&format!("#define {name} "))).unwrap_or_else(|| panic!("{name} missing"));
        let val = line[format!("#define {name} ").len()..].split("//").next().unwrap().trim();
        if let Some(sh) = val.strip_prefix("(1 << ").and_then(|s| s.strip_suffix(')')) {
            1i64 << sh.trim().parse::<i64>().unwrap()
        } else {
            val.parse().unwrap()
        }
    }

    /// The values a conditional macro can take: the numbers after each `?` and `:` of its body.
    fn header_macro_arms(text: &str, name: &str) -> Vec<i64> {
        let line = text.lines().find(|l| l.starts_with(&format!("#define {name} "))).unwrap_or_else(|| panic!("{name} missing"));
        let body = line[format!("#define {name} ").len()..].split("//").next().unwrap();
        let arm = |s: &str| s.trim_start().split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok());
        body.split(['?', ':']).skip(1).filter_map(arm).collect()
    }

    #[test]
    fn flags_and_shapes_match_headers() {
        let flags = [
            ("CCV_F_BIAS", F_BIAS), ("CCV_F_SILU", F_SILU), ("CCV_F_SEQ_IDX", F_SEQ_IDX), ("CCV_F_PACKED", F_PACKED),
            ("CCV_F_INIT", F_INIT), ("CCV_F_FINAL", F_FINAL), ("CCV_F_STATE_IDX", F_STATE_IDX), ("CCV_F_HAS_INIT", F_HAS_INIT),
            ("CCV_F_VEC", F_VEC), ("CCV_F_DFINAL", F_DFINAL), ("CCV_F_DINIT", F_DINIT), ("CCV_F_DBIAS", F_DBIAS),
            ("CCV_F_CACHE_SEQLENS", F_CACHE_SEQLENS), ("CCV_F_STATES_ANY", F_STATES_ANY),
            ("CCV_F_DIRECT", F_DIRECT),
            ("CCV_F_STEP_PM", F_STEP_PM),
            ("CCV_F_W_ROWS", F_W_ROWS),
            ("CCV_F_PE_TOKENS", F_PE_TOKENS),

            ("CCV_DT_F32", DT_F32), ("CCV_DT_F16", DT_F16), ("CCV_DT_BF16", DT_BF16),
        ];
        for (n, v) in flags {
            assert_eq!(header_define(KPARAMS_H, n), v as i64, "{n}");
        }
        assert_eq!(DT_F32, DType::F32.code());
        assert_eq!(DT_F16, DType::F16.code());
        assert_eq!(DT_BF16, DType::BF16.code());
        assert_eq!(header_define(INSTANCES_H, "CCV_CF_ITEMS"), CF_ITEMS);
        assert_eq!(header_define(INSTANCES_H, "CCV_CL_TT"), CL_TT);
        assert_eq!(header_define(INSTANCES_H, "CCV_CL_CC"), CL_CC);
        assert_eq!(header_define(INSTANCES_H, "CCV_UPD_SMEM"), UPD_SMEM);
        assert_eq!(header_define(INSTANCES_H, "CCV_UPD_ROWS"), UPD_ROWS);
        for fam in ["fwd_cf", "fwd_cfs", "fwd_cfw", "fwd_cl", "fwd_clw", "fwd_pt", "fwd_pe", "bwd_cf", "bwd_cfs", "bwd_cfw", "bwd_cfw7", "bwd_cl", "bwd_cls", "bwd_clw", "update", "step", "stepv", "fwd_states", "bwd_states"] {
            assert_eq!(header_define(INSTANCES_H, &format!("CCV_NT_{fam}")), NT as i64, "{fam}");
        }
        assert_eq!(header_define(INSTANCES_H, "CCV_NT_bwd_reduce"), NT_REDUCE as i64);
        assert_eq!(header_define(INSTANCES_H, "CCV_NT_bwd_slab"), NT_SLAB as i64);
        assert_eq!(header_define(INSTANCES_H, "CCV_SLAB_VECS"), SLAB_VECS);
        assert_eq!(header_define(INSTANCES_H, "CCV_SLAB_ELEMS"), SLAB_ELEMS);
        assert_eq!(header_define(INSTANCES_H, "CCV_SLAB_ROWS"), SLAB_ROWS);
        assert_eq!(header_define(INSTANCES_H, "CCV_NT_bwd_pt"), NT_BWD_PT as i64);
        assert_eq!(header_define(INSTANCES_H, "CCV_NT_bwd_pe"), NT_BWD_PE);
        // the streaming channel-last kernels split a chunk evenly over their lanes:
        // lanes = NT / (CL_CC / channels per thread); fwd_cl takes 4 channels per thread, 16-bit
        // bwd_cls one of the arms of its per-width choice
        let cv16 = header_macro_arms(INSTANCES_H, "CCV_CL_BWD_CV_16(W)");
        assert!(!cv16.is_empty());
        for cv in [vec![4, header_define(INSTANCES_H, "CCV_CL_BWD_CV_f32")], cv16].concat() {
            let lanes = NT as i64 / (CL_CC / cv);
            assert_eq!(CL_SUB % lanes, 0, "CL_SUB {CL_SUB} against {lanes} lanes");
        }
        // bwd_clw and fwd_clw: 32-thread groups of 2 channels (one CL_CC tile), and their launch bounds
        assert_eq!(CL_SUB % (NT as i64 / 32), 0);
        assert_eq!(CL_CC, 64);
        assert_eq!(header_define(INSTANCES_H, "CCV_CLW_BLOCKS"), CLW_BLOCKS_PER_SM);
        assert_eq!(header_define(INSTANCES_H, "CCV_CLW_BLOCKS_WIDE"), CLW_BLOCKS_PER_SM_WIDE);
        assert_eq!(header_define(INSTANCES_H, "CCV_CLW_WIDE"), CLW_WIDE);
        assert_eq!(header_define(INSTANCES_H, "CCV_CLW_RING"), CLW_RING as i64);
        assert_eq!(header_define(INSTANCES_H, "CCV_FWD_CLW_BLOCKS"), FWD_CLW_BLOCKS_PER_SM);
        // bwd_cfw's launch bounds (W <= 4, then up to 7, then 8) as bwd_cf_blocks_per_sm mirrors them
        for dt in ["f16", "bf16"] {
            assert_eq!(header_macro_arms(INSTANCES_H, &format!("CCV_LB_bwd_cfw_{dt}(W)")), [8, 7, 6]);
        }
        assert_eq!(header_macro_arms(INSTANCES_H, "CCV_LB_bwd_cfw_f32(W)"), [8, 7]);
        assert_eq!([4, 7, 8].map(|w| bwd_cf_blocks_per_sm(w, true)), [8, 7, 6]);
        assert_eq!([4, 8].map(|w| bwd_cf_blocks_per_sm(w, false)), [8, 7]);
    }

    fn view(addr: usize, dtype: DType, stride: [i64; 3]) -> View {
        View { addr, dtype, stride }
    }
    fn cf(_b: i64, d: i64, l: i64) -> [i64; 3] {
        [d * l, l, 1]
    }
    fn cl(b: i64, d: i64, l: i64) -> [i64; 3] {
        let _ = b;
        [l * d, 1, d]
    }

    fn inputs(dt: DType, b: i64, d: i64, l: i64, w: i64, stride: [i64; 3]) -> ConvInputs {
        ConvInputs {
            backend: Backend::Gpu,
            stream: 0,
            batch: b,
            dim: d,
            seqlen: l,
            width: w,
            act: Act::Silu,
            x: view(0x1000_0000, dt, stride),
            weight: view(0x2000_0000, DType::F32, [w, 1, 0]),
            bias: Some(view(0x3000_0000, DType::BF16, [1, 0, 0])),
            seq_idx: None,
            initial_states: None,
            seqs: Seqs::Rows,
            pool: StatePool { state_indices: None, has_initial_state: None, num_slots: b },
        }
    }

    fn fwd_plan(inp: ConvInputs) -> FwdPlan {
        let out = View { addr: 0x4000_0000, ..inp.x };
        FwdPlan { inp, out, final_states: None }
    }

    #[test]
    fn fwd_cl_short_chunks() {
        let dev = h100();
        let g = |b, d, l, dt, w| fwd_cl_geometry(b, d, l, dt, w, &dev).unwrap();
        // f32 at W <= 4: chunks of 32 tokens
        let f = g(4, 5376, 4096, DType::F32, 4);
        assert_eq!((f.chunk, f.n_chunks, f.n_blocks), (32, 128, 4 * 84 * 128));
        assert_eq!((g(2, 700, 3000, DType::F32, 4).chunk, g(2, 700, 3000, DType::F32, 6).chunk), (32, 64));
        // 16-bit: chunks of 64 up to 4 waves of them (4 x 132 x 6 blocks), else 128
        let h = g(4, 5376, 4096, DType::BF16, 4);
        assert_eq!((h.chunk, h.n_chunks, h.n_blocks), (128, 32, 4 * 84 * 32));
        for (b, d, l, dt, w) in [(8, 2048, 1024, DType::F16, 4), (2, 1000, 6500, DType::BF16, 1), (1, 2048, 6400, DType::F16, 2), (4, 576, 7000, DType::F16, 3), (1, 5376, 4096, DType::BF16, 4), (16, 2048, 1004, DType::BF16, 4)] {
            let h = g(b, d, l, dt, w);
            assert!(h.chunk == 128 && h.n_blocks * 2 > 4 * 132 * 6, "{b}x{d}x{l}");
        }
        for (b, d, l, dt, w) in [(4, 4096, 512, DType::BF16, 4), (4, 256, 4096, DType::BF16, 4), (1, 2048, 4096, DType::F16, 3), (4, 576, 2000, DType::BF16, 1)] {
            let h = g(b, d, l, dt, w);
            assert!(h.chunk == 64 && h.n_blocks <= 4 * 132 * 6, "{b}x{d}x{l}");
        }
        // chunks under a tile (few short rows) stay
        assert!(g(2, 64, 256, DType::BF16, 4).chunk < 64);
        // f32 at W = 5 / 6 in chunks of 64; wider f32 and 16-bit from W = 5 on keep
        // cl_stream_geometry's chunks
        for w in [5, 6] {
            assert_eq!(g(4, 5376, 4096, DType::F32, w), MainGeom { chunk: 64, n_chunks: 64, n_blocks: 4 * 84 * 64, ..g(4, 5376, 4096, DType::F32, w) });
        }
        for (dt, w) in [(DType::F32, 7), (DType::F32, 8), (DType::BF16, 5), (DType::F16, 8)] {
            let wide = g(4, 5376, 4096, dt, w);
            assert_eq!(wide.chunk, cl_stream_geometry(4, 5376, 4096, cl_fit(false, dt, w), &dev).unwrap().chunk);
            assert!(wide.chunk > 128);
        }
    }

    #[test]
    fn reduce_lanes_rows_per_lane() {
        // 4 to 32 lanes, powers of two, ~8 partial rows per lane (4x256x4096 channel-last: 128 rows)
        let got: Vec<u32> = [0, 1, 4, 16, 17, 64, 65, 128, 792, 1 << 20].iter().map(|&r| reduce_lanes(r)).collect();
        assert_eq!(got, [4, 4, 4, 4, 4, 8, 16, 16, 32, 32]);
    }

    /// The channel-last forward on `fwd_clw` for 16-bit x at W >= 5 with whole 16-byte vectors
    /// along D, else `fwd_cl`; its geometry: chunks of 256 tokens from two waves on.
    #[test]
    fn fwd_clw_choice() {
        let family_on = |dt: DType, b: i64, d: i64, l: i64, w: i64, dpad: i64| {
            let v = fwd_launches_pt(&fwd_plan(inputs(dt, b, d, l, w, [l * dpad, 1, dpad])), &h100(), Some(0), Some(0)).unwrap();
            let k = params_of(&v[0]);
            if v[0].kernel.contains("_clw_") {
                check_clw_geometry(&v[0], b, d, l);
            }
            (v[0].kernel.trim_start_matches("ccv1d_fwd_").split('_').next().unwrap().to_string(), k.chunk)
        };
        let family = |dt: DType, b: i64, d: i64, l: i64, w: i64| family_on(dt, b, d, l, w, d).0;
        for dt in [DType::F16, DType::BF16] {
            for w in 1..=8 {
                let want = if w >= 5 { "clw" } else { "cl" };
                assert_eq!(family(dt, 4, 5376, 4096, w), want, "{dt:?} W = {w}");
                assert_eq!(family(dt, 4, 256, 4096, w), want);
                assert_eq!(family(dt, 3, 72, 1000, w), want, "a partial channel tile");
            }
            // 4 x 84 tiles x 16 chunks = 5376 blocks >= 2 x 132 x 8: chunks of 256
            assert_eq!(family_on(dt, 4, 5376, 4096, 6, 5376), ("clw".to_string(), 256));
            // 4 x 4 tiles: under two waves in chunks of 256, the stream geometry's chunks stay
            assert_ne!(family_on(dt, 4, 256, 4096, 6, 256).1, 256);
            // D a multiple of 4 but not of 8: fwd_cl; padded rows of whole vectors: fwd_clw
            assert_eq!(family_on(dt, 4, 5380, 4096, 6, 5384).0, "cl");
            assert_eq!(family_on(dt, 4, 5376, 4096, 6, 5384).0, "clw");
        }
        assert_eq!(family(DType::F32, 4, 5376, 4096, 6), "cl");
        // seq_idx: fwd_cl's general walk
        let mut p = fwd_plan(inputs(DType::BF16, 4, 5376, 4096, 6, cl(4, 5376, 4096)));
        p.inp.seq_idx = Some(IdxView { addr: 0x7600_0000, stride: [4096, 1], elem_bytes: 4 });
        assert_eq!(fwd_launches(&p, &h100()).unwrap()[0].kernel, "ccv1d_fwd_cl_bf16_w6");
    }

    /// A `fwd_clw` / `bwd_clw` launch of b x d x l: whole 64-channel tiles, chunks split evenly
    /// over the 4 groups of 32 threads, every token in one chunk, a grid that covers the blocks.
    fn check_clw_geometry(launch: &Launch, b: i64, d: i64, l: i64) {
        let k = params_of(launch);
        assert_eq!(k.n_ctiles, ceil_div(d, 64));
        assert_eq!(k.chunk % 4, 0);
        assert_eq!(k.n_blocks, b * k.n_ctiles * k.n_chunks);
        assert!(k.n_chunks * k.chunk >= l && (k.n_chunks - 1) * k.chunk < l);
        assert_eq!(launch.block[0], NT);
        check_grid(launch);
    }

    fn check_grid(l: &Launch) {
        let k = params_of(l);
        let cap = l.grid[0] as i64 * l.grid[1] as i64;
        assert!(cap >= k.n_blocks, "{}: grid {:?} < {} blocks", l.kernel, l.grid, k.n_blocks);
        assert!(cap - k.n_blocks < l.grid[0] as i64, "{}: a whole spare grid row", l.kernel);
        assert!(l.grid[1] <= 65535 && l.grid[0] as i64 <= MAX_GRID_X);
        assert!(
            l.block[0] == NT
                || (l.kernel == "ccv1d_bwd_reduce" && l.block[0] % 32 == 0 && l.block[0] <= NT_REDUCE)
                || (l.kernel.starts_with("ccv1d_bwd_slab_") && l.block[0] == NT_SLAB)
        );
        assert_eq!(l.shared_mem_bytes, 0);
    }

    #[test]
    fn fwd_channel_first_geometry() {
        for (b, d, l) in [(4, 5376, 4096), (4, 256, 4096), (1, 1, 1), (2, 3, 5000), (1, 64, 1 << 20)] {
            for dt in [DType::F32, DType::F16, DType::BF16] {
                let p = fwd_plan(inputs(dt, b, d, l, 4, cf(b, d, l)));
                let v = fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap();
                assert_eq!(v.len(), 1);
                // warp spans at W = 4: 16-bit rows of at most half a tile (1024 tokens) and at
                // least one span (512), 2^22 elements and up: none of these shapes
                let warp = false;
                let fam = if warp { "cfw" } else if params_of(&v[0]).rows_log2 > 0 { "cfs" } else { "cf" };
                assert_eq!(v[0].kernel, format!("ccv1d_fwd_{fam}_{}_w4", dt.name()));
                check_grid(&v[0]);
                let k = params_of(&v[0]);
                let tile = tile_tokens(Layout::ChannelFirst, dt);
                assert_eq!(k.chunk % tile, 0);
                assert!(k.chunk / tile <= MAX_TILES_PER_BLOCK);
                assert_eq!(k.n_chunks, ceil_div(l, k.chunk));
                assert!((k.n_chunks - 1) * k.chunk < l);
                if warp {
                    assert_eq!(k.rows_log2, 0);
                    assert_eq!(k.n_blocks, ceil_div(b, k.brows as i64) * d * k.n_chunks);
                } else {
                    assert_eq!(k.n_blocks, ceil_div(b * d, 1 << k.rows_log2) * k.n_chunks);
                }
                assert!(k.rows_log2 == 0 || (k.n_chunks == 1 && l << (k.rows_log2 + 1) <= tile));
                assert_eq!(k.n_ctiles, 1);
                assert_ne!(k.flags & F_VEC, 0, "contiguous aligned → vector path");
                assert_eq!(k.flags & (F_BIAS | F_SILU), F_BIAS | F_SILU);
                assert_eq!((k.w_dtype, k.b_dtype), (DT_F32, DT_BF16));
                assert_eq!((k.x, k.out), (0x1000_0000, 0x4000_0000));
            }
        }
        // the small shape of DESIGN.md is split into one-tile blocks (2 per row)
        let p = fwd_plan(inputs(DType::BF16, 4, 256, 4096, 4, cf(4, 256, 4096)));
        let k = params_of(&fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0]);
        assert_eq!((k.chunk, k.n_chunks, k.n_blocks), (2048, 2, 2048));
        // 16-bit rows of one or two warp spans in a problem of 2^22 elements and up: warp spans,
        // several batch rows of a channel per block (4x4096x512: all 4, 4096 blocks); and at
        // W >= 6 on long rows
        for (dt, b, d, l, w, brows, blocks) in [(DType::BF16, 4, 4096, 512, 4, 4, 4096), (DType::F16, 8, 2048, 1024, 4, 4, 4096), (DType::BF16, 4, 5376, 4096, 6, 2, 10752)] {
            let p = fwd_plan(inputs(dt, b, d, l, w, cf(b, d, l)));
            let v = fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap();
            let k = params_of(&v[0]);
            assert_eq!(v[0].kernel, format!("ccv1d_fwd_cfw_{}_w{w}", dt.name()));
            assert_eq!((k.brows as i64, k.n_chunks, k.n_blocks), (brows, 1, blocks), "{dt:?} {b}x{d}x{l}");
        }
        // short rows: several (batch, channel) rows per block, at least 16 threads per row
        for (dt, b, d, l, rl, blocks) in [(DType::BF16, 4, 4096, 256, 3, 2048), (DType::F32, 4, 4096, 512, 1, 8192), (DType::BF16, 4, 256, 512, 2, 256), (DType::F32, 1, 32, 64, 3, 4), (DType::BF16, 1, 1, 1, 3, 1)] {
            let p = fwd_plan(inputs(dt, b, d, l, 4, cf(b, d, l)));
            let k = params_of(&fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0]);
            assert_eq!((k.rows_log2, k.n_chunks, k.n_blocks), (rl, 1, blocks), "{dt:?} {b}x{d}x{l}");
            assert_eq!(fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0].kernel, format!("ccv1d_fwd_cfs_{}_w4", dt.name()));
        }
    }

    #[test]
    fn fwd_pt_choice() {
        // (fwd_pe off: it takes the smallest problems first, fwd_pe_choice)
        // (dtype, b, d, l) -> (rows_log2, grid): a vector per thread, 2^rows_log2 vectors of a
        // row per channel, 128 >> rows_log2 channels a block
        for (dt, b, d, l, lg, grid) in [
            (DType::F32, 1, 32, 64, 4, [4, 1, 1]),     // seeds' Tiny
            (DType::BF16, 2, 64, 256, 5, [16, 1, 2]),  // seeds' Small
            (DType::F32, 4, 256, 512, 7, [256, 1, 4]), // 003's Medium: 2^17 vectors
            (DType::F16, 3, 3, 8 * 300, 7, [3, 3, 3]), // 300 vectors a row
            (DType::BF16, 2, 5, 8, 0, [1, 1, 2]),      // one vector a row
        ] {
            let p = fwd_plan(inputs(dt, b, d, l, 4, cf(b, d, l)));
            let v = fwd_launches_pt(&p, &h100(), None, Some(0)).unwrap();
            assert_eq!(v.len(), 1);
            assert_eq!(v[0].kernel, format!("ccv1d_fwd_pt_{}_w4", dt.name()));
            let k = params_of(&v[0]);
            assert_eq!((k.rows_log2, v[0].grid), (lg, grid), "{dt:?} {b}x{d}x{l}");
            assert_eq!(k.n_blocks, grid.iter().map(|&g| g as i64).product::<i64>());
            assert!(!fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0].kernel.contains("_pt_"), "0: the tiled kernels");
        }
        // final states: the states launch after it
        let mut p = fwd_plan(inputs(DType::F32, 1, 32, 64, 4, cf(1, 32, 64)));
        p.final_states = Some(view(0x7000_0000, DType::F32, [96, 3, 1]));
        let names: Vec<_> = fwd_launches_pt(&p, &h100(), None, Some(0)).unwrap().into_iter().map(|l| l.kernel).collect();
        assert_eq!(names, ["ccv1d_fwd_pt_f32_w4", "ccv1d_fwd_states_f32"]);
        // not taken: channel-last, seq_idx, partial vectors, the scalar path, past
        // pt_max_vectors, or the batch past the grid's z
        let tiled = |p: &FwdPlan| !fwd_launches_pt(p, &h100(), None, Some(0)).unwrap()[0].kernel.contains("_pt_");
        assert!(tiled(&fwd_plan(inputs(DType::BF16, 1, 32, 64, 4, cl(1, 32, 64)))));
        let mut p = fwd_plan(inputs(DType::F32, 1, 32, 64, 4, cf(1, 32, 64)));
        p.inp.seq_idx = Some(IdxView { addr: 0x9000, stride: [64, 1], elem_bytes: 4 });
        assert!(tiled(&p));
        assert!(tiled(&fwd_plan(inputs(DType::F32, 1, 32, 66, 4, cf(1, 32, 66)))));
        let mut p = fwd_plan(inputs(DType::F32, 1, 32, 64, 4, cf(1, 32, 64)));
        p.inp.x.addr += 4;
        assert!(tiled(&p));
        for (dt, most) in [(DType::F32, 1 << 21), (DType::BF16, 1 << 21), (DType::F16, 1 << 19)] {
            let v = 16 / dt.size() as i64;
            let (d, l) = (64, most * v / 64);
            assert!(!tiled(&fwd_plan(inputs(dt, 1, d, l, 4, cf(1, d, l)))), "{dt:?}");
            assert!(tiled(&fwd_plan(inputs(dt, 1, d, l + v, 4, cf(1, d, l + v)))), "{dt:?}");
        }
        // the preset shapes (W = 4): bf16 8x2048x1024 on it, 4x5376x4096 not; f16 4x4096x512 not
        assert!(!tiled(&fwd_plan(inputs(DType::BF16, 8, 2048, 1024, 4, cf(8, 2048, 1024)))));
        assert!(tiled(&fwd_plan(inputs(DType::BF16, 4, 5376, 4096, 4, cf(4, 5376, 4096)))));
        assert!(tiled(&fwd_plan(inputs(DType::F16, 4, 4096, 512, 4, cf(4, 4096, 512)))));
        assert!(tiled(&fwd_plan(inputs(DType::BF16, 65536, 1, 8, 4, cf(65536, 1, 8)))));
        assert!(!tiled(&fwd_plan(inputs(DType::BF16, 65535, 1, 8, 4, cf(65535, 1, 8)))));
    }

    #[test]
    fn fwd_pe_choice() {
        // (dtype, layout, b, d, l) -> (rows_log2, grid): an output element per thread, 2^rows_log2
        // channels (channel-last) or tokens (channel-first) and 128 >> rows_log2 of the other a block
        for (dt, lay_cl, b, d, l, lg, grid) in [
            (DType::F32, true, 1, 32, 64, 5, [1, 16, 1]),    // seeds' Tiny
            (DType::BF16, true, 2, 64, 256, 6, [1, 128, 2]), // seeds' Small
            (DType::F32, true, 2, 1024, 64, 7, [8, 64, 2]),  // 1024 channels: 8 blocks across
            (DType::F16, true, 3, 24, 5, 5, [1, 2, 3]),      // 24 channels, partial blocks
            (DType::F32, false, 1, 32, 64, 6, [1, 16, 1]),   // channel-first: tokens across
            (DType::F16, false, 2, 64, 256, 7, [2, 64, 2]),
            (DType::F32, false, 3, 5, 24, 5, [1, 2, 3]),
        ] {
            let p = fwd_plan(inputs(dt, b, d, l, 4, if lay_cl { cl(b, d, l) } else { cf(b, d, l) }));
            let v = fwd_launches(&p, &h100()).unwrap();
            assert_eq!(v.len(), 1);
            assert_eq!(v[0].kernel, format!("ccv1d_fwd_pe_{}_w4", dt.name()));
            let k = params_of(&v[0]);
            assert_eq!((k.rows_log2, v[0].grid), (lg, grid), "{dt:?} {b}x{d}x{l}");
            assert_eq!(k.n_blocks, grid.iter().map(|&g| g as i64).product::<i64>());
            assert_eq!(k.flags & F_PE_TOKENS != 0, !lay_cl);
            assert!(!fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0].kernel.contains("_pe_"), "0: never");
        }
        // final states: the states launch after it
        let mut p = fwd_plan(inputs(DType::BF16, 1, 32, 64, 4, cl(1, 32, 64)));
        p.final_states = Some(view(0x7000_0000, DType::BF16, [96, 3, 1]));
        let names: Vec<_> = fwd_launches(&p, &h100()).unwrap().into_iter().map(|l| l.kernel).collect();
        assert_eq!(names, ["ccv1d_fwd_pe_bf16_w4", "ccv1d_fwd_states_bf16"]);
        // padded rows off the vector path too; not taken: seq_idx, past pe_max_elems,
        // channel-first bf16
        let other = |p: &FwdPlan| !fwd_launches(p, &h100()).unwrap()[0].kernel.contains("_pe_");
        assert!(other(&fwd_plan(inputs(DType::BF16, 1, 32, 64, 4, cf(1, 32, 64)))));
        let mut p = fwd_plan(inputs(DType::F32, 1, 32, 64, 4, cl(1, 32, 64)));
        p.inp.seq_idx = Some(IdxView { addr: 0x9000, stride: [64, 1], elem_bytes: 4 });
        assert!(other(&p));
        assert!(!other(&fwd_plan(inputs(DType::BF16, 1, 32, 64, 4, [64 * 37, 1, 37]))));
        assert!(!other(&fwd_plan(inputs(DType::F16, 1, 32, 66, 4, [66 * 33, 66, 1]))));
        for dt in [DType::F32, DType::F16, DType::BF16] {
            for lay in [Layout::ChannelLast, Layout::ChannelFirst] {
                let (d, most) = (64, pe_max_elems(dt, lay));
                let st = |l| if lay == Layout::ChannelLast { cl(1, d, l) } else { cf(1, d, l) };
                let l = most / d;
                assert!(most == 0 || !other(&fwd_plan(inputs(dt, 1, d, l, 4, st(l)))), "{dt:?}");
                assert!(other(&fwd_plan(inputs(dt, 1, d, l + 8, 4, st(l + 8)))), "{dt:?}");
            }
        }
    }

    #[test]
    fn fwd_channel_last_geometry() {
        for (b, d, l) in [(4, 5376, 4096), (8, 2048, 1024), (1, 100, 3), (2, 8, 1)] {
            let p = fwd_plan(inputs(DType::BF16, b, d, l, 3, cl(b, d, l)));
            let v = fwd_launches_pt(&p, &mi300(), Some(0), Some(0)).unwrap();
            assert_eq!(v[0].kernel, "ccv1d_fwd_cl_bf16_w3");
            check_grid(&v[0]);
            let k = params_of(&v[0]);
            assert_eq!(k.chunk % CL_SUB, 0);
            assert_eq!(k.n_ctiles, ceil_div(d, CL_CC));
            assert_eq!(k.n_blocks, b * k.n_ctiles * k.n_chunks);
            assert_eq!(k.flags & F_VEC != 0, d % 8 == 0, "vector path iff row strides are 16-byte multiples");
        }
    }

    #[test]
    fn channel_last_chunks_fill_a_wave() {
        let h100 = DeviceInfo { multiprocessors: 132, ..mi300() };
        let quantized = ClFit { blocks_per_sm: 6, one_wave: None };
        // (batch, dim, seqlen) -> expected (chunk tokens, chunks per row)
        for ((b, d, l), want) in [((8, 2048, 1024), (384, 3)), ((4, 4096, 512), (192, 3)), ((4, 5376, 4096), (640, 7)), ((1, 32, 64), (8, 8)), ((2, 64, 256), (8, 32))] {
            let g = cl_stream_geometry(b, d, l, quantized, &h100).unwrap();
            assert_eq!((g.chunk, g.n_chunks), want, "{b}x{d}x{l}");
            assert_eq!(g.n_blocks, b * ceil_div(d, CL_CC) * g.n_chunks);
        }
        // one wave: 336 rows in 792 slots -> 2 chunks; in 396 -> 1, or 2 when chunks stop at 2048
        let one_wave = |blocks_per_sm, max_chunk| ClFit { blocks_per_sm, one_wave: Some(max_chunk) };
        for (fit, want) in [(one_wave(6, i64::MAX), (2048, 2)), (one_wave(3, i64::MAX), (4096, 1)), (one_wave(3, 2048), (2048, 2)), (one_wave(3, 1000), (832, 5))] {
            let g = cl_stream_geometry(4, 5376, 4096, fit, &h100).unwrap();
            assert_eq!((g.chunk, g.n_chunks), want, "{fit:?}");
        }
        // the 16-bit backward at W=4: one wave of chunks of at most 2048 tokens
        let fit = cl_fit(true, DType::BF16, 4);
        assert_eq!((fit.blocks_per_sm, fit.one_wave), (3, Some(2048)));
        let g = cl_stream_geometry(8, 2048, 1024, fit, &h100).unwrap();
        assert_eq!((g.chunk, g.n_chunks), (1024, 1));
        let g = cl_stream_geometry(4, 256, 4096, fit, &h100).unwrap();
        assert_eq!((g.chunk, g.n_chunks), (192, 22));
        for l in [1, 63, 64, 65, 1000, 4097] {
            let g = cl_stream_geometry(3, 100, l, ClFit { blocks_per_sm: 4, one_wave: Some(i64::MAX) }, &h100).unwrap();
            assert_eq!(g.chunk % CL_SUB, 0);
            assert_eq!(g.n_chunks, ceil_div(l, g.chunk));
            assert!((g.n_chunks - 1) * g.chunk < l);
        }
    }

    #[test]
    fn layout_and_vector_choice() {
        let x = view(0, DType::F32, [1000, 1, 7]); // neither L nor D contiguous-friendly... D-stride 1
        assert_eq!(choose_layout(&x, 7, 100), Layout::ChannelLast);
        let x = view(0, DType::F32, [1000, 100, 1]);
        assert_eq!(choose_layout(&x, 10, 100), Layout::ChannelFirst);
        let x = view(0, DType::F32, [1000, 3, 50]); // generic strides: the smaller one
        assert_eq!(choose_layout(&x, 10, 20), Layout::ChannelLast);
        let x = view(0, DType::F32, [1000, 50, 3]);
        assert_eq!(choose_layout(&x, 10, 20), Layout::ChannelFirst);
        assert_eq!(choose_layout(&view(0, DType::F32, [64, 1, 64]), 64, 1), Layout::ChannelLast);
        assert_eq!(choose_layout(&view(0, DType::F32, [64, 64, 1]), 1, 64), Layout::ChannelFirst);

        // misaligned base or odd row stride → scalar path, same kernel
        let mut p = fwd_plan(inputs(DType::BF16, 2, 16, 1000, 4, cf(2, 16, 1000)));
        assert_ne!(params_of(&fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0]).flags & F_VEC, 0);
        p.inp.x.addr += 2;
        assert_eq!(params_of(&fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0]).flags & F_VEC, 0);
        let mut p = fwd_plan(inputs(DType::BF16, 2, 16, 1001, 4, cf(2, 16, 1001)));
        assert_eq!(params_of(&fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0]).flags & F_VEC, 0);
        p.out.stride = [16 * 1008, 1008, 1];
        p.inp.x.stride = [16 * 1008, 1008, 1]; // a slice of a wider, 16-byte-aligned buffer
        assert_ne!(params_of(&fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0]).flags & F_VEC, 0);
        let mut p = fwd_plan(inputs(DType::F32, 2, 16, 64, 4, [16 * 64 * 2, 64 * 2, 2])); // L-stride 2
        let l = &fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0];
        assert_eq!(l.kernel, "ccv1d_fwd_cfs_f32_w4", "L = 64: short rows");
        assert_eq!(params_of(l).flags & F_VEC, 0);
        p.inp.x.stride = [-16 * 64, 64, 1]; // negative strides are fine
        p.out.stride = [16 * 64, 64, 1];
        assert_ne!(params_of(&fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0]).flags & F_VEC, 0);
    }

    #[test]
    fn fwd_states_and_empty_shapes() {
        let mut p = fwd_plan(inputs(DType::F16, 3, 40, 0, 4, cf(3, 40, 0)));
        p.final_states = Some(view(0x5000_0000, DType::F16, [40 * 3, 3, 1]));
        let v = fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap();
        assert_eq!(v.len(), 1, "L = 0: only the states kernel");
        assert_eq!(v[0].kernel, "ccv1d_fwd_states_f16");
        let k = params_of(&v[0]);
        assert_eq!((k.n_ctiles, k.n_blocks, k.num_seqs), (1, 3, 3));
        assert_ne!(k.flags & F_FINAL, 0);
        check_grid(&v[0]);

        p.inp.seqlen = 10;
        let v = fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap();
        assert_eq!(v.iter().map(|l| l.kernel.as_str()).collect::<Vec<_>>(), ["ccv1d_fwd_cfs_f16_w4", "ccv1d_fwd_states_f16"]);

        p.inp.width = 1; // no state
        assert_eq!(fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap().len(), 1);
        p.inp.batch = 0;
        assert!(fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap().is_empty());
        p.inp.width = 9;
        assert_eq!(fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap_err().status, CCV1D_ERR_WIDTH);
    }

    #[test]
    fn fwd_varlen_params() {
        let mut inp = inputs(DType::BF16, 1, 64, 1000, 4, cl(1, 64, 1000));
        inp.seqs = Seqs::Packed { cu_seqlens: IdxView { addr: 0x6000_0000, stride: [1, 0], elem_bytes: 4 }, num_seqs: 7 };
        inp.pool = StatePool {
            state_indices: Some(IdxView { addr: 0x6100_0000, stride: [2, 0], elem_bytes: 4 }),
            has_initial_state: Some(IdxView { addr: 0x6200_0000, stride: [1, 0], elem_bytes: 1 }),
            num_slots: 20,
        };
        inp.initial_states = Some(view(0x6300_0000, DType::BF16, [64 * 3, 3, 1]));
        let mut p = fwd_plan(inp);
        p.final_states = p.inp.initial_states; // the same pool
        let v = fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap();
        assert_eq!(v.len(), 2);
        let (k0, k1) = (params_of(&v[0]), params_of(&v[1]));
        for k in [&k0, &k1] {
            assert_eq!(k.flags & (F_PACKED | F_STATE_IDX | F_HAS_INIT | F_INIT | F_FINAL | F_STATES_ANY), F_PACKED | F_STATE_IDX | F_HAS_INIT | F_INIT | F_FINAL | F_STATES_ANY);
            assert_eq!((k.num_seqs, k.num_slots, k.hi_bytes, k.si_s), (7, 20, 1, 2));
            assert_eq!(k.init, k.final_st);
        }
        assert_eq!(v[1].kernel, "ccv1d_fwd_states_bf16");
        assert_eq!(k1.n_blocks, 7);
    }

    fn bwd_plan(inp: ConvInputs) -> BwdPlan {
        let x = inp.x;
        BwdPlan {
            inp,
            dout: View { addr: 0x7000_0000, ..x },
            dfinal_states: None,
            dx: View { addr: 0x7100_0000, ..x },
            dweight: view(0x7200_0000, DType::F32, [inp.width, 1, 0]),
            dbias: Some(view(0x7300_0000, DType::BF16, [1, 0, 0])),
            dinitial_states: None,
            workspace: None,
            deterministic: true,
        }
    }

    /// Tiny channel-last problems in one launch: the channels per slab block, and who else gets
    /// them.
    #[test]
    fn bwd_slab_choice() {
        let slab = |dt: DType, lay: u8, b: i64, d: i64, l: i64, w: i64| {
            let st = if lay == 0 { cf(b, d, l) } else { cl(b, d, l) };
            let p = bwd_plan(inputs(dt, b, d, l, w, st));
            let v = bwd_launches_pt(&p, &h100(), 0x8000_0000, SmallBwd::NO_PE).unwrap();
            let k = params_of(&v[0]);
            let one = v[0].kernel.starts_with("ccv1d_bwd_slab_");
            if one {
                // the whole dweight/dbias in the block: no workspace, no reduce launch
                assert_eq!((v.len(), k.flags & F_DIRECT, bwd_workspace_bytes_pt(&p, &h100(), SmallBwd::NO_PE)), (1, F_DIRECT, 0));
                assert_eq!(k.n_blocks, ceil_div(d, 1 << k.rows_log2));
                assert_eq!(v[0].block[0], NT_SLAB);
                let c = 1i64 << k.rows_log2;
                assert!(b * l * c <= SLAB_VECS * NT_SLAB as i64 * (16 / dt.size() as i64) && b * (l + w - 1) * c <= SLAB_ELEMS);
            }
            one.then_some(1i64 << k.rows_log2)
        };
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let v = 16 / dt.size() as i64;
            for w in [1, 4, 8] {
                // the seeds' Tiny and 003's Small: a vector's channels per block, one vector per
                // thread; not channel-first, not 000's Small (two vectors per thread)
                assert_eq!(slab(dt, 1, 1, 32, 64, w), Some(v));
                assert_eq!(slab(dt, 1, 2, 64, 128, w), Some(v));
                assert_eq!(slab(dt, 0, 1, 32, 64, w), None);
                assert_eq!(slab(dt, 1, 2, 64, 256, w), None);
            }
            // more channels than multiprocessors: wider slabs, one block per multiprocessor
            assert_eq!(slab(dt, 1, 2, 1080, 8, 4), Some(16));
            // partial vectors, too many batch rows: the other kernels
            assert_eq!(slab(dt, 1, 2, 4 * v + v / 2, 8, 4), None);
            assert_eq!(slab(dt, 1, 65, v, 1, 4), None);
        }
        // seq_idx: the other kernels
        let mut p = bwd_plan(inputs(DType::F32, 1, 32, 64, 4, cl(1, 32, 64)));
        p.inp.seq_idx = Some(IdxView { addr: 0x7600_0000, stride: [64, 1], elem_bytes: 4 });
        assert!(!bwd_launches(&p, &h100(), 0x8000_0000).unwrap()[0].kernel.contains("slab"));
    }

    /// Channel-first problems on `bwd_pt`: 2^vl vectors a thread, 2^r >= B L/V/2^vl threads a
    /// channel, blocks of max(128, 2^r) threads; one launch, no workspace; who else gets them.
    #[test]
    fn bwd_pt_choice() {
        let dev = h100();
        // (log2 of the channels' threads per block, log2 of a thread's vectors) on bwd_pt, or None
        let pt_with = |p: &BwdPlan, small: SmallBwd| {
            let v = bwd_launches_pt(p, &dev, 0x8000_0000, small).unwrap();
            let k = params_of(&v[0]);
            v[0].kernel.starts_with("ccv1d_bwd_pt_").then(|| {
                assert_eq!((v.len(), k.flags & F_DIRECT, bwd_workspace_bytes_pt(p, &dev, small)), (1, F_DIRECT, 0));
                let threads = NT_BWD_PT_MIN.max(1 << k.rows_log2);
                let per_block = threads as i64 >> k.rows_log2;
                assert_eq!((k.n_blocks, v[0].block[0]), (ceil_div(p.inp.dim, per_block), threads));
                assert_eq!(v[0].grid, [k.n_blocks as u32, 1, 1]);
                (k.rows_log2, k.brows)
            })
        };
        let pt_rows = |p: &BwdPlan| pt_with(p, SmallBwd::NO_PE);
        let cf_plan = |dt: DType, b: i64, d: i64, l: i64, w: i64| bwd_plan(inputs(dt, b, d, l, w, cf(b, d, l)));
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let v = 16 / dt.size() as i64;
            let lv = |n: i64| n.trailing_zeros() as i32;
            // (threads a channel, vectors a thread), log2, at 2048 tokens (512 / 256 vectors) on a
            // grid of at most 4 blocks a multiprocessor (132 SMs), and on a wider one
            let narrow = if v == 4 { (8, 1) } else { (8, 0) };
            let wide = if v == 4 { (8, 1) } else { (7, 1) };
            for w in [1, 4, 8] {
                // the seeds' Tiny and 003's Small: one vector a thread
                assert_eq!(pt_rows(&cf_plan(dt, 1, 32, 64, w)), Some((lv(64 / v), 0)));
                assert_eq!(pt_rows(&cf_plan(dt, 2, 64, 128, w)), Some((lv(256 / v), 0)));
                assert_eq!(pt_rows(&cf_plan(dt, 3, 5, v, w)), Some((2, 0)));
                assert_eq!(pt_rows(&cf_plan(dt, 4, 3, 64, w)), Some((lv(256 / v), 0)));
                // up to 2048 tokens at any width and grid: 000's Small and Medium, 003's Medium,
                // 8x512x256 (narrow grids: at most 4 blocks a multiprocessor of 132), 4x1024x512
                // and 4x4096x512 (wide ones); a ragged row (17 or 9 vectors)
                assert_eq!(pt_rows(&cf_plan(dt, 2, 64, 256, w)), Some((lv(512 / v), 0)));
                assert_eq!(pt_rows(&cf_plan(dt, 4, 64, 512, w)), Some(narrow));
                assert_eq!(pt_rows(&cf_plan(dt, 4, 256, 512, w)), Some(narrow));
                assert_eq!(pt_rows(&cf_plan(dt, 8, 512, 256, w)), Some(narrow));
                assert_eq!(pt_rows(&cf_plan(dt, 4, 1024, 512, w)), Some(wide));
                assert_eq!(pt_rows(&cf_plan(dt, 4, 4096, 512, w)), Some(wide));
                assert_eq!(pt_rows(&cf_plan(dt, 4, 3, 64 + v, w)), Some((if v == 4 { 7 } else { 6 }, 0)));
                // a ragged row of 129 vectors: one a thread in a block of 256 threads
                assert_eq!(pt_rows(&cf_plan(dt, 1, 5, 129 * v, w)), Some((8, 0)));
                // a lower limit when given
                assert_eq!(pt_with(&cf_plan(dt, 2, 64, 128, w), SmallBwd { pt_tokens: Some(255), ..SmallBwd::NO_PE }), None);
                // past 2048 tokens by default (bf16: up to its 512 vectors, 4096 tokens); past 512
                // vectors a channel (2 a thread, 256 threads) at any limit; 2 vectors a thread
                // need an even row of vectors
                let bf16 = dt == DType::BF16;
                assert_eq!(pt_rows(&cf_plan(dt, 1, 3, 4096, w)), bf16.then_some((8, 1)));
                assert_eq!(pt_rows(&cf_plan(dt, 8, 4096, 384, w)), bf16.then_some((8, 1)));
                assert_eq!(pt_rows(&cf_plan(dt, 1, 3, 8192, w)), None);
                let no_limit = SmallBwd { pt_tokens: Some(1 << 20), ..SmallBwd::NO_PE };
                assert_eq!(pt_with(&cf_plan(dt, 1, 3, 4096, w), no_limit), (v == 8).then_some((8, 1)));
                assert_eq!(pt_rows(&cf_plan(dt, 1, 600, 129 * v, w)), None);
                // L not a multiple of the vector, channel-last: the other kernels
                assert_eq!(pt_rows(&cf_plan(dt, 1, 32, v + 1, w)), None);
                assert_eq!(pt_rows(&bwd_plan(inputs(dt, 1, 32, 64, w, cl(1, 32, 64)))), None);
                // allowed or not: the tiled kernels and their workspace
                let p = cf_plan(dt, 2, 64, 128, w);
                let tiled = bwd_launches_pt(&p, &dev, 0x8000_0000, SmallBwd::NONE).unwrap();
                assert!(!tiled[0].kernel.contains("_pt_"));
                assert_eq!(bwd_workspace_bytes_pt(&p, &dev, SmallBwd::NONE) > 0, tiled.iter().any(|l| l.kernel == "ccv1d_bwd_reduce"));
            }
        }
        // 64-wide waves: the same geometry (the block's groups do not depend on the warp)
        let v = bwd_launches_pt(&cf_plan(DType::BF16, 4, 5, 64, 4), &mi300(), 0x8000_0000, SmallBwd::NO_PE).unwrap();
        assert_eq!((v[0].kernel.as_str(), params_of(&v[0]).n_blocks), ("ccv1d_bwd_pt_bf16_w4", 2));
        // seq_idx: the other kernels
        let mut p = cf_plan(DType::F32, 1, 32, 64, 4);
        p.inp.seq_idx = Some(IdxView { addr: 0x7600_0000, stride: [64, 1], elem_bytes: 4 });
        assert_eq!(pt_rows(&p), None);
    }

    /// `bwd_cfw`'s 16-bit chunks: whole rows where that saves a wave (4x256x4096: 1024 blocks
    /// against 2048; 4x512x4096 in row pairs), not where it leaves half a wave (2x256x4096);
    /// f32 and the Mamba-2 shape as `main_geometry` cuts them.
    #[test]
    fn bwd_cfw_chunk_choice() {
        let geom = |dt: DType, (b, d, l): (i64, i64, i64)| {
            let p = bwd_plan(inputs(dt, b, d, l, 4, cf(b, d, l)));
            let v = bwd_launches(&p, &h100(), 0x8000_0000).unwrap();
            assert!(v[0].kernel.starts_with("ccv1d_bwd_cfw"), "{}", v[0].kernel);
            let k = params_of(&v[0]);
            (k.chunk, k.n_blocks, k.brows, v.len())
        };
        assert_eq!(geom(DType::BF16, (4, 256, 4096)), (4096, 1024, 1, 2));
        assert_eq!(geom(DType::F16, (4, 256, 4096)), (4096, 1024, 1, 2));
        assert_eq!(geom(DType::BF16, (4, 512, 4096)), (4096, 1024, 2, 2));
        assert_eq!(geom(DType::BF16, (2, 256, 4096)), (2048, 1024, 1, 2));
        assert_eq!(geom(DType::F32, (4, 256, 4096)), (1024, 4096, 1, 2));
        assert_eq!(geom(DType::BF16, (4, 5376, 4096)), (4096, 5376, 4, 1));
        assert_eq!(geom(DType::BF16, (8, 2048, 1024)), (2048, 2048, 8, 1));
    }

    /// `bwd_cfw` at W <= 4 on `bwd_cfw7` (7 resident blocks) where its grid's last wave is
    /// fuller: the Mamba-2 shape (5376 blocks: 5.09 waves at 8 blocks a multiprocessor, 5.82 at
    /// 7) takes it, at any batch and dtype, and so does a grid of 2200 blocks (2.08 / 2.38
    /// waves); grids of 2048 and 2000 blocks (1.94 / 2.22, 1.89 / 2.16 waves), W = 5, AMD and the
    /// small kernels' shapes do not.
    #[test]
    fn bwd_cfw7_choice() {
        let fam = |dt: DType, (b, d, l): (i64, i64, i64), w: i64, dev: &DeviceInfo| {
            let p = bwd_plan(inputs(dt, b, d, l, w, cf(b, d, l)));
            let v = bwd_launches_pt(&p, dev, 0x8000_0000, SmallBwd::ALL).unwrap();
            let k = params_of(&v[0]);
            (v[0].kernel.clone(), k.n_blocks, k.brows)
        };
        let dev = h100();
        assert_eq!(fam(DType::BF16, (4, 5376, 4096), 4, &dev), ("ccv1d_bwd_cfw7_bf16_w4".into(), 5376, 4));
        assert_eq!(fam(DType::F16, (1, 5376, 4096), 2, &dev), ("ccv1d_bwd_cfw7_f16_w2".into(), 5376, 1));
        assert_eq!(fam(DType::F32, (4, 5376, 4096), 4, &dev), ("ccv1d_bwd_cfw7_f32_w4".into(), 5376, 4));
        assert_eq!(fam(DType::BF16, (1, 1100, 8192), 3, &dev).0, "ccv1d_bwd_cfw7_bf16_w3");
        for (dt, shape, w) in [(DType::BF16, (8, 2048, 1024), 4), (DType::F32, (4, 256, 4096), 4), (DType::BF16, (4, 5376, 4096), 5), (DType::BF16, (1, 1000, 8192), 4)] {
            assert!(fam(dt, shape, w, &dev).0.starts_with("ccv1d_bwd_cfw_"), "{shape:?} {dt:?} W {w}");
        }
        assert!(fam(DType::BF16, (4, 5376, 4096), 4, &mi300()).0.starts_with("ccv1d_bwd_cfw_"));
        assert!(fam(DType::BF16, (4, 4096, 512), 4, &dev).0.starts_with("ccv1d_bwd_pt_"));
    }

    /// The channel-last backward of simple rows: `bwd_clw` for 16-bit x at W >= 2 with whole
    /// 16-byte vectors along D, else `bwd_cls` (or `bwd_cl` off the vector path); its geometry.
    #[test]
    fn bwd_clw_choice() {
        let family_on = |dt: DType, b: i64, d: i64, l: i64, w: i64, dpad: i64| {
            let p = bwd_plan(inputs(dt, b, d, l, w, [l * dpad, 1, dpad]));
            let v = bwd_launches_pt(&p, &h100(), 0x8000_0000, SmallBwd::NO_PE).unwrap();
            if v[0].kernel.contains("_clw_") {
                check_clw_geometry(&v[0], b, d, l);
            }
            v[0].kernel.trim_start_matches("ccv1d_bwd_").split('_').next().unwrap().to_string()
        };
        let family = |dt: DType, b: i64, d: i64, l: i64, w: i64| family_on(dt, b, d, l, w, d);
        for dt in [DType::F16, DType::BF16] {
            for w in 1..=8 {
                let want = if w >= 2 { "clw" } else { "cls" };
                assert_eq!(family(dt, 4, 5376, 4096, w), want, "{dt:?} W = {w}");
                assert_eq!(family(dt, 4, 256, 4096, w), want);
                assert_eq!(family(dt, 3, 72, 1000, w), want, "a partial channel tile");
            }
            // D a multiple of 4 but not of 8 (rows padded to whole vectors): bwd_cls's 4-channel
            // groups; padded rows of whole vectors: bwd_clw
            assert_eq!(family_on(dt, 4, 5380, 4096, 4, 5384), "cls");
            assert_eq!(family_on(dt, 4, 5376, 4096, 4, 5384), "clw");
        }
        assert_eq!(family(DType::F32, 4, 5376, 4096, 4), "cls");
        // chunks of 256 (from W = 7 on 512) where rows are that long and those make two waves
        // (H100: 2 x 132 x 5 blocks, 2 x 132 x 4 from W = 6), else the stream geometry's; the
        // ring: 2 slots under two waves, else 4 where a warp walks at least 64 tokens, else 3
        // (8x5376x128 and 5x3072x2048: gpu_bwd_clw's cases of 3 and 4)
        let rings = [
            (4, 5376, 4096, 4, 256, 4),
            (16, 5376, 512, 4, 256, 4),
            (5, 3072, 2048, 4, 256, 4),
            (4, 5376, 2048, 4, 256, 4),
            (1, 5376, 4096, 4, 256, 4),
            (8, 5376, 128, 4, 64, 3),
            (8, 5376, 256, 4, 128, 3),
            (4, 256, 4096, 4, 128, 2),
            (8, 2048, 1024, 4, 512, 2),
            (4, 5376, 4096, 6, 256, 4),
            (4, 5376, 4096, 8, 512, 4),
            (2, 5376, 4096, 7, 512, 4),
            (16, 5376, 512, 8, 512, 4),
            (1, 5376, 4096, 8, 704, 2),
            (8, 5376, 512, 7, 256, 4),
        ];
        for (b, d, l, w, chunk, ring) in rings {
            let p = bwd_plan(inputs(DType::BF16, b, d, l, w, cl(b, d, l)));
            let v = bwd_launches(&p, &h100(), 0x8000_0000).unwrap();
            check_clw_geometry(&v[0], b, d, l);
            let k = params_of(&v[0]);
            assert_eq!((k.chunk, k.rows_log2), (chunk, ring), "{b}x{d}x{l} W = {w}");
            assert_eq!(ring > 2, k.n_blocks >= 2 * 132 * clw_blocks_per_sm(w));
        }
        // W = 7 where 512-token chunks make less than two waves (8x2048x1024: 512 blocks): the
        // stream geometry's chunks
        let p = bwd_plan(inputs(DType::BF16, 8, 2048, 1024, 7, cl(8, 2048, 1024)));
        let v = bwd_launches(&p, &h100(), 0x8000_0000).unwrap();
        let want = cl_stream_geometry(8, 2048, 1024, ClFit { blocks_per_sm: 4, one_wave: None }, &h100()).unwrap();
        assert_eq!(params_of(&v[0]).chunk, want.chunk);
        // seq_idx: the general kernel
        let mut p = bwd_plan(inputs(DType::BF16, 4, 5376, 4096, 4, cl(4, 5376, 4096)));
        p.inp.seq_idx = Some(IdxView { addr: 0x7600_0000, stride: [4096, 1], elem_bytes: 4 });
        assert_eq!(bwd_launches(&p, &h100(), 0x8000_0000).unwrap()[0].kernel, "ccv1d_bwd_cl_bf16_w4");
    }

    #[test]
    fn bwd_pe_choice() {
        // (dtype, channel-last, b, d, l) -> (rows_log2, brows, block, blocks): 2^rl >= L tokens of
        // 2^(r - rl) >= B rows a channel, channels enough for a 64-thread block
        for (dt, lay_cl, b, d, l, rl, r, block, blocks) in [
            (DType::F32, false, 1, 32, 64, 6, 6, 64, 32),  // seeds' Tiny
            (DType::BF16, true, 1, 32, 64, 6, 6, 64, 32),
            (DType::F16, false, 2, 64, 256, 8, 9, 512, 64), // seeds' Small: 512 tokens a block
            (DType::BF16, true, 2, 64, 128, 7, 8, 256, 64), // 003's Small
            (DType::F32, true, 2, 12, 3, 2, 3, 64, 2),      // 8 channels of 8 (padded) tokens a block
            (DType::F16, false, 3, 5, 7, 3, 5, 64, 3),      // 3 rows padded to 4, L to 8
        ] {
            let st = if lay_cl { cl(b, d, l) } else { cf(b, d, l) };
            let p = bwd_plan(inputs(dt, b, d, l, 4, st));
            let v = bwd_launches(&p, &h100(), 0).unwrap();
            assert_eq!(v.len(), 1, "one launch: dweight/dbias stored by the block");
            assert_eq!(v[0].kernel, format!("ccv1d_bwd_pe_{}_w4", dt.name()));
            let k = params_of(&v[0]);
            assert_eq!((k.rows_log2, k.brows, v[0].block[0], k.n_blocks), (rl, r, block, blocks), "{dt:?} {b}x{d}x{l}");
            assert_eq!(v[0].grid, [blocks as u32, 1, 1]);
            assert_eq!((k.flags & F_DIRECT, k.flags & F_PE_TOKENS != 0), (F_DIRECT, !lay_cl));
            assert_eq!(bwd_workspace_bytes(&p, &h100()), 0);
        }
        // not taken: seq_idx, more than 512 padded tokens a channel, more than 2^15 elements
        let pe = |p: &BwdPlan| bwd_launches(p, &h100(), 0x8000_0000).unwrap()[0].kernel.contains("_pe_");
        let mut p = bwd_plan(inputs(DType::F32, 1, 32, 64, 4, cf(1, 32, 64)));
        p.inp.seq_idx = Some(IdxView { addr: 0x7600_0000, stride: [64, 1], elem_bytes: 4 });
        assert!(!pe(&p));
        assert!(!pe(&bwd_plan(inputs(DType::F32, 1, 4, 513, 4, cf(1, 4, 513)))));
        assert!(!pe(&bwd_plan(inputs(DType::F32, 3, 4, 171, 4, cf(3, 4, 171)))));
        assert!(pe(&bwd_plan(inputs(DType::F32, 1, 64, 512, 4, cf(1, 64, 512)))));
        assert!(!pe(&bwd_plan(inputs(DType::F32, 1, 65, 512, 4, cf(1, 65, 512)))));
        // padded rows off the vector path: taken
        assert!(pe(&bwd_plan(inputs(DType::BF16, 1, 32, 64, 4, [64 * 37, 1, 37]))));
    }

    #[test]
    fn bwd_launches_and_workspace() {
        for (lay, (b, d, l)) in [(0, (4, 5376, 4096)), (1, (8, 2048, 1024)), (0, (2, 3, 7)), (1, (1, 70, 1)), (0, (1, 32, 64))] {
            for w in [1, 4, 8] {
                let st = if lay == 0 { cf(b, d, l) } else { cl(b, d, l) };
                let mut p = bwd_plan(inputs(DType::BF16, b, d, l, w, st));
                p.inp.initial_states = Some(view(0x7400_0000, DType::BF16, [d * 8, 8, 1]));
                p.dinitial_states = Some(view(0x7500_0000, DType::BF16, [d * 8, 8, 1]));
                let dev = if lay == 0 { h100() } else { mi300() };
                let bytes = bwd_workspace_bytes_pt(&p, &dev, SmallBwd::NO_PE);
                let v = bwd_launches_pt(&p, &dev, 0x8000_0000, SmallBwd::NO_PE).unwrap();
                let names: Vec<_> = v.iter().map(|l| l.kernel.clone()).collect();
                // channel-last: the streaming kernel when every tensor is on the vector path
                // channel-first: warp spans for rows of whole vectors and at least one span
                // (32 lanes x 2 vectors x 8 = 512 tokens, bf16); else rows shorter than half a
                // tile: several rows per block
                // tiny channel-last problems of whole vectors: one slab kernel
                // small channel-first problems of whole vectors: a warp per channel (bwd_pt)
                let slab = lay == 1 && d % 8 == 0 && b * l <= NT_SLAB as i64;
                let pt = lay == 0 && l % 8 == 0 && b * l <= BWD_PT_TOKENS_BF16;
                let warp = !pt && lay == 0 && l % 8 == 0 && l >= 512;
                let short = !pt && lay == 0 && params_of(&v[0]).rows_log2 > 0;
                assert_eq!(short, lay == 0 && !pt && !warp && l * 2 <= tile_tokens(Layout::ChannelFirst, DType::BF16));
                let tag = if slab {
                    "slab"
                } else if pt {
                    "pt"
                } else if lay == 0 {
                    // (4x5376x4096 at W <= 4: bwd_cfw7, bwd_cfw7_choice)
                    if warp && w <= 4 { "cfw7" } else if warp { "cfw" } else if short { "cfs" } else { "cf" }
                } else if d % 8 == 0 {
                    if w >= 2 { "clw" } else { "cls" }
                } else {
                    "cl"
                };
                let grouped = tag == "cf" || tag.starts_with("cfw");
                // one partial row (batch 1 in one chunk, or every batch row in one bwd_cf /
                // bwd_cfw block, or in channel-major bwd_cfs blocks when the batch is a power of
                // two up to 2^rows_log2): dweight/dbias stored by the main kernel, no reduce
                let km = params_of(&v[0]);
                let direct = km.n_partials == 1;
                let whole_short = short && b > 1 && b & (b - 1) == 0 && b <= 1 << km.rows_log2;
                assert_eq!(direct, b == 1 || (grouped && km.brows as i64 == b && km.n_chunks == 1) || whole_short || slab || pt);
                // (bwd_pt: brows = log2 of a thread's vectors, 0 at these sizes)
                assert!(if pt { km.brows == 0 } else { km.brows >= 1 && (km.brows == 1 || grouped || whole_short || slab) });
                assert_eq!(whole_short, short && km.brows > 1);
                let mut want = vec![format!("ccv1d_bwd_{tag}_bf16_w{w}")];
                if !direct {
                    want.push("ccv1d_bwd_reduce".to_string());
                }
                if w > 1 {
                    want.push("ccv1d_bwd_states_bf16".to_string());
                }
                assert_eq!(names, want);
                for l in &v {
                    check_grid(l);
                }
                assert_eq!(km.n_partials, if pt { 1 } else { ceil_div(b, km.brows as i64) * km.n_chunks });
                if short {
                    assert_eq!(km.n_blocks, ceil_div(b * d, 1 << km.rows_log2) * km.n_chunks);
                } else if grouped {
                    assert_eq!(km.n_blocks, ceil_div(b, km.brows as i64) * d * km.n_chunks);
                }
                if direct {
                    assert_eq!((bytes, km.ws, km.flags & F_DIRECT), (0, 0, F_DIRECT));
                    assert_eq!(bwd_launches_pt(&p, &dev, 0, SmallBwd::NO_PE).unwrap()[0].params, v[0].params, "no workspace needed");
                    continue;
                }
                assert_eq!(km.flags & F_DIRECT, 0);
                assert_eq!(bytes, (km.n_partials * d * (w + 1) * 4) as usize);
                assert_eq!(km.ws, 0x8000_0000);
                let kr = params_of(&v[1]);
                assert_eq!(v[1].block[0], 32 * reduce_lanes(km.n_partials));
                assert!(kr.n_blocks * 32 >= d * (w + 1) && (kr.n_blocks - 1) * 32 < d * (w + 1));
                assert_eq!(kr.n_partials, km.n_partials);
                assert_eq!(kr.flags & F_DBIAS, F_DBIAS);
                assert_eq!((kr.dw_dtype, kr.db_dtype), (DT_F32, DT_BF16));
                // deterministic: same inputs → same geometry and bytes
                assert_eq!(bwd_workspace_bytes(&p, &dev), bytes);
                assert_eq!(bwd_launches(&p, &dev, 0x8000_0000).unwrap()[0].params, v[0].params);
            }
        }
        // bwd_cfw row groups (H100, 132 SMs, 8 blocks per SM at W=4; 4 warps, a warp span 512
        // bf16 / 256 f32 tokens): 4x5376x4096 bf16 W=4, 8 spans per row (2 steps): (waves,
        // steps + 1) = (21, 3), (11, 5), (6, 9) for 1, 2, 4 rows → 4, every row of a channel in
        // one block (direct); f32, 16 spans: (21, 5), (11, 9), (6, 17) → 2 at 8 blocks, but its
        // last wave is fuller on bwd_cfw7 (7 blocks: (24, 5), (12, 9), (6, 17) → 4); 8x600x2048 (ccv1d
        // test rows/grouped-bwd): 3 (groups of 3, 3, 2 rows); 8x2048x1024 bf16, 2 spans per row:
        // (16, 2), (8, 2), (4, 3), (2, 5) → 8; 4x4096x512: one span per row → 4. Long rows
        // (several chunks) stay at one row; so do those of bwd_cf (W = 8). bwd_cfs (rows shorter
        // than a span) takes every row of a channel when the batch is a power of two up to
        // 2^rows_log2 (4x64x64: 4; 3x64x64: 1). Seeds' Small 2x64x256: f32 on warp spans, one
        // span per row, 1 or 2 rows tie at (1, 2) → 2 (no reduce launch); bf16 bwd_cfs → 2
        for (dt, b, d, l, w, rows) in [
            (DType::BF16, 4, 5376, 4096, 4, 4),
            (DType::F32, 4, 5376, 4096, 4, 4),
            (DType::BF16, 4, 256, 4096, 4, 1),
            (DType::BF16, 8, 600, 2048, 4, 3),
            (DType::F32, 8, 600, 2048, 4, 3),
            (DType::BF16, 8, 2048, 1024, 4, 8),
            (DType::BF16, 4, 4096, 512, 4, 4),
            (DType::BF16, 2, 64, 1 << 20, 4, 1),
            (DType::BF16, 4, 64, 64, 4, 4),
            (DType::BF16, 3, 64, 64, 4, 1),
            (DType::F32, 2, 64, 256, 4, 2),
            (DType::BF16, 2, 64, 256, 4, 2),
            (DType::BF16, 4, 5376, 4096, 8, 4),
        ] {
            // (the small ones go to bwd_pt by default: the tiled kernels' groups here)
            let p = bwd_plan(inputs(dt, b, d, l, w, cf(b, d, l)));
            let v = bwd_launches_pt(&p, &h100(), 0x8000_0000, SmallBwd::NONE).unwrap();
            let km = params_of(&v[0]);
            assert_eq!(km.brows as i64, rows, "{dt:?} {b}x{d}x{l} W={w}");
            assert_eq!(v.len() == 1, km.n_partials == 1 && rows == b, "{dt:?} {b}x{d}x{l} W={w}: reduce launch iff partial rows");
        }
        // seq_idx or cu_seqlens keep channel-last on the tile kernel
        let mut p = bwd_plan(inputs(DType::BF16, 8, 2048, 1024, 4, cl(8, 2048, 1024)));
        p.inp.seq_idx = Some(IdxView { addr: 0x6000_0000, stride: [1024, 1], elem_bytes: 4 });
        assert_eq!(bwd_launches(&p, &mi300(), 0x8000_0000).unwrap()[0].kernel, "ccv1d_bwd_cl_bf16_w4");
        // L = 0: no main kernel, dweight/dbias zeroed by the reduce kernel, dinit = dfinal
        let mut p = bwd_plan(inputs(DType::F32, 2, 16, 0, 4, cf(2, 16, 0)));
        p.inp.initial_states = Some(view(0x7400_0000, DType::F32, [16 * 3, 3, 1]));
        p.dinitial_states = Some(view(0x7500_0000, DType::F32, [16 * 3, 3, 1]));
        assert_eq!(bwd_workspace_bytes_pt(&p, &h100(), SmallBwd::NO_PE), 0);
        let v = bwd_launches(&p, &h100(), 0).unwrap();
        assert_eq!(v.iter().map(|l| l.kernel.as_str()).collect::<Vec<_>>(), ["ccv1d_bwd_reduce", "ccv1d_bwd_states_f32"]);
        assert_eq!(params_of(&v[0]).n_partials, 0);
        // the reduce launch overlaps the main kernel's end (sm_90+ NVIDIA) only when one runs
        // before it; no other launch does
        assert!(v.iter().all(|l| !l.overlap_previous));
        for (dev, want) in [(h100(), true), (mi300(), false), (DeviceInfo { arch: 80, ..h100() }, false)] {
            let v = bwd_launches(&bwd_plan(inputs(DType::BF16, 4, 256, 4096, 4, cl(4, 256, 4096))), &dev, 0x8000_0000).unwrap();
            let flags: Vec<_> = v.iter().map(|l| (l.kernel.as_str(), l.overlap_previous)).collect();
            assert_eq!(flags[1], ("ccv1d_bwd_reduce", want), "{flags:?}");
            assert!(!flags[0].1);
        }
        let v = bwd_launches(&bwd_plan(inputs(DType::BF16, 4, 256, 4096, 4, cf(4, 256, 4096))), &h100(), 0x8000_0000).unwrap();
        assert_eq!((v[0].kernel.as_str(), v[1].kernel.as_str(), v[1].overlap_previous), ("ccv1d_bwd_cfw_bf16_w4", "ccv1d_bwd_reduce", false));
        // a workspace is required when there are partials
        let p = bwd_plan(inputs(DType::F32, 3, 16, 10, 4, cf(3, 16, 10)));
        assert_eq!(bwd_launches_pt(&p, &h100(), 0, SmallBwd::NONE).unwrap_err().status, CCV1D_ERR_WORKSPACE);
    }

    #[test]
    fn update_launch() {
        let x = view(0x1000, DType::F16, [64 * 2, 2, 1]);
        let p = UpdatePlan {
            backend: Backend::Gpu,
            stream: 0,
            batch: 5,
            dim: 300,
            seqlen: 2,
            width: 4,
            state_len: 3,
            num_slots: 9,
            act: Act::None,
            x,
            weight: view(0x2000, DType::BF16, [4, 1, 0]),
            bias: None,
            out: x,
            conv_state: view(0x3000, DType::F16, [300 * 3, 3, 1]),
            cache_seqlens: Some(IdxView { addr: 0x4000, stride: [1, 0], elem_bytes: 4 }),
            conv_state_indices: Some(IdxView { addr: 0x5000, stride: [1, 0], elem_bytes: 4 }),
        };
        let v = update_launches(&p, &h100()).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].kernel, "ccv1d_update_f16_w4");
        check_grid(&v[0]);
        let k = params_of(&v[0]);
        assert_eq!((k.n_ctiles, k.n_blocks, k.state_len, k.num_slots), (3, 15, 3, 9));
        assert_eq!(k.chunk, 1, "a small grid keeps one batch row per thread");
        assert_eq!(v[0].kernel, "ccv1d_update_f16_w4", "two new tokens and a circular buffer: the general kernel");
        // One token per row and contiguous slots: the staged step. Decode at B = 256, D = 5376 on
        // 132 SMs: 42 channel tiles, 1056 resident blocks -> 25 row groups -> 11 rows, capped at 8.
        let big = UpdatePlan { batch: 256, dim: 5376, seqlen: 1, num_slots: 256, cache_seqlens: None, conv_state_indices: None, ..p };
        let big = UpdatePlan { conv_state: view(0x3000, DType::F16, [5376 * 3, 3, 1]), ..big };
        let lb = &update_launches(&big, &h100()).unwrap()[0];
        assert_eq!(lb.kernel, "ccv1d_step_f16_w4");
        check_grid(lb);
        let kb = params_of(lb);
        assert_eq!((kb.n_ctiles, kb.chunk, kb.n_blocks), (42, 8, 32 * 42));
        assert_ne!(kb.flags & F_VEC, 0);
        // a slot stride that is not a 16-byte multiple: staged, element copies
        let odd = UpdatePlan { conv_state: view(0x3000, DType::F16, [5376 * 3 + 1, 3, 1]), ..big };
        let lo = &update_launches(&odd, &h100()).unwrap()[0];
        assert_eq!((lo.kernel.as_str(), params_of(lo).flags & F_VEC), ("ccv1d_step_f16_w4", 0));
        // f32, state_len 24: one 128-channel row is 12 KiB -> 1 row per block; 25 would not fit
        let f32x = view(0x1000, DType::F32, [5376, 1, 1]);
        let wide = UpdatePlan { x: f32x, out: f32x, state_len: 24, conv_state: view(0x3000, DType::F32, [5376 * 24, 24, 1]), ..big };
        let lw = &update_launches(&wide, &h100()).unwrap()[0];
        assert_eq!((lw.kernel.as_str(), params_of(lw).chunk), ("ccv1d_step_f32_w4", 1));
        let wider = UpdatePlan { state_len: 25, conv_state: view(0x3000, DType::F32, [5376 * 25, 25, 1]), ..wide };
        assert_eq!(update_launches(&wider, &h100()).unwrap()[0].kernel, "ccv1d_update_f32_w4");
        // x and out with unit channel stride: the register step (state_len W-1 or W, aligned)
        let xr = view(0x1000, DType::F16, [5376, 1, 1]);
        let reg = UpdatePlan { x: xr, out: xr, ..big };
        let lr = &update_launches(&reg, &h100()).unwrap()[0];
        assert_eq!(lr.kernel, "ccv1d_stepv_f16_w4");
        check_grid(lr);
        let kr = params_of(lr);
        // 256 rows x 11 tiles over a wave of 132 x 16 blocks: 2 rows per block
        assert_eq!((kr.n_ctiles, kr.chunk, kr.n_blocks, kr.flags & F_STEP_PM), (11, 2, 128 * 11, 0));
        assert_eq!(lr.grid, [11, 128, 1]); // (channel tiles, row blocks): the kernel does not divide
        // weights as contiguous aligned rows, no bias: vector weight loads; a padded weight row,
        // a strided bias or a misaligned weight: scalar loads
        assert_ne!(kr.flags & F_W_ROWS, 0);
        let flags_with = |weight: View, bias: Option<View>| params_of(&update_launches(&UpdatePlan { weight, bias, ..reg }, &h100()).unwrap()[0]).flags;
        assert_ne!(flags_with(view(0x2000, DType::BF16, [4, 1, 0]), Some(view(0x2100, DType::F32, [1, 0, 0]))) & F_W_ROWS, 0);
        assert_eq!(flags_with(view(0x2000, DType::BF16, [5, 1, 0]), None) & F_W_ROWS, 0);
        assert_eq!(flags_with(view(0x2000, DType::BF16, [4, 1, 0]), Some(view(0x2100, DType::F32, [2, 0, 0]))) & F_W_ROWS, 0);
        assert_eq!(flags_with(view(0x2004, DType::F32, [4, 1, 0]), None) & F_W_ROWS, 0);
        // past the 2-D grid's 65535 rows: the staged step
        let tall = UpdatePlan { batch: 65536, num_slots: 65536, ..reg };
        assert_eq!(update_launches(&tall, &h100()).unwrap()[0].kernel, "ccv1d_step_f16_w4");
        let reg_pm = UpdatePlan { conv_state: view(0x3000, DType::F16, [5376 * 4, 1, 5376]), state_len: 4, ..reg };
        let lp = &update_launches(&reg_pm, &h100()).unwrap()[0];
        assert_eq!((lp.kernel.as_str(), params_of(lp).flags & F_STEP_PM), ("ccv1d_stepv_f16_w4", F_STEP_PM));
        let f32v = view(0x1000, DType::F32, [5376, 1, 1]);
        let reg32 = UpdatePlan { x: f32v, out: f32v, conv_state: view(0x3000, DType::F32, [5376 * 3, 3, 1]), ..reg };
        assert_eq!(update_launches(&reg32, &h100()).unwrap()[0].kernel, "ccv1d_step_f32_w4", "f32: the staged step");
        let reg_small = UpdatePlan { batch: 8, ..reg };
        assert_eq!(update_launches(&reg_small, &h100()).unwrap()[0].kernel, "ccv1d_update_f16_w4", "one wave: update");
        for other in [
            UpdatePlan { state_len: 5, conv_state: view(0x3000, DType::F16, [5376 * 5, 5, 1]), ..reg }, // state_len W+1
            UpdatePlan { conv_state: view(0x3004, DType::F16, [5376 * 3, 3, 1]), ..reg },                // 4-byte aligned state
            UpdatePlan { dim: 5374, ..reg },                                                              // dim % 4 != 0
        ] {
            assert_eq!(update_launches(&other, &h100()).unwrap()[0].kernel, "ccv1d_step_f16_w4");
        }
        // a grid of one-row blocks that fits at once (B = 25 x 42 tiles <= 1056): the general kernel
        let b25 = UpdatePlan { batch: 25, ..big };
        assert_eq!(update_launches(&b25, &h100()).unwrap()[0].kernel, "ccv1d_update_f16_w4");
        let b26 = UpdatePlan { batch: 26, ..big };
        assert_eq!(params_of(&update_launches(&b26, &h100()).unwrap()[0]).chunk, 2);
        // position-major slots ([state_len, D], channels contiguous): the step kernel
        let pmv = UpdatePlan { conv_state: view(0x3000, DType::F16, [5376 * 3, 1, 5376]), ..big };
        let lp = &update_launches(&pmv, &h100()).unwrap()[0];
        assert_eq!((lp.kernel.as_str(), params_of(lp).flags & (F_STEP_PM | F_VEC)), ("ccv1d_step_f16_w4", F_STEP_PM | F_VEC));
        let pm_odd = UpdatePlan { conv_state: view(0x3000, DType::F16, [5377 * 3, 1, 5377]), ..big };
        assert_eq!(params_of(&update_launches(&pm_odd, &h100()).unwrap()[0]).flags & (F_STEP_PM | F_VEC), F_STEP_PM);
        // a strided state (channel stride != state_len): the general kernel
        let strided = UpdatePlan { conv_state: view(0x3000, DType::F16, [5376 * 4, 4, 1]), ..big };
        assert_eq!(update_launches(&strided, &h100()).unwrap()[0].kernel, "ccv1d_update_f16_w4");
        assert_eq!(k.flags, F_STATES_ANY | F_CACHE_SEQLENS | F_STATE_IDX);
        assert_eq!(k.x, k.out);
        assert_eq!(k.w_dtype, DT_BF16);
    }

    #[test]
    fn names_are_the_instantiated_set() {
        let names = all_kernel_names();
        assert_eq!(names.len(), 3 * (19 * 8 + 2 + 4) + 2);
        let set: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(set.len(), names.len());
        assert!(names.contains(&"ccv1d_fwd_cl_bf16_w4".to_string()));
        assert!(names.contains(&"ccv1d_bwd_cls_f32_w8".to_string()));
        assert!(names.contains(&"ccv1d_bwd_clw_f16_w3".to_string()));
        assert!(names.contains(&"ccv1d_fwd_clw_bf16_w8".to_string()));
        assert!(names.contains(&"ccv1d_bwd_cfw_bf16_w6".to_string()));
    }
}
