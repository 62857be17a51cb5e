//! Kernel selection and launch geometry: pure Rust, no driver calls.
//!
//! Fills the one by-value kernel argument (`KParams`, a `#[repr(C)]` mirror of `hip/kparams.h`),
//! picks the kernel names (built from the dispatch keys exactly as `hip/instances.h` builds them)
//! and the grid/block shapes from a validated plan and the device facts. The driver layer runs the
//! returned launches in order on the caller's stream.
//!
//! Kernels (see `hip/*.hip`):
//! - `ccv1d_fwd_{cf,cfs,cfw,cl,cl11,clw,pt}_{dt}_w{W}`: forward, channel-first tiles (`cfs`: short
//!   rows, several per block; `cfw`: simple rows on the vector path in warp spans, no shared
//!   memory; `pt`: small problems, one output vector per thread) / channel-last streaming (`cl`: 4
//!   channels x a run of tokens per thread; `cl11`: the same with 11-token bursts, 16-bit W <= 4
//!   only; `clw`: simple rows fed by per-warp rings of 16-byte copies, two channels a thread);
//! - `ccv1d_fwd_states_{dt}`: final_states (after the main kernel: safe when the pool is both
//!   initial_states and final_states);
//! - `ccv1d_bwd_{cf,cfs,cfw,cfw7,cfw2,cfwl,cfwx,cfw7x,cl,cls,clw}_{dt}_w{W}`: dx and per-row, per-chunk fp32
//!   dweight/dbias partials into the workspace (`cfs`: short channel-first rows, several per
//!   block; `cfw`: channel-first simple rows on the vector path in warp spans, no shared memory;
//!   `cfw7`: the same at 7 resident blocks, W <= 4 only, for grids whose last wave is fuller;
//!   `cfw2`: the same in 256-thread blocks, W <= 4 only (`bwd_cfw2` says where);
//!   `cfwl`: the same in spans of 4 vectors a lane at fewer resident blocks (`bwd_cfwl` says where);
//!   `cfwx` / `cfw7x`: `cfw` / `cfw7` for rows with state tensors or state_indices; `cls`:
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

mod bwd;
mod fwd;
mod geometry;
mod update;

pub use bwd::{bwd_launches, bwd_workspace_bytes};
pub use fwd::fwd_launches;
pub use geometry::{cl_stream_geometry, main_geometry, short_rows_log2, tile_tokens, ClFit, MainGeom};
pub use update::update_launches;
#[cfg(test)]
use bwd::*; // (the tests and gputest reach bwd's helpers and `_pt` variants through `super::*`)
use fwd::*;
use geometry::*;

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
pub const F_CLW_HALO: i32 = 1 << 16;
pub const F_W_ROWS: i32 = 1 << 17;
pub const F_PE_TOKENS: i32 = 1 << 18;
pub const F_STEP_RUN: i32 = 1 << 19;

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
        for fam in ["fwd_cf", "fwd_cfs", "fwd_cfw", "fwd_cl", "fwd_clw", "fwd_pt", "fwd_pe", "bwd_cf", "bwd_cfs", "bwd_cfw", "bwd_cfwl", "bwd_cl", "bwd_cls", "bwd_clw", "bwd_slab", "bwd_pt", "bwd_pe", "update", "step", "stepv"] {
            for w in 1..=8 {
                v.push(format!("ccv1d_{fam}_{dt}_w{w}"));
            }
        }
        v.push(format!("ccv1d_fwd_states_{dt}"));
        v.push(format!("ccv1d_bwd_states_{dt}"));
        v.extend((1..=8).map(|w| format!("ccv1d_bwd_cfwx_{dt}_w{w}")));
        for fam in ["bwd_cfw7", "bwd_cfw2", "bwd_cfw7x"] {
            v.extend((1..=4).map(|w| format!("ccv1d_{fam}_{dt}_w{w}")));
        }
        if dt != "f32" {
            v.extend((1..=4).map(|w| format!("ccv1d_fwd_cl11_{dt}_w{w}")));
        }
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

/// The weight, bias and activation fields every kernel reads (f32 defaults for the dtypes a
/// call does not set); the flags they imply (F_BIAS, F_SILU).
fn weight_params(k: &mut KParams, weight: &View, bias: Option<&View>, act: Act) -> i32 {
    k.weight = weight.addr as u64;
    k.w_s = [weight.stride[0], weight.stride[1]];
    k.w_dtype = weight.dtype.code();
    k.b_dtype = DT_F32;
    k.dw_dtype = DT_F32;
    k.db_dtype = DT_F32;
    k.hi_bytes = 4;
    let mut f = 0;
    if let Some(b) = bias {
        k.bias = b.addr as u64;
        k.bias_s = b.stride[0];
        k.b_dtype = b.dtype.code();
        f |= F_BIAS;
    }
    if act == Act::Silu {
        f |= F_SILU;
    }
    f
}

fn conv_params(inp: &ConvInputs) -> KParams {
    let mut k = KParams::default();
    set_view3(&mut k.x, &mut k.x_s, &inp.x);
    let mut f = weight_params(&mut k, &inp.weight, inp.bias.as_ref(), inp.act);
    k.brows = 1;
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
    /// `bwd_clw` wherever it can run; 2 = as 1, with `bwd_clw`'s halo (`clw_halo`) on every grid
    /// at the widths it is compiled for (`CCV_CLW_HALO_MAXW`).
    ClBwd,
    /// `CCV1D_CL_FWD`: 0 / 1 = the channel-last forward of simple rows on `fwd_cl` / on
    /// `fwd_clw` wherever it can run; 2 = as 1, with `fwd_clw`'s halo (`fwd_clw_halo`) on every grid.
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
    /// `CCV1D_CF_STEPS`: most steps a channel-first block walks (`cf_max_steps`).
    CfSteps,
    /// `CCV1D_CFW2`: 0 / 1 = `bwd_cfw` at W <= 4 never / wherever it can run on `bwd_cfw2`.
    Cfw2,
    /// `CCV1D_CFWL`: 0 / 1 = `bwd_cfw` never / wherever it can run on `bwd_cfwl`.
    Cfwl,
    /// `CCV1D_STEP_RUN`: 0 = `stepv`'s channel-major slots never in 16-byte runs (`StepV::run`).
    StepRun,
    /// `CCV1D_STEPV`: 0 / 1 = one-token decode updates never / wherever they fit on `stepv`.
    Stepv,
}

fn knob(k: Knob) -> Option<i64> {
    use std::sync::OnceLock;
    static VALUES: [OnceLock<Option<i64>>; 20] = [const { OnceLock::new() }; 20];
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
        Knob::CfSteps => "CCV1D_CF_STEPS",
        Knob::Cfw2 => "CCV1D_CFW2",
        Knob::Cfwl => "CCV1D_CFWL",
        Knob::StepRun => "CCV1D_STEP_RUN",
        Knob::Stepv => "CCV1D_STEPV",
    };
    let least = if matches!(k, Knob::CfWarp | Knob::FwdPt | Knob::ClBwd | Knob::ClFwd | Knob::BwdPt | Knob::FwdPe | Knob::BwdPe | Knob::Cfw7 | Knob::Overlap | Knob::Cfw2 | Knob::Cfwl | Knob::StepRun | Knob::Stepv) { 0 } else { 1 };
    *VALUES[k as usize].get_or_init(|| std::env::var(name).ok()?.trim().parse().ok().filter(|&v: &i64| v >= least))
}

// ------------------------------------------------------------------ tests

/// On-GPU checks of every kernel against an f64 reference (needs an NVIDIA GPU; `--ignored`).
#[cfg(all(test, ccv1d_cuda))]
mod gputest;

#[cfg(test)]
mod tests;
#[cfg(all(test, ccv1d_cuda))]
use tests::params_of;
