//! Launch geometry shared by the forward and backward: tile tokens, main-kernel and streaming
//! channel-last chunks, channel-first row groups and short rows, warp spans.

use super::*;

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
    let most = if layout == Layout::ChannelFirst && tuned.is_none() { cf_max_steps() } else { MAX_TILES_PER_BLOCK };
    let mut per_block = tuned.unwrap_or(total / target).clamp(1, most.min(tiles_per_row));
    if tuned.is_none() && per_block == most && most < tiles_per_row {
        // cut at the cap: equal chunks, not `most` tiles and a short last one
        per_block = ceil_div(tiles_per_row, ceil_div(tiles_per_row, most));
    }
    let chunk = per_block * tile;
    let n_chunks = ceil_div(seqlen.max(1), chunk);
    let n_blocks = rows.saturating_mul(n_chunks);
    if n_blocks > MAX_BLOCKS {
        bail!(CCV1D_ERR_OVERFLOW, "problem too large for one launch ({n_blocks} blocks)");
    }
    Ok(MainGeom { layout, chunk, n_chunks, n_ctiles, n_blocks, brows: 1 })
}

/// A channel-first forward's chunks: `main_geometry`'s count of chunks a row, raised on `fwd_cfw`
/// (`warp`) and at 16-bit W >= 6 to chunks of at most `fwd_max_steps` tiles, elsewhere at W <=
/// FWD_CHUNK_MAX_W to at most FWD_CHUNK_TILES, each of ceil(tiles / count) tiles; f32 at W >= 6
/// on the tile kernel in chunks of FWD_WIDE_F32_TILES and a shorter last one. `CCV1D_CF_TILES`
/// is taken as given. The backward keeps `main_geometry`'s chunks: its own rules start from
/// them (bf16 1x2048x16384 in 4-tile chunks 78.2 against 75.2 µs).
/// - Equal: where `main_geometry`'s tiles a block leave a short last chunk (16 tiles in 15 + 1, 8
///   in 7 + 1): as many blocks, the longest of them shorter. H100 (docs/perf.md, session 30;
///   SiLU, µs, `main_geometry`'s chunks / equal ones): f32 1x2048x16384 99.2-99.3 / 97.2-97.3,
///   2x1024x16384 99.2-99.6 / 97.0-97.1, 1x1024x32768 98.8-99.0 / 97.7-97.8, 1x1536x8192 38.4 /
///   37.8-37.9; bf16 1x2048x16384 51.2 / 49.8, 1x1536x16384 39.2 / 38.4.
/// - At most 2 tiles (8 KB of a row: 2048 f32 or 4096 16-bit tokens): chunks of 4-16 tiles ran
///   1.0-3.9 % slower on the H100 (docs/perf.md, session 39; SiLU, µs, whole rows / 2-tile chunks):
///   f32 4x5376x4096 242.0 / 238.7 (no activation 241.8 / 238.5, W = 2 241.9 / 238.4, W = 3 241.8
///   / 238.5, W = 5 241.9 / 238.5), 2x5376x4096 122.9 / 121.3, 1x5376x4096 63.9 / 62.6,
///   4x5376x8192 485.6 / 474.3, 4x2048x4096 94.7 / 93.3, 8x2048x4096 185.3 / 182.6, 4x4096x4096
///   185.4 / 182.8, 16x1024x4096 185.4 / 182.4, 4x1024x4096 49.6 / 48.5, 2x2048x8192 96.3 / 93.4,
///   1x2048x16384 96.4 / 93.7, 4x2048x5000 117.4 / 113.8; bf16 4x5376x8192 242.4 / 239.8,
///   2x5376x8192 123.4 / 122.1, 2x2048x16384 97.8 / 94.1, 1x2048x16384 49.7 / 49.2; f16
///   4x2048x8192 95.1 / 93.8. f32 at W = 6-8 lost (241.0 / 243.1, W = 8 241.1 / 243.6), and so
///   did 1-tile 16-bit chunks (bf16 4x5376x4096 122.0 / 129.3).
/// - W >= 6 (docs/perf.md, session 40; SiLU, µs, the chunks before / now): f32 in 3-tile chunks,
///   4x5376x8192 483.4 / 469.4, 4x2048x12288 282.4 / 272.3, 4x2048x6144 141.1 / 138.3, 2x4096x5120
///   117.9 / 115.9, 2x2048x16384 191.5 / 183.9, 4x5376x4096 241.0 / 240.9 (3 + 1; 2 + 2 took
///   243.0, so the chunks are not evened); 16-bit on `fwd_cfw` at most 4 steps a block
///   (`fwd_max_steps`: chunks and rows a block), bf16 2x2048x16384 W = 6 / 7 106.3 / 94.8, 110.8 /
///   94.9, 4x2048x8192 W = 7 110.8 / 94.8, 4x5376x8192 W = 8 244.6 / 242.3.
pub fn fwd_cf_chunks(g: MainGeom, dt: DType, width: i64, warp: bool, batch: i64, dim: i64, seqlen: i64) -> MainGeom {
    let tile = tile_tokens(Layout::ChannelFirst, dt);
    if g.layout != Layout::ChannelFirst || knob(Knob::CfTiles).is_some() {
        return g;
    }
    let tiles = ceil_div(seqlen.max(1), tile);
    let per_block = if !warp && width > FWD_CHUNK_MAX_W && dt == DType::F32 {
        FWD_WIDE_F32_TILES.min(fwd_max_steps(width)).min(tiles)
    } else {
        let most = if warp || width > FWD_CHUNK_MAX_W { fwd_max_steps(width) } else { FWD_CHUNK_TILES };
        ceil_div(tiles, g.n_chunks.max(ceil_div(tiles, most)))
    };
    let chunk = per_block * tile;
    let n_chunks = ceil_div(seqlen.max(1), chunk);
    MainGeom { chunk, n_chunks, n_blocks: batch.saturating_mul(dim).saturating_mul(n_chunks), ..g }
}
pub const FWD_CHUNK_TILES: i64 = 2;
pub const FWD_CHUNK_MAX_W: i64 = 5;
pub const FWD_WIDE_F32_TILES: i64 = 3;

/// Most steps a forward block walks: FWD_NARROW_MAX_STEPS at W <= FWD_NARROW_MAX_W (one tile of
/// one row, or 4 / spans rows of one chunk: `fwd_one_step`), `cf_max_steps` at W = 5 and
/// FWD_WIDE_MAX_STEPS at W >= 6 (the knob `CCV1D_CF_STEPS` sets all three).
pub(super) fn fwd_max_steps(width: i64) -> i64 {
    let most = match width {
        ..=FWD_NARROW_MAX_W => FWD_NARROW_MAX_STEPS,
        ..=FWD_CHUNK_MAX_W => CF_MAX_STEPS,
        _ => FWD_WIDE_MAX_STEPS,
    };
    steps_or_knob(most)
}
pub const FWD_WIDE_MAX_STEPS: i64 = 4;
pub const FWD_NARROW_MAX_STEPS: i64 = 1;
pub const FWD_NARROW_MAX_W: i64 = 4;

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
pub(super) fn cl_fit(backward: bool, dt: DType, width: i64) -> ClFit {
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
/// - 16-bit at W <= 4 in chunks of 88 tokens on `fwd_cl11` (one 11-token burst a lane), up to
///   FWD_CL_LONG_WAVES waves of them (session 33, bf16 SiLU, µs, against the rule below): H100
///   4x256x4096 (0.95 waves instead of 1.3) 8.9 -> 8.7-8.8 (no activation 8.2 -> 7.8-7.9),
///   4x4096x512 14.9 -> 14.8, 1x2048x4096 14.9 -> 14.6; H200 8.4 -> 7.5-7.7, 13.7-13.8 -> 12.8,
///   13.6-13.7 -> 12.5. On bigger grids 88 lost on the H200 (4x5376x4096 95.1 -> 98.3,
///   8x2048x1024 21.6 -> 22.0; H100 122.0 -> 120.6, 26.1 -> 26.2), and 176 (two bursts a lane)
///   lost on the H100 (125.8).
/// - Past that, `fwd_cl`'s burst walk (fwd_cl.hip) in chunks of 64 tokens (one 8-token step a
///   lane) up to FWD_CL_FINE_WAVES waves of them, else 128: session 27, bf16 SiLU, 64 against
///   the chunks of before (128 from two waves on, else one wave): 4x256x2048 5.5 / 5.7,
///   1x256x4096 4.1 / 4.3; 1x5376x4096 and 8x5376x512 (6.8 waves) 33.3-33.4 / 33.5-33.6,
///   8x2048x1024 (5.2 waves) 26.1 / 26.1, but 26.3-26.5 / 25.9-26.0 in the full bench;
///   2x5376x4096 (13.6 waves) 63.6 / 63.0, 4x5376x4096 124.0 / 121.9 (128 had beaten the
///   one-wave chunks there in session 14: 122.9 against 128.2). W >= 5 keeps its chunks (W = 5
///   139.3 in chunks of 128 against 136.9).
/// The `CCV1D_CL_TILES` / `CCV1D_CL_CHUNK` knobs set the chunk instead.
pub(super) fn fwd_cl_geometry(batch: i64, dim: i64, seqlen: i64, dt: DType, width: i64, dev: &DeviceInfo) -> Result<MainGeom> {
    let fit = cl_fit(false, dt, width);
    let mut g = cl_stream_geometry(batch, dim, seqlen, fit, dev)?;
    let tuned = knob(Knob::ClChunk).is_some() || knob(Knob::ClTiles).is_some();
    let slots = (dev.multiprocessors.max(1) as i64) * fit.blocks_per_sm;
    let blocks_of = |chunk: i64| batch.saturating_mul(g.n_ctiles).saturating_mul(ceil_div(seqlen.max(1), chunk));
    let short = match (dt, width) {
        (DType::F32, ..=4) => 32,
        (DType::F32, 5 | 6) => 64,
        (_, ..=4) if blocks_of(FWD_CL_LONG_CHUNK) <= FWD_CL_LONG_WAVES * slots => FWD_CL_LONG_CHUNK,
        (_, ..=4) if blocks_of(CL_TT) <= FWD_CL_FINE_WAVES * slots => CL_TT,
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
/// The 16-bit forward's long-burst chunk at W <= 4: one step of `CCV_CL_BURST_LONG` tokens
/// (instances.h) for each of the 8 lanes of `fwd_cl11` (128 threads / 16 groups of 4 channels),
/// taken up to FWD_CL_LONG_WAVES waves of such blocks.
pub(super) const FWD_CL_LONG_CHUNK: i64 = 8 * 11;
const FWD_CL_LONG_WAVES: i64 = 2;

/// Whether a channel-last forward of x's dtype `dt` at `width` in chunks of `chunk` tokens runs
/// on `fwd_cl11` (its burst of 11 tokens is then one step a lane) rather than `fwd_cl`.
pub(super) fn fwd_cl_long(dt: DType, width: i64, chunk: i64) -> bool {
    dt != DType::F32 && width <= 4 && chunk == FWD_CL_LONG_CHUNK
}

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
/// 140.1 / 134.9 / 147.0, W = 8 135.1 / 159.9 / 137.6 / 153.6. On fast-memory devices the 16-bit
/// SiLU forward at W >= FWD_CLW_LONG_MIN_W takes even chunks of at most FWD_CLW_LONG_CHUNK
/// tokens there instead (H200, docs/perf.md, session 48; bf16 SiLU, µs, `CCV1D_CL_CHUNK` 256 /
/// 320 / 384 / 512): 4x5376x4096 W = 8 101.2 / 100.1 / 98.4 / 98.7, W = 7 99.5 / 98.7 / 98.1 /
/// 98.5, 2x5376x4096 W = 8 54.6 / 54.2 / 53.5 / 53.3; W = 4 kept 256 (91.6 / 96.9 / 98.1 / 99.7),
/// and so did W = 5 / 6 (92.7 / 95.3 and 94.6 / 96.6 at 256 / 384) and W = 8 without activation
/// (92.9 / 96.3). Knobs set the chunk instead.
pub(super) fn fwd_clw_geometry(inp: &ConvInputs, dev: &DeviceInfo) -> Result<MainGeom> {
    let (batch, seqlen) = (inp.batch, inp.seqlen);
    let fit = ClFit { blocks_per_sm: FWD_CLW_BLOCKS_PER_SM, one_wave: None };
    let mut g = cl_stream_geometry(batch, inp.dim, seqlen, fit, dev)?;
    if knob(Knob::ClChunk).is_none() && knob(Knob::ClTiles).is_none() {
        let waves2 = 2 * (dev.multiprocessors.max(1) as i64) * FWD_CLW_BLOCKS_PER_SM;
        let before = g.chunk;
        recut_chunks(&mut g, batch, seqlen, FWD_CLW_CHUNK, waves2);
        let long = fast_memory(dev) && inp.x.dtype != DType::F32 && inp.act == Act::Silu && inp.width >= FWD_CLW_LONG_MIN_W;
        if long && g.chunk != before {
            let per = ceil_div(seqlen.max(1), ceil_div(seqlen.max(1), FWD_CLW_LONG_CHUNK));
            g.chunk = g.chunk.max(ceil_div(per, CL_TT) * CL_TT);
            g.n_chunks = ceil_div(seqlen.max(1), g.chunk);
            g.n_blocks = batch.saturating_mul(g.n_ctiles).saturating_mul(g.n_chunks);
        }
    }
    Ok(g)
}
/// `fwd_clw_geometry`'s longer chunks on fast-memory devices: tokens and the narrowest 16-bit
/// SiLU window that takes them.
pub(super) const FWD_CLW_LONG_CHUNK: i64 = 384;
pub(super) const FWD_CLW_LONG_MIN_W: i64 = 7;

/// Resident `bwd_cf` / `bwd_cfw` blocks per multiprocessor: their launch bounds in instances.h
/// (8 for W <= 4, else 7; shared memory allows 9).
pub(super) fn bwd_cf_blocks_per_sm(width: i64) -> i64 {
    match width {
        ..=4 => 8,
        _ => 7,
    }
}

/// Resident `fwd_cfw` blocks per multiprocessor: its launch bound in instances.h (12 for W <= 5,
/// else 10, as fwd_cf).
pub(super) fn fwd_cfw_blocks_per_sm(width: i64) -> i64 {
    if width <= 5 { 12 } else { 10 }
}

/// `bwd_cf`, `bwd_cfw` and `fwd_cfw` on rows a block covers whole (one chunk per row): several
/// batch rows of one channel per block, one set of weights (and one dweight/dbias partial) for
/// all of them. A block's setup and final reduction cost about one step (H100 ncu of 4x5376x4096
/// bf16 on bwd_cf: 13 of 57 instructions per element, a fifth of the stall samples in the
/// weights' loads, with 2 tiles per block), so G rows per block is chosen for the fewest wave-quantized
/// (steps + 1) per block slot. A row is `spans` units of work and a block does `per_step` at a
/// time (bwd_cf: tiles, 1; the cfw kernels: warp spans, their warps), at most `max_steps`
/// steps (`cf_max_steps`, `fwd_max_steps`). `CCV1D_BWD_ROWS` overrides it (tuning).
pub(super) fn cf_row_group(batch: i64, dim: i64, g: &MainGeom, spans: i64, per_step: i64, slots: i64, max_steps: i64, whole_batch_on_tie: bool) -> i64 {
    if g.n_chunks != 1 || batch <= 1 {
        return 1;
    }
    if let Some(v) = knob(Knob::BwdRows) {
        return v.clamp(1, batch);
    }
    let (spans, per_step) = (spans.max(1), per_step.max(1));
    let mut best = (i64::MAX, 1);
    for rows in 1..=batch.min(max_steps * per_step / spans).max(1) {
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
pub(super) fn cf_block_cost(batch: i64, dim: i64, n_chunks: i64, rows: i64, spans: i64, per_step: i64, slots: i64) -> i64 {
    let blocks = ceil_div(batch, rows).saturating_mul(dim).saturating_mul(n_chunks);
    let steps = ceil_div(rows.saturating_mul(spans), per_step.max(1));
    ceil_div(blocks, slots.max(1)).saturating_mul(steps + 1)
}

/// Most steps a channel-first block walks (a step: a tile of `bwd_cf` / `fwd_cf`, or a warp span
/// per warp of a `cfw` kernel, which is a tile too): caps `main_geometry`'s chunks (evened where
/// it cuts) and the backward's rows a block (`cf_row_group`). `CCV1D_CF_STEPS` overrides it
/// (tuning; at most MAX_TILES_PER_BLOCK). Blocks of 16 steps ran 2-9 % slower than blocks of 12
/// or fewer, blocks of 12 as fast as 8 (docs/perf.md, session 40; H100, W = 4 SiLU backward, µs,
/// cap 16 / 12 / 8): bf16 2x2048x16384 (2 rows of 8 tiles a block) 156.3 / 144.8 / 144.9,
/// 4x2048x8192 155.6 / 143.9 / 143.9, 4x1024x16384 158.9 / 145.0 / 145.0, 8x1024x16384 286.2 /
/// 280.1 / 280.1, 2x1024x32768 159.5 / 145.1 / 145.3, f16 2x2048x16384 152.2 / 144.5 / 144.6, f32
/// 1x4096x16384 284.2 / 277.8 / 277.9; unchanged 4x5376x8192 361.4 / 361.3 / 361.4 and
/// 4x5376x4096 182.8; 2x2048x12288 (2 rows of 6 tiles) 109.3 / 109.4 / 110.3, and at a cap of 6
/// 4x5376x4096 lost (184.1).
pub(super) fn cf_max_steps() -> i64 {
    steps_or_knob(CF_MAX_STEPS)
}
pub const CF_MAX_STEPS: i64 = 12;

/// `CCV1D_CF_STEPS` (at most MAX_TILES_PER_BLOCK) when set, else `default`.
fn steps_or_knob(default: i64) -> i64 {
    knob(Knob::CfSteps).map_or(default, |v| v.min(MAX_TILES_PER_BLOCK))
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
pub(super) fn split_short_rows(km: &mut KParams, inp: &ConvInputs, g: &MainGeom) -> bool {
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

/// Whether the device's DRAM is fast enough (FAST_MEMORY_GBPS and up: an H200 reports 4814, an
/// H100 about 3350) that kernels tuned to keep an H100's memory busy run out of instruction issue
/// first, so that other rules apply: `fwd_one_step`, `fwd_warp_spans`, `bwd_cfw2`, `bwd_clw` and
/// `bwd_clw_geometry` (docs/perf.md, session 43), `pt_max_vectors` (session 44), `bwd_cfwl`
/// (session 45), f32 `bwd_clw` at W >= 6 and `bwd_clw_geometry`'s 16-bit chunks without
/// activation (session 47), `fwd_clw_fast_silu` and bf16 SiLU in `pt_max_vectors` (session 48).
/// NVIDIA only: no such AMD device was measured.
pub(super) fn fast_memory(dev: &DeviceInfo) -> bool {
    dev.vendor == Vendor::Nvidia && dev.mem_gbps >= FAST_MEMORY_GBPS
}
pub const FAST_MEMORY_GBPS: u32 = 4000;

/// Tokens of one warp span of `items` 16-byte vectors a lane: CF_ITEMS in
/// `ccv1d_{fwd,bwd}_cfw_*`, CFWL_ITEMS in `ccv1d_bwd_cfwl_*`.
pub(super) fn warp_span_tokens(dt: DType, dev: &DeviceInfo, items: i64) -> i64 {
    dev.warp_size.max(1) as i64 * (16 / dt.size() as i64) * items
}

/// Warp spans of `items` vectors a lane in one row's part of a block's chunk (`g.chunk`, at most
/// the row's `seqlen`).
pub(super) fn chunk_spans(g: &MainGeom, seqlen: i64, dt: DType, dev: &DeviceInfo, items: i64) -> i64 {
    ceil_div(g.chunk.min(seqlen), warp_span_tokens(dt, dev, items))
}

/// Channel-first forward / backward on `ccv1d_{fwd,bwd}_cfw_*` (warp spans: no shared memory, no
/// barriers; fwd_cf.hip, bwd_cf.hip): simple rows (rows mode, no seq_idx), every row tensor
/// (`views`) on the vector path, L a multiple of the 16-byte vector, rows of at least one warp
/// span (a row's last span is moved back to end at L; shorter rows go to the `cfs` kernels), and
/// `faster`: where it was measured faster than the tile kernels on the H100 (docs/perf.md,
/// session 8). `CCV1D_CF_WARP=0` / `1` turns it off / on wherever it can run (tuning and tests).
pub(super) fn cf_warp_spans(inp: &ConvInputs, views: &[&View], faster: bool, dev: &DeviceInfo) -> bool {
    let dt = inp.x.dtype;
    let dims = [inp.batch, inp.dim, inp.seqlen];
    let allowed = inp.seq_idx.is_none()
        && matches!(inp.seqs, Seqs::Rows)
        && inp.seqlen % (16 / dt.size() as i64) == 0
        && inp.seqlen >= warp_span_tokens(dt, dev, CF_ITEMS)
        && views.iter().all(|v| vec_ok(v, Layout::ChannelFirst, dims));
    match knob(Knob::CfWarp) {
        Some(v) => allowed && v == 1,
        None => allowed && faster,
    }
}
