//! Forward launches: kernel choice (`pe`, `pt`, `cfw`, `clw`, `cfs`, tiles) and the small-problem
//! forwards' grids.

use super::*;

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
        let pt = || fwd_pt_launch(p, layout, vec, &k, pt_max.unwrap_or_else(|| knob(Knob::FwdPt).unwrap_or_else(|| pt_max_vectors(dt, inp.act, inp.seqlen, dev))));
        if let Some(l) = pe.or_else(pt) {
            v.push(l);
        } else {
            let clw_geometry = if layout == Layout::ChannelLast && vec { fwd_clw(p, dev)? } else { None };
            let clw = clw_geometry.is_some();
            let warp = layout == Layout::ChannelFirst && fwd_warp_spans(p, dev);
            let mut g = match layout {
                Layout::ChannelFirst => {
                    let g = main_geometry(layout, dt, inp.batch, inp.dim, inp.seqlen, dev)?;
                    fwd_cf_chunks(g, dt, inp.width, warp, inp.batch, inp.dim, inp.seqlen)
                }
                Layout::ChannelLast => match clw_geometry {
                    Some(g) => g,
                    None => fwd_cl_geometry(inp.batch, inp.dim, inp.seqlen, dt, inp.width, dev)?,
                },
            };
            if warp {
                let slots = dev.multiprocessors.max(1) as i64 * fwd_cfw_blocks_per_sm(inp.width);
                let spans = chunk_spans(&g, inp.seqlen, dt, dev, CF_ITEMS);
                g.brows = cf_row_group(inp.batch, inp.dim, &g, spans, NT as i64 / dev.warp_size.max(1) as i64, slots, fwd_max_steps(inp.width), false);
                g.n_blocks = ceil_div(inp.batch, g.brows).saturating_mul(inp.dim).saturating_mul(g.n_chunks);
            }
            let mut km = main_params(&k, &g, vec);
            let family = if warp {
                "cfw"
            } else if clw {
                "clw"
            } else if layout == Layout::ChannelLast && fwd_cl_long(dt, inp.width, g.chunk) {
                "cl11"
            } else if split_short_rows(&mut km, inp, &g) {
                "cfs"
            } else {
                layout.tag()
            };
            if clw && fwd_clw_halo(&km, dev) {
                km.flags |= F_CLW_HALO;
            }
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
/// On fast-memory devices (`fast_memory`: the H200) rows of at least one tile
/// (`tile_tokens`: 1024 f32 tokens, 2048 16-bit) take the tile kernels from 2^19 vectors on:
/// faster there at every width measured (docs/perf.md, session 44; SiLU, µs, `fwd_pt` / the tile
/// kernel): W = 4 f32 4x256x4096 11.4 / 10.5, 2x2048x2048 20.4 / 18.7, 1x512x4096 (2^19) 6.9 /
/// 6.4, W = 8 4x256x4096 13.4 / 11.6; bf16 2x2048x2048 12.8 / 12.1, 4x256x8192 12.7 / 12.2.
/// Shorter rows kept `fwd_pt` (f32 4x4096x512 W = 4 20.0 / 20.6, W = 2 18.1 / 20.0; bf16
/// 4x4096x512 without activation 11.7 / 12.7, 8x512x1024 7.3 / 7.8), and so did fewer vectors
/// (f32 1x1024x1024 4.0 / 4.3, bf16 2x256x4096 4.5 / 4.7).
/// bf16 with SiLU on fast-memory devices stops at 2^19 vectors as f16 does, whatever the rows:
/// the tile kernel was faster or even past it (docs/perf.md, session 48; W = 4, µs, `fwd_pt` /
/// the tile kernel): 4x4096x512 (2^20) 13.1 / 12.8, 8x2048x1024 23.8 / 23.2, 16x2048x512 24.3 /
/// 23.2, 16x4096x256 25.4 / 23.9, 4x5376x512 16.6 / 16.0, 8x1024x1024 12.8 / 12.8; without
/// activation `fwd_pt` stays (8x2048x1024 21.0 / 22.9, 4x4096x512 11.7 / 12.6).
/// `CCV1D_FWD_PT` overrides it for every dtype (0: never).
fn pt_max_vectors(dt: DType, act: Act, seqlen: i64, dev: &DeviceInfo) -> i64 {
    let max = match dt {
        DType::F16 => 1 << 19,
        DType::BF16 if fast_memory(dev) && act == Act::Silu => 1 << 19,
        DType::BF16 | DType::F32 => 1 << 21,
    };
    if fast_memory(dev) && seqlen >= tile_tokens(Layout::ChannelFirst, dt) {
        max.min((1 << 19) - 1)
    } else {
        max
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
pub(super) fn pe_max_elems(dt: DType, layout: Layout) -> i64 {
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

/// The forward on `ccv1d_fwd_cfw_*`: 16-bit only, at W >= 6 (bf16 4x5376x4096 W=8 130.8 ->
/// 126.4 us) and on rows of at most half a tile in problems of 2^22 elements and up
/// (8x2048x1024 28.4 -> 26.3, 4x4096x512 15.8 -> 14.8). Elsewhere the tile kernel was as fast or
/// faster (f32 4x5376x4096 242.1 against 244.8; bf16 W=4 121.7 against 123.0; 4x256x512 3.2
/// against 3.5). Not at W >= 6 on `fast_memory` devices, where the tile kernel was faster (H200,
/// docs/perf.md session 43; bf16 4x5376x4096 SiLU, µs, `fwd_cfw` / `CCV1D_CF_WARP=0`): W = 6
/// 102.4 / 99.4, W = 7 107.4 / 101.9, W = 8 113.4 / 99.9.
fn fwd_warp_spans(p: &FwdPlan, dev: &DeviceInfo) -> bool {
    let inp = &p.inp;
    let short = inp.seqlen * 2 <= tile_tokens(Layout::ChannelFirst, inp.x.dtype);
    let big = inp.batch.saturating_mul(inp.dim).saturating_mul(inp.seqlen) >= 1 << 22;
    let wide = inp.width >= 6 && !fast_memory(dev);
    let faster = (inp.x.dtype != DType::F32 && (wide || (short && big))) || fwd_one_step(inp, dev);
    cf_warp_spans(inp, &[&inp.x, &p.out], faster, dev)
}

/// The forward at W <= FWD_NARROW_MAX_W on `fwd_cfw` in blocks of one step (a tile of one row:
/// `fwd_max_steps`), any dtype, where those blocks make FWD_ONE_STEP_WAVES waves or more. H100
/// (docs/perf.md, session 40; SiLU, µs, the tile kernel in 2-tile chunks / one-step `fwd_cfw`):
/// bf16 4x5376x4096 121.9 / 119.4, f16 121.9 / 119.3, W = 2 121.5 / 119.2, 2x5376x8192 122.2 /
/// 119.9, 1x2048x16384 49.2 / 47.9, 1x5376x4096 33.8 / 32.4, 8x5376x2048 (rows of one tile)
/// 128.8 / 119.2, 4x8192x2048 99.7 / 91.5; f32 4x5376x4096 238.7 / 235.6. Not taken: W = 5
/// (bf16 4x5376x4096 121.8 / 122.5), grids of 1.3 waves (bf16 4x256x4096 7.9 / 8.6), and on
/// `fast_memory` devices, where the one-step blocks run out of instruction issue (ncu, bf16
/// 4x5376x4096: issue active 88 %, DRAM 60 %) and lost at every shape tried (H200, docs/perf.md
/// session 43; SiLU, µs, one-step / tile kernel): bf16 4x5376x4096 111.0 / 89.1, W = 2 96.9 / 87.1,
/// f16 110.0 / 89.1, 2x5376x4096 56.8 / 46.5, 1x5376x4096 29.6 / 25.1, 8x5376x2048 111.1 / 106.8,
/// 4x8192x2048 85.2 / 82.4, 1x2048x16384 43.9 / 37.8; f32 4x5376x4096 176.6 / 168.9, 2x5376x4096
/// 89.8 / 86.2, 1x5376x4096 46.4 / 44.9, 4x8192x2048 135.0 / 128.8.
fn fwd_one_step(inp: &ConvInputs, dev: &DeviceInfo) -> bool {
    if fast_memory(dev) {
        return false;
    }
    let tiles = ceil_div(inp.seqlen.max(1), tile_tokens(Layout::ChannelFirst, inp.x.dtype));
    let slots = dev.multiprocessors.max(1) as i64 * fwd_cfw_blocks_per_sm(inp.width);
    // f32 rows of one tile stay on fwd_cf, whose first tile is prefetched ahead of its weights
    // (session 41: 8x2048x1024 46.3 us against 47.2 in one-step blocks, 1x16384x1024 46.9 / 47.4)
    let rows_ok = inp.x.dtype != DType::F32 || tiles >= 2;
    let waves_ok = inp.batch.saturating_mul(inp.dim).saturating_mul(tiles) >= FWD_ONE_STEP_WAVES * slots;
    rows_ok && waves_ok && inp.width <= FWD_NARROW_MAX_W && fwd_max_steps(inp.width) == 1
}
const FWD_ONE_STEP_WAVES: i64 = 4;

/// Whether `fwd_clw`'s groups copy their last K tokens (the next group's window) at their start
/// (`CCV_F_CLW_HALO`, fwd_clw.hip; bwd_clw's halo, x only): on grids of FWD_CLW_HALO_WAVES waves or
/// more, where the ring's copies at a walk's end came from DRAM a second time. H100 (docs/perf.md
/// session 35, bf16 SiLU, µs): 4x5376x4096 W = 5-8 129.0-131.1 -> 127.6-128.9, 2x5376x4096 W = 5
/// 66.7 -> 66.4; one-wave grids lost (4x4096x512 15.6 -> 16.2, 8x2048x1024 28.4 -> 28.5-28.8).
/// `CCV1D_CL_FWD=2` turns it on everywhere (tests).
fn fwd_clw_halo(k: &KParams, dev: &DeviceInfo) -> bool {
    knob(Knob::ClFwd) == Some(2) || k.n_blocks >= FWD_CLW_HALO_WAVES * dev.multiprocessors.max(1) as i64 * FWD_CLW_BLOCKS_PER_SM
}
pub(super) const FWD_CLW_HALO_WAVES: i64 = 2;

/// Resident `fwd_clw` blocks per multiprocessor: its launch bound (`CCV_FWD_CLW_BLOCKS`).
pub(super) const FWD_CLW_BLOCKS_PER_SM: i64 = 8;
/// `fwd_clw`'s tokens per block on grids of at least two waves (`fwd_clw_geometry`).
pub(super) const FWD_CLW_CHUNK: i64 = 256;

/// The channel-last forward on `ccv1d_fwd_clw_*` (per-warp rings of 16-byte copies, two channels
/// a thread, 8 blocks per SM) instead of `fwd_cl` (four channels a thread, register prefetch or
/// burst loads): simple rows (no seq_idx, no cu_seqlens), x and out on the vector path (the
/// caller's `vec`), D a multiple of the 16-byte vector, L below 2^30 (32-bit token indices), and
/// where it was measured faster: 16-bit x at W >= 5, where `fwd_cl`'s four-channel windows leave
/// its prefetch walk short of registers (H100, docs/perf.md, session 18; bf16 4x5376x4096 SiLU,
/// µs, `fwd_cl` against it: W = 5 137.1 / 130.2, W = 6 138.6 / 131.9, W = 7 145.0 / 133.6, W = 8
/// 151.9 / 135.1). At W = 4 `fwd_cl`'s burst walk stays (124.1 against 128.5), and f32 keeps
/// `fwd_cl` (W = 4 233.4 against 247.7, W = 8 255.8 / 256.3). On fast-memory devices the SiLU
/// forward also takes it where `fwd_clw_fast_silu` says. `CCV1D_CL_FWD=0` / `1`: never /
/// wherever it can run. Returns its geometry (`fwd_clw_geometry`, computed once) where it runs.
fn fwd_clw(p: &FwdPlan, dev: &DeviceInfo) -> Result<Option<MainGeom>> {
    let inp = &p.inp;
    let allowed = inp.seq_idx.is_none()
        && matches!(inp.seqs, Seqs::Rows)
        && inp.dim % (16 / inp.x.dtype.size() as i64) == 0
        && inp.seqlen <= (i32::MAX / 2) as i64;
    if !allowed {
        return Ok(None);
    }
    let fast_silu = fast_memory(dev) && inp.act == Act::Silu && (3..=8).contains(&inp.width);
    match knob(Knob::ClFwd) {
        Some(v) if v >= 1 => fwd_clw_geometry(inp, dev).map(Some),
        None if inp.x.dtype != DType::F32 && inp.width >= 5 => fwd_clw_geometry(inp, dev).map(Some),
        // a geometry it cannot take leaves the call to fwd_cl's (which reports the same limits)
        None if fast_silu => Ok(fwd_clw_geometry(inp, dev).ok().filter(|g| fwd_clw_fast_silu(inp, g, dev))),
        _ => Ok(None),
    }
}

/// The SiLU forward on `fwd_clw` on fast-memory devices (the H200), where it was faster than
/// `fwd_cl` (docs/perf.md, session 48; µs, `fwd_cl` / `fwd_clw`; its chunks and blocks from
/// `fwd_clw_geometry`, 2 waves = 2 x 132 x 8 blocks):
/// - W = 3 at every shape measured: bf16 4x5376x4096 96.6 / 91.2, 1x5376x4096 27.5 / 26.6,
///   8x2048x1024 22.2 / 20.0, 4x256x4096 7.9 / 7.3; f32 195.2 / 175.7, 51.9 / 49.4, 40.6 /
///   37.3, 12.9 / 11.0.
/// - 16-bit W = 4 where its chunks are FWD_CLW_CHUNK tokens: bf16 4x5376x4096 94.5 / 91.7,
///   2x5376x4096 49.2 / 48.5, 16x5376x512 49.3 / 48.5, 8x2048x1024 21.4 / 20.5; f16 alike.
///   Other chunks lost or tied: 4x2048x4096 (512 tokens) 39.0 / 42.4, 1x5376x4096 (384) 27.0 /
///   27.0, 4x4096x512 (128) 12.7 / 13.5, 4x256x4096 (64) 7.6 / 8.0.
/// - f32 W = 4 on grids of two waves or chunks of at most 128 tokens: 4x5376x4096 182.4 /
///   175.5, 2x5376x4096 92.3 / 89.7, 16x5376x512 93.0 / 89.7, 4x4096x512 19.8 / 19.4,
///   4x256x4096 11.3 / 11.0. One wave of longer chunks lost: 1x5376x4096 47.4 / 49.3,
///   4x2048x4096 70.5 / 73.3, 8x2048x1024 36.7 / 37.3.
/// - f32 W = 5-7 at every shape measured (W = 7 4x5376x4096 198.4 / 177.6, 4x4096x512 25.8 /
///   19.9), W = 8 from chunks of 128 tokens (4x5376x4096 198.9 / 179.2; 4x256x4096, 64 tokens,
///   13.5 / 14.8).
/// Not taken: W = 2 (bf16 4x5376x4096 91.0 / 91.2, 1x5376x4096 25.5 / 26.9; f32 172.7 / 175.7)
/// and W = 1 (not measured); without activation W = 4 lost at every shape (bf16 4x5376x4096
/// 88.2 / 91.2, f32 174.3 / 175.2) and the other widths were not measured. 16-bit W >= 5 is on
/// `fwd_clw` on every device. `g`: `fwd_clw_geometry`'s, for a SiLU call at W = 3-8 (`fwd_clw`).
fn fwd_clw_fast_silu(inp: &ConvInputs, g: &MainGeom, dev: &DeviceInfo) -> bool {
    if g.chunk < CL_TT {
        // chunks of a few tokens (one-wave grids of short rows: 4x256x512 f32 W = 4 in 8-token
        // chunks took 5.1 µs against `fwd_cl`'s 3.7); every chunk measured faster was a tile or more
        return false;
    }
    let two_waves = g.n_blocks >= 2 * dev.multiprocessors.max(1) as i64 * FWD_CLW_BLOCKS_PER_SM;
    match (inp.x.dtype, inp.width) {
        (_, 3) => true,
        (DType::F32, 4) => two_waves || g.chunk <= 2 * CL_TT,
        (_, 4) => g.chunk == FWD_CLW_CHUNK,
        (DType::F32, 8) => g.chunk >= 2 * CL_TT,
        (DType::F32, _) => true,
        _ => false,
    }
}
