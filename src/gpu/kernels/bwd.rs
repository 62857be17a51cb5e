//! Backward launches: kernel choice (`pe`, `pt`, `slab`, `cfw`/`cfw7`, `cfs`, `clw`, `cls`,
//! tiles), their geometry, the workspace of fp32 partials and the reduce launch.

use super::*;

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
    if layout == Layout::ChannelLast && bwd_clw(p, dev) {
        return bwd_clw_geometry(inp, dev).map(Some);
    }
    if layout == Layout::ChannelLast && bwd_streams(p) {
        let fit = cl_fit(true, inp.x.dtype, inp.width);
        return cl_stream_geometry(inp.batch, inp.dim, inp.seqlen, fit, dev).map(Some);
    }
    let mut g = main_geometry(layout, inp.x.dtype, inp.batch, inp.dim, inp.seqlen, dev)?;
    let warp = layout == Layout::ChannelFirst && bwd_warp_spans(p, dev);
    if warp {
        if knob(Knob::CfTiles).is_none() {
            g = if inp.x.dtype != DType::F32 { bwd_cfw_chunks(p, g, dev) } else { bwd_cfw_f32_chunks(p, g) };
        }
        g.brows = bwd_cfw_rows(p, &g, dev).0;
    } else if layout == Layout::ChannelFirst {
        let r = short_rows_log2(inp.batch * inp.dim, inp.seqlen, &g, inp.x.dtype);
        if r == 0 {
            let slots = dev.multiprocessors.max(1) as i64 * bwd_cf_blocks_per_sm(inp.width);
            let spans = ceil_div(g.chunk.min(inp.seqlen), tile_tokens(layout, inp.x.dtype));
            g.brows = cf_row_group(inp.batch, inp.dim, &g, spans, 1, slots, cf_max_steps(), true);
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

/// The backward on `ccv1d_bwd_cfw_*`, every width (bf16 4x5376x4096 W=4 220.9 -> 189.2 us, W=6
/// 230.6 -> 220.7, 8x2048x1024 64.1 -> 40.0; W=7 / 8 since session 9's span halos by shuffles:
/// 206.7 / 225.9 against 251.2 / 269.1 on `bwd_cf`, f32 364.0 / 364.1 against 385.0 / 411.7).
fn bwd_warp_spans(p: &BwdPlan, dev: &DeviceInfo) -> bool {
    cf_warp_spans(&p.inp, &[&p.inp.x, &p.dout, &p.dx], true, dev)
}

/// `bwd_cfw`'s 16-bit chunks: `main_geometry`'s tiles a block (sized for 16 blocks a
/// multiprocessor, twice what `bwd_cfw` holds) or more, up to a whole row or `cf_max_steps`
/// tiles: the fewest wave-quantized block steps (steps + 1 a block, as `cf_row_group` counts
/// them, with its row groups); a tie keeps `main_geometry`'s. H100 (docs/perf.md, session 28;
/// SiLU, µs, its chunks / whole rows): bf16 4x256x4096 15.5 / 14.7-14.9 (1024 blocks, a wave,
/// against 2048), f16 15.5 / 14.8-14.9, 4x512x4096 25.5 / 23.8 (2 rows a block), 2x256x4096
/// 10.3-10.4 / 10.9 (kept: 512 blocks of whole rows are half a wave). f32 takes
/// `bwd_cfw_f32_chunks` instead: this search gained nothing there (4x256x4096 23.1 in
/// `main_geometry`'s one tile, 23.4 in 2, 23.1-23.2 in 4).
fn bwd_cfw_chunks(p: &BwdPlan, g: MainGeom, dev: &DeviceInfo) -> MainGeom {
    let inp = &p.inp;
    let tile = tile_tokens(Layout::ChannelFirst, inp.x.dtype);
    let slots = dev.multiprocessors.max(1) as i64 * bwd_cf_blocks_per_sm(inp.width);
    let per_step = NT as i64 / dev.warp_size.max(1) as i64;
    let cost = |g: &MainGeom| {
        let spans = chunk_spans(g, inp.seqlen, inp.x.dtype, dev, CF_ITEMS);
        let rows = cf_row_group(inp.batch, inp.dim, g, spans, per_step, slots, cf_max_steps(), true);
        cf_block_cost(inp.batch, inp.dim, g.n_chunks, rows, spans, per_step, slots)
    };
    let mut best = (cost(&g), g);
    for tiles in g.chunk / tile + 1..=ceil_div(inp.seqlen, tile).min(cf_max_steps()) {
        let n_chunks = ceil_div(inp.seqlen, tiles * tile);
        let c = MainGeom { chunk: tiles * tile, n_chunks, n_blocks: inp.batch.saturating_mul(inp.dim).saturating_mul(n_chunks), ..g };
        let k = cost(&c);
        if k < best.0 {
            best = (k, c);
        }
    }
    best.1
}

/// `bwd_cfw`'s f32 chunks at W <= 4, an empirical rule (H100, docs/perf.md, sessions 29 and 30;
/// SiLU, µs, `main_geometry`'s chunks / the rule's):
/// - batch >= 4 where `main_geometry` gives whole rows of 4 tiles or more: 2 tiles (2048 tokens)
///   a block, one batch row a block (`cf_row_group` groups rows only at one chunk a row).
///   4x5376x4096 358.2-361.7 / 358.1-358.2, without activation 360.5-361.2 / 354.8-355.3;
///   4x5376x8192 719.7 / 709.1-709.4; 4x2048x4096 150.7-150.8 / 145.3; 8x2048x4096 282.8-283.2 /
///   281.5-281.6; 16x1024x4096 283.4-283.8 / 280.9; 4x4096x4096 280.7-282.1 / 281.8-282.0.
/// - batch 1-2 with rows of 8 tiles or more, at most 2048 rows (batch x dim) or batch 2 with at
///   most 8192, where `main_geometry` gives chunks longer than 3 tiles: 3 tiles a block.
///   1x2048x8192 78.2-78.3 / 74.7, 1x1024x16384 78.1-78.2 / 75.8, 1x2048x16384 153.1-153.2 /
///   142.1, 1x1024x32768 152.8-153.0 / 142.2, 2x1024x16384 153.2 / 142.3, 2x2048x8192
///   150.9-151.2 / 140.8-140.9, 2x2048x16384 287.9-288.1 / 279.4, 2x2048x12288 213.6-213.9 /
///   211.2-211.3, 2x3072x8192 214.1-214.7 / 210.1-210.2, 2x4096x8192 282.1-283.7 / 277.3,
///   2x1536x8192 109.6 / 109.4.
/// Not taken:
/// - W >= 5, where 2 tiles lost (4x5376x4096 W = 5 / 6 / 7 / 8: 373.3 / 387.7 / 401.1 / 411.5
///   against 359.0 / 360.2 / 363.8 / 364.0 in whole rows);
/// - batch 1 past 2048 rows, where 3 tiles won or lost by grid (1x3072x8192 107.6-107.7 /
///   109.4-109.5, 1x4096x8192 141.3-141.5 / 140.8-140.9, 1x5376x8192 182.8 / 184.9-185.0,
///   1x6144x8192 209.2 / 209.8-210.3, 1x8192x8192 275.7 / 277.3-277.4, 1x4096x16384 285.7-285.9
///   / 279.6-279.7), batch 2 past 8192 rows (2x5376x8192 361.7-362.1 / 361.4-361.6), and rows of
///   4 tiles at batch 1-2 (1x5376x4096 94.3 / 99.0-99.1 in 3 tiles, 98.1-98.3 in 2; 2x5376x4096
///   181.3-181.5 / 184.4-184.6, 183.7-184.0).
fn bwd_cfw_f32_chunks(p: &BwdPlan, g: MainGeom) -> MainGeom {
    let inp = &p.inp;
    let tile = tile_tokens(Layout::ChannelFirst, DType::F32);
    let tiles = ceil_div(inp.seqlen, tile);
    let rows = inp.batch.saturating_mul(inp.dim);
    if inp.width > 4 {
        return g;
    }
    let per_block = if inp.batch >= 4 && g.n_chunks == 1 && tiles >= 4 {
        2
    } else if inp.batch <= 2 && tiles >= 8 && (rows <= 2048 || (inp.batch == 2 && rows <= 8192)) && g.chunk > 3 * tile {
        3
    } else {
        return g;
    };
    let n_chunks = ceil_div(inp.seqlen, per_block * tile);
    MainGeom { chunk: per_block * tile, n_chunks, n_blocks: inp.batch.saturating_mul(inp.dim).saturating_mul(n_chunks), ..g }
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
/// -> 23.6, so those keep 8. With SiLU at 16-bit W = 4 it takes silu_grad_fma (hip/bwd_cf.hip).
/// Where `bwd_cfw2`'s rule holds (the Mamba-2 shape with 4 rows a block among them), that kernel
/// runs these rows instead. `CCV1D_CFW7=0 / 1`: never / wherever it can run.
fn bwd_cfw_rows(p: &BwdPlan, g: &MainGeom, dev: &DeviceInfo) -> (i64, bool) {
    let inp = &p.inp;
    let per_step = NT as i64 / dev.warp_size.max(1) as i64;
    if bwd_cfwl(p, dev) {  // its own spans and resident blocks, no 7-block variant
        let spans = chunk_spans(g, inp.seqlen, inp.x.dtype, dev, CFWL_ITEMS);
        let slots = dev.multiprocessors.max(1) as i64 * cfwl_blocks_per_sm(inp.x.dtype);
        return (cf_row_group(inp.batch, inp.dim, g, spans, per_step, slots, cf_max_steps(), true), false);
    }
    let spans = chunk_spans(g, inp.seqlen, inp.x.dtype, dev, CF_ITEMS);
    // (rows a block, blocks, idle fraction of the last wave, slots) at `per_sm` blocks a
    // multiprocessor
    let grid = |per_sm: i64| {
        let slots = dev.multiprocessors.max(1) as i64 * per_sm;
        let rows = cf_row_group(inp.batch, inp.dim, g, spans, per_step, slots, cf_max_steps(), true);
        let n = ceil_div(inp.batch, rows).saturating_mul(inp.dim).saturating_mul(g.n_chunks);
        (rows, n, ceil_div(n, slots) as f64 - n as f64 / slots as f64, slots)
    };
    let (rows8, n8, idle8, slots8) = grid(bwd_cf_blocks_per_sm(inp.width));
    if inp.width <= 4 && dev.vendor == Vendor::Nvidia && knob(Knob::Cfw7) != Some(0) {
        let (rows7, _, idle7, _) = grid(CFW7_BLOCKS_PER_SM);
        if knob(Knob::Cfw7) == Some(1) || (n8 >= slots8 && idle7 < idle8) {
            return (rows7, true);
        }
    }
    (rows8, false)
}

/// 16-byte vectors a lane of a `ccv1d_bwd_cfwl_*` span (`CCV_CFWL_ITEMS`).
pub const CFWL_ITEMS: i64 = 4;

/// Resident `ccv1d_bwd_cfwl_*` blocks per multiprocessor (its launch bounds in instances.h).
fn cfwl_blocks_per_sm(dt: DType) -> i64 {
    if dt == DType::F32 { 6 } else { 5 }
}

/// A `bwd_cfw` call (rows without states or state_indices, rows of at least one long span) on
/// `ccv1d_bwd_cfwl_*`: the same walk in spans of CFWL_ITEMS vectors a lane, so half the per-span
/// setup an element, at fewer resident blocks (6 f32, 5 16-bit). On `fast_memory` devices, where
/// the SiLU backward runs out of instruction issue before memory (docs/perf.md session 44), an
/// empirical rule: f32 at W >= 3 from 2^24 elements; 16-bit with SiLU at W <= 5 from 2^26
/// elements in rows of at most 4096 tokens. H200 (docs/perf.md session 45; µs, `CCV1D_CFWL=0` /
/// 1):
/// - f32, SiLU: 4x5376x4096 W = 3 264.3 / 259.4, W = 4 273.8 / 265.6 (no activation 260.2 /
///   258.2), W = 5 264.2 / 250.6, W = 6 278.8 / 255.6, W = 7 293.0 / 258.4, W = 8 296.3 / 270.0;
///   8x5376x4096 539.9 / 527.7, 4x5376x2048 131.4 / 126.3, 1x5376x4096 71.7 / 67.8, 1x4096x4096
///   53.6 / 52.9 (W = 5 without activation 54.5 / 51.3), 4x4096x1024 W = 8 63.1 / 62.1,
///   8x2048x1024 52.6 / 51.8, 16x1024x1024 53.9 / 53.8. Lost: W = 1 (244.6 / 253.3), W = 2
///   (253.5 / 257.8) and below 2^24 elements (4x1024x2048 27.9 / 30.3, 4x256x4096 19.8 / 22.4;
///   2x2048x2048 28.6 / 28.2 the one gain there).
/// - 16-bit, SiLU: bf16 4x5376x4096 W = 1 125.7 / 124.7, W = 2 132.3 / 126.5, W = 3 140.9 /
///   131.0, W = 4 144.3 / 143.3 (f16 146.4 / 146.3), W = 5 160.9 / 155.5; 8x5376x4096 bf16 281.7
///   / 270.0, f16 286.3 / 275.7; 4x4096x4096 114.7 / 111.4, 16x2048x2048 115.6 / 113.2. Mixed
///   from 2^25 to 2^26 elements (W = 3 2x5376x4096 76.1 / 71.7 and 4x2048x4096 57.6 / 55.6, f16
///   W = 5 2x5376x4096 87.8 / 86.7; W = 4 2x5376x4096 78.3 / 80.1, 4x2048x4096 61.4 / 61.3, f16
///   W = 2 4x2048x4096 52.9 / 53.5), so not taken there. Lost: W >= 6 (bf16 W = 7 176.6 /
///   188.7), 8192-token rows (2x5376x8192 145.0 / 148.0), smaller problems (8x2048x1024 33.8 /
///   34.5, 1x5376x4096 f16 45.9 / 49.0), without activation (f16 8x5376x4096 255.7 / 259.6).
/// Not measured on an H100. `CCV1D_CFWL=0 / 1`: never / wherever it can run.
fn bwd_cfwl(p: &BwdPlan, dev: &DeviceInfo) -> bool {
    let inp = &p.inp;
    let states = bwd_params(p).flags & (F_STATES_ANY | F_STATE_IDX) != 0;
    let dt = inp.x.dtype;
    if states || inp.seqlen < warp_span_tokens(dt, dev, CFWL_ITEMS) {
        return false;
    }
    let elems = inp.batch.saturating_mul(inp.dim).saturating_mul(inp.seqlen);
    match knob(Knob::Cfwl) {
        Some(v) => v >= 1,
        None if !fast_memory(dev) => false,  // (NVIDIA only)
        None if dt == DType::F32 => inp.width >= 3 && elems >= 1 << 24,
        None => inp.act == Act::Silu && inp.width <= 5 && elems >= 1 << 26 && inp.seqlen <= 4096,
    }
}

/// Threads of a `ccv1d_bwd_cfw2_*` block (`CCV_NT_bwd_cfw2`).
const NT_CFW2: u32 = 256;

/// A `bwd_cfw` call (rows without states) at W <= 4 on `ccv1d_bwd_cfw2_*` (NVIDIA): the same
/// batch rows and chunk a block (`g`), in blocks of twice the warps, 4 resident a multiprocessor
/// instead of 8 (or 7), so that a block's walk is half as long; where each of its warps still
/// walks at least 4 spans (16-bit) or 2 (f32). Measured on the H100 (docs/perf.md, session 42;
/// SiLU, µs, default / `bwd_cfw2`), 4 spans a warp: f32 8x2048x1024 73.3-73.5 / 71.0,
/// 16x1024x1024 74.6-74.7 / 72.9, 8x2048x2048 141.7-141.8 / 138.3-138.5, 2x5376x4096
/// 180.1-180.3 / 178.0-178.1; bf16 4x5376x4096 181.0 / 179.2-179.3 (W = 2, 3 and no activation
/// alike), 8x5376x4096 358.1-358.3 / 353.5-353.9, 4x4096x4096 140.1 / 138.0-138.1, f16
/// 4x5376x4096 180.8-180.9 / 179.8-179.9, bf16 16x2048x1024 and 8x2048x2048 even. 2 or 3 spans a
/// warp: f32 gained at all 12 shapes tried (4x4096x1024 70.6 / 69.3, 2x4096x2048 71.5 / 68.9,
/// 1x5376x4096 91.6-91.7 / 90.0-90.1, 3x4096x2048 104.7-104.8 / 103.0), 16-bit lost (2: bf16
/// 8x2048x1024 38.5 / 40.3-40.4, 2x5376x4096 92.2 / 96.8, 4x5376x2048 91.0 / 96.5; 3: bf16
/// 3x5376x4096 136.3-136.4 / 136.6-136.7); fewer lost (f32 4x256x4096, 4 spans a block:
/// 21.6-21.7 / 27.9). Not on `fast_memory` devices, where it lost at every shape tried (H200,
/// docs/perf.md session 43; SiLU, µs, `bwd_cfw2` / `CCV1D_CFW2=0`): bf16 4x5376x4096 156.1 /
/// 144.1 (no activation 129.0 / 128.8), 8x5376x4096 304.5 / 281.6, 4x4096x4096 121.1 / 114.7,
/// 8x2048x2048 64.4 / 60.9, 16x2048x1024 64.2 / 60.6, f16 4x5376x4096 156.6 / 146.4; f32
/// 8x2048x1024 53.0 / 52.5, 4x4096x1024 55.9 / 51.7, 2x4096x2048 55.8 / 53.0, 1x5376x4096 74.2 /
/// 71.6, 16x1024x1024 54.8 / 54.0. `CCV1D_CFW2=0 / 1`: never / wherever it can run.
fn bwd_cfw2(p: &BwdPlan, g: &MainGeom, dev: &DeviceInfo) -> bool {
    let inp = &p.inp;
    if inp.width > 4 || dev.vendor != Vendor::Nvidia {
        return false;
    }
    match knob(Knob::Cfw2) {
        Some(v) => v >= 1,
        None if fast_memory(dev) => false,
        None => {
            let spans = chunk_spans(g, inp.seqlen, inp.x.dtype, dev, CF_ITEMS);
            let warps = (NT_CFW2 / dev.warp_size.max(1)) as i64;
            let least = if inp.x.dtype == DType::F32 { 2 } else { 4 };  // spans a warp
            g.brows.saturating_mul(spans) >= least * warps
        }
    }
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

/// Resident `bwd_clw` blocks per multiprocessor: its launch bound (`CCV_CLW_BLOCKS`), and from
/// W = CLW_WIDE on `CCV_CLW_BLOCKS_WIDE` (instances.h: 128 registers instead of 96, which spilled
/// at W >= 6).
pub(super) const CLW_BLOCKS_PER_SM: i64 = 5;
pub(super) const CLW_BLOCKS_PER_SM_WIDE: i64 = 4;
pub(super) const CLW_WIDE: i64 = 6;

pub(super) fn clw_blocks_per_sm(width: i64) -> i64 {
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
/// 50.4 / 43.8). 16-bit W = 1 keeps `bwd_cls`. f32 (375 / 383 at W = 4 in session 26) takes it
/// since the halo and the walk's edges, at W <= CLW_F32_MAX_W and W = 8 on grids of two waves or
/// more (session 35, SiLU, µs, `bwd_cls` against it): 4x5376x4096 W = 1-5 370.7 / 364.0, 372.9 /
/// 367.4, 373.6 / 369.5, 374.6 / 372.6, 384.3 / 374.9 (no activation W = 4 370.5 / 370.8),
/// 1x5376x4096 (2.04 waves) 103.1 / 102.5, 16x5376x512 195.2 / 190.3, 2x5376x4096 196.9 / 190.4;
/// W = 8: 4x5376x4096 400.1 / 392.9, 2x5376x4096 213.7 / 203.8, 1x5376x4096 115.6 / 107.2
/// (16x5376x512 200.4 / 202.0); not at W = 6 / 7 (385.5 / 394.6, 379.6 / 388.2) nor then on
/// one-wave grids (8x2048x1024 76.3 / 77.1, 4x4096x512 41.4 / 41.6; 4x256x4096 23.8 / 23.3). Since
/// session 37 at W = 2-4 (since session 38 W = 1-4) on every grid, with the halo
/// (`clw_f32_any_grid`), and in 64-token chunks where those make three waves or more
/// (`bwd_clw_geometry`: 8x2048x1024 75.3 / 72.2, 4x4096x512 41.2 / 40.4). On `fast_memory`
/// devices f32 at W <= 4 keeps `bwd_cls` on mid-sized problems (CLS_F32_FAST elements), where
/// `bwd_clw` lost (H200, docs/perf.md session 43; SiLU W = 4, µs, `bwd_clw` / `bwd_cls`):
/// 8x2048x1024 61.2 / 54.5 (no activation 56.7 / 53.8; W = 2 even, 53.3 / 53.7), 4x4096x512
/// 35.1 / 31.4, 4x2048x1024 35.0 / 30.8, 1x5376x4096 77.3 / 71.3, 16x2048x1024 104.9 / 102.9;
/// even at 4x256x4096 (18.6 / 18.7), and bigger ones stay (2x5376x4096 133.0 / 134.9,
/// 4x5376x4096 257.9 / 289.4). There f32 at W = 8 takes it on every grid and W = 6 / 7 from
/// CLW_F32_FAST_WIDE_ELEMS elements (H200, docs/perf.md session 47; SiLU, µs, `bwd_cls` /
/// `bwd_clw`): W = 8 1x5376x4096 98.6 / 76.8, 8x2048x1024 76.3 / 60.0, 4x4096x512 46.9 / 35.6,
/// 4x256x4096 29.4 / 22.8 (4x5376x4096 269.9 / 275.0, on `bwd_clw` before too); W = 6 / 7
/// 4x5376x4096 303.7 / 271.7, 301.6 / 271.5; below it mixed (W = 7 2x5376x4096 138.1 / 147.2,
/// 16x5376x512 150.9 / 146.2; W = 6 8x2048x1024 57.2 / 57.2). `CCV1D_CL_BWD=0` / `1`: never /
/// wherever it can run.
fn bwd_clw(p: &BwdPlan, dev: &DeviceInfo) -> bool {
    let inp = &p.inp;
    let allowed = bwd_streams(p) && inp.dim % (16 / inp.x.dtype.size() as i64) == 0 && inp.seqlen <= (i32::MAX / 2) as i64;
    match knob(Knob::ClBwd) {
        Some(v) => allowed && v >= 1,
        None if inp.x.dtype == DType::F32 => {
            let elems = inp.batch.saturating_mul(inp.dim).saturating_mul(inp.seqlen);
            let fast = fast_memory(dev);
            let fast_cls = fast && inp.width <= CLW_F32_ANY_GRID_MAX_W && CLS_F32_FAST.contains(&elems);
            let fast_clw = fast && (inp.width == 8 || (CLW_F32_FAST_WIDE.contains(&inp.width) && elems >= CLW_F32_FAST_WIDE_ELEMS));
            allowed
                && !fast_cls
                && (clw_f32_any_grid(inp.x.dtype, inp.width)
                    || fast_clw
                    || ((inp.width <= CLW_F32_MAX_W || inp.width == 8)
                        && bwd_clw_geometry(inp, dev)
                            .is_ok_and(|g| g.n_blocks >= CLW_F32_WAVES * clw_wave(dev, inp.width))))
        }
        None => allowed && inp.width >= 2,
    }
}

/// f32's `bwd_clw`: the widest below W = 8 (which takes it too), and the fewest waves of blocks
/// (`bwd_clw`).
pub(super) const CLW_F32_MAX_W: i64 = 5;
pub(super) const CLW_F32_WAVES: i64 = 2;

/// Whether f32 at this width takes `bwd_clw`, with its halo, on every grid (W = 1-4), not only
/// on grids of CLW_F32_WAVES waves or more: on smaller grids, in the stream geometry's chunks,
/// it beat `bwd_cls` with the halo (H100, docs/perf.md session 37, `CCV1D_CL_BWD=2` against the
/// default, SiLU W = 4 unless noted, µs): 4x256x4096 23.7-23.8 / 23.0-23.2 (no activation 23.3 /
/// 22.2, W = 2 22.7-22.8 / 22.0), 2x2048x1024 23.5 / 22.8-22.9, 8x512x1024 23.6 / 22.7-22.8,
/// 2x1024x2048 23.6 / 22.6-22.8, 4x1024x1024 23.6 / 22.8-22.9, 1x2048x4096 even (40.6-40.7);
/// without the halo (`CCV1D_CL_BWD=1`) by 0.3-0.4. W = 1 since session 38 (SiLU, µs, `bwd_cls`
/// against it with the halo): 4x256x4096 21.5-21.6 / 21.2-21.3 (no activation 21.4 / 21.1),
/// 2x2048x1024 21.3 / 21.1, 4x4096x512 even (37.7-37.8 / 37.6-37.8); 8x2048x1024 took it
/// already (64-token chunks, 70.6). Not W = 5, where it lost on some grids (8x2048x1024 75.1 /
/// 78.1, 4x4096x512 42.0 / 42.8-43.0) and won on others (2x2048x1024 25.0 / 23.6, 8x512x1024 24.3
/// / 23.5, 1x2048x4096 42.0 / 41.0, 4x256x4096 24.4 / 24.1).
fn clw_f32_any_grid(dt: DType, width: i64) -> bool {
    dt == DType::F32 && (1..=CLW_F32_ANY_GRID_MAX_W).contains(&width)
}

/// The widest f32 `bwd_clw` on every grid (`clw_f32_any_grid`).
const CLW_F32_ANY_GRID_MAX_W: i64 = 4;
/// f32 widths that take `bwd_clw` on `fast_memory` devices from CLW_F32_FAST_WIDE_ELEMS elements
/// (B·D·L) on (`bwd_clw`).
const CLW_F32_FAST_WIDE: std::ops::RangeInclusive<i64> = 6..=7;
const CLW_F32_FAST_WIDE_ELEMS: i64 = 1 << 26;
/// Elements (B·D·L) of the f32 problems that keep `bwd_cls` on `fast_memory` devices (`bwd_clw`).
const CLS_F32_FAST: std::ops::Range<i64> = (1 << 23)..(40 << 20);

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
/// 57.8, 66.8 / 60.0; at 8x5376x512 W = 8 lost, 66.7 against its 256: 71.4). Up to W =
/// CLW_SHORT_MAX_W those grids take CLW_CHUNK_SHORT instead (48 tokens a warp, so a ring of 3):
/// since the partials stay in L2 (put_partial's KEEP) more chunks cost little (H100, docs/perf.md
/// session 36, SiLU W = 4, µs, 256 / 160 / 192 / 224): bf16 4x5376x4096 191.2 / 188.8 / 188.8 /
/// 190.0, no activation 189.1 / 189.0 / 187.1 / 188.1, W = 2 187.6 / 184.5 / 185.3 / 186.4, f32
/// 371.2 / 370.2 / 369.0 / 369.7, bf16 2x5376x4096 100.0 / 96.5 / 97.8 / 98.6, 1x5376x4096 54.1 /
/// 52.4 / 53.4 / 55.9, 16x5376x512 100.2 / 102.5 / 97.4 / 99.8, f32 189.0 / 185.2 / 186.4 /
/// 187.1; at W = 5 / 6 shorter chunks lost (bf16 193.2 / 205.7 at 192, 199.9 / 215.1).
/// f32 up to W = CLW_F32_SHORT_MAX_W takes chunks of CLW_F32_SHORT (16 tokens a warp: four steps
/// of 4) where those make CLW_HALO_WAVES to CLW_F32_SHORT_MAX_WAVES waves (so with the halo),
/// whatever the chunks above would be: H100, docs/perf.md session 37 (`CCV1D_CL_CHUNK=64` against
/// the default, SiLU W = 4, µs): 8x2048x1024 (6.2 waves of 64; `bwd_cls` before) 75.3 / 72.2, W = 2
/// / 3 75.3 / 71.6, 75.5 / 72.0, 4x4096x512 (3.1) 41.2 / 40.4, 2x4096x2048 (6.2) 78.7 / 73.2,
/// 4x2048x2048 78.3 / 73.3, 1x5376x4096 (8.1) 100.7 / 94.6, 4x5376x1024 97.3 / 94.6, 8x5376x512
/// 97.2 / 94.6; 4x2048x1024, 8x1024x1024, 16x1024x512 (3.1) even (40.5-40.6 / 40.4-40.6). Bigger
/// grids kept 192 (16x2048x1024, 12.4 waves, 143.6 / 144.1; 4x5376x4096 369.3 / 381.3;
/// 2x5376x4096 186.8 / 190.2), and W = 5 lost (8x2048x1024 75.1 / 77.0). On `fast_memory`
/// devices 16-bit SiLU takes longer chunks where those make two waves, CLW_CHUNK_FAST_SILU (128
/// tokens a warp) at W = 3-4 and CLW_CHUNK_FAST_SILU_WIDE at W = 5-7: the short walks'
/// recomputed tokens cost instruction issue that SiLU has no room for there (H200, docs/perf.md
/// session 43; bf16, µs): W = 4, the short chunks / 512, 4x5376x4096 168.0 / 140.5, W = 3 147.5 /
/// 137.4, 2x5376x4096 (2.0 waves of 512) 87.2 / 76.0, 4x5376x2048 88.1 / 77.1, 8x5376x4096 330.6
/// / 268.1; W = 5-7, the default / 512 / 1024, 4x5376x4096 W = 5 184.1 / 163.3 / 158.7, W = 6
/// 190.3 / 170.5 / 167.7, W = 7 185.3 / 185.2 / 181.4. Not taken at 1x5376x4096 (1.0 wave of
/// 512, 44.7 / 48.9), W = 2 (132.6 / 137.3), W = 8 (197.3 / 197.4 / 197.5) or without activation
/// (W = 4 133.5 / 138.7, W = 6 138.9 / 142.2). There W = 4 without activation takes CLW_CHUNK
/// where that makes CLW_CHUNK_FAST_PLAIN_WAVES waves (H200, docs/perf.md session 47; µs, 192 /
/// 256): bf16 4x5376x4096 133.4 / 132.8, 2x5376x4096 70.4 / 69.2, 8x5376x4096 264.8 / 261.7,
/// 16x5376x512 70.6 / 69.2, f16 alike; not at 1x5376x4096 (2.0 waves: 38.3 / 39.3) nor at W = 2 /
/// 3 (129.7 / 130.5, 131.2 / 131.3). Knobs set the chunk instead.
fn bwd_clw_geometry(inp: &ConvInputs, dev: &DeviceInfo) -> Result<MainGeom> {
    let (dt, batch, dim, seqlen, width) = (inp.x.dtype, inp.batch, inp.dim, inp.seqlen, inp.width);
    let fit = ClFit { blocks_per_sm: clw_blocks_per_sm(width), one_wave: None };
    let mut g = cl_stream_geometry(batch, dim, seqlen, fit, dev)?;
    let (n_ctiles, wave) = (g.n_ctiles, clw_wave(dev, width));
    let blocks = |chunk: i64| batch.saturating_mul(n_ctiles).saturating_mul(ceil_div(seqlen, chunk));
    let mut take = |chunk: i64| (g.chunk, g.n_chunks, g.n_blocks) = (chunk, ceil_div(seqlen, chunk), blocks(chunk));
    let chunk = if width >= CLW_LONG_W { CLW_CHUNK_LONG } else { CLW_CHUNK };
    let tuned = knob(Knob::ClChunk).is_some() || knob(Knob::ClTiles).is_some();
    if !tuned && seqlen >= chunk && blocks(chunk) >= 2 * wave && blocks(chunk) <= MAX_BLOCKS {
        take(if width <= CLW_SHORT_MAX_W && blocks(CLW_CHUNK_SHORT) <= MAX_BLOCKS { CLW_CHUNK_SHORT } else { chunk });
        // fast memory, 16-bit: longer chunks (and the waves they need) where they gained
        let long_chunk = match (width, inp.act) {
            (3..=CLW_SHORT_MAX_W, Act::Silu) => Some((CLW_CHUNK_FAST_SILU, 2)),
            (5..=7, Act::Silu) => Some((CLW_CHUNK_FAST_SILU_WIDE, 2)),
            (4, Act::None) => Some((CLW_CHUNK, CLW_CHUNK_FAST_PLAIN_WAVES)),
            _ => None,
        };
        if let Some((c, waves)) = long_chunk.filter(|_| fast_memory(dev) && dt != DType::F32) {
            if seqlen >= c && blocks(c) >= waves * wave {
                take(c);
            }
        }
    }
    let f32_short_waves = CLW_HALO_WAVES * wave..=CLW_F32_SHORT_MAX_WAVES * wave;
    if !tuned && dt == DType::F32 && width <= CLW_F32_SHORT_MAX_W && seqlen >= CLW_F32_SHORT && f32_short_waves.contains(&blocks(CLW_F32_SHORT)) {
        take(CLW_F32_SHORT);
    }
    Ok(g)
}

/// `bwd_clw_geometry`'s chunks where the grid allows them: below CLW_LONG_W, and from it on; up
/// to CLW_SHORT_MAX_W on the same grids, CLW_CHUNK_SHORT.
const CLW_CHUNK: i64 = 256;
const CLW_CHUNK_LONG: i64 = 512;
const CLW_LONG_W: i64 = 7;
const CLW_CHUNK_SHORT: i64 = 192;
const CLW_CHUNK_FAST_SILU: i64 = 512;
const CLW_CHUNK_FAST_SILU_WIDE: i64 = 1024;
const CLW_CHUNK_FAST_PLAIN_WAVES: i64 = 3;
const CLW_SHORT_MAX_W: i64 = 4;
/// f32's short chunks (`bwd_clw_geometry`): the chunk, the widest W, the most waves.
pub(super) const CLW_F32_SHORT: i64 = 64;
pub(super) const CLW_F32_SHORT_MAX_W: i64 = 4;
pub(super) const CLW_F32_SHORT_MAX_WAVES: i64 = 10;

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

/// Whether `bwd_clw`'s groups copy their late tokens (x of the last K, x and dout of the K after
/// the walk) at their start, when the next group reads them too (`CCV_F_CLW_HALO`, bwd_clw.hip):
/// on grids of CLW_HALO_WAVES waves or more at W <= CLW_HALO_MAX_W. There the ring copied them at
/// the walk's end, after the next group's copies had left L2, so DRAM served them twice (H100 ncu,
/// bf16 4x5376x4096 SiLU: 373.8 MB read against 352.3; with the halo 354.7). H100, docs/perf.md
/// session 34 (calls B-D, bf16 SiLU, µs, without / with): 4x5376x4096 W = 4 199.5 / 194.6, no
/// activation 197.5 / 193.4, W = 5 205.0 / 198.3, W = 3 195.5 / 192.3, W = 2 192.3 / 190.6,
/// 2x5376x4096 (4 waves) 103.5 / 101.9; slower at W = 6 (203.0 / 206.6) and W = 8 (214.6 /
/// 217.1), where the extra copies and instructions cost more than the bytes, and on smaller grids,
/// where less left L2 (1x5376x4096, 2.04 waves, 55.2 / 55.8-57.1; one wave: 4x256x4096 14.8 /
/// 15.4, 8x2048x1024 42.2 / 42.6). f32 at W = 1-4 takes it on every grid (`clw_f32_any_grid`).
/// `CCV1D_CL_BWD=2` turns it on wherever it is compiled (tests).
fn clw_halo(g: &MainGeom, dt: DType, width: i64, dev: &DeviceInfo) -> bool {
    knob(Knob::ClBwd) == Some(2)
        || clw_f32_any_grid(dt, width)
        || (width <= CLW_HALO_MAX_W && g.n_blocks >= CLW_HALO_WAVES * clw_wave(dev, width))
}

/// The widest `bwd_clw` taking the halo by default (instances.h compiles it up to
/// `CCV_CLW_HALO_MAXW`), and the fewest waves of blocks.
pub(super) const CLW_HALO_MAX_W: i64 = 5;
pub(super) const CLW_HALO_WAVES: i64 = 3;

/// `bwd_clw`'s most ring slots (`CCV_CLW_RING`).
pub(super) const CLW_RING: i32 = 4;

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
pub(super) fn reduce_lanes(n_partials: i64) -> u32 {
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
            // rows with state tensors or state_indices on the instances that read them (bwd_cf.hip)
            let states = km.flags & (F_STATES_ANY | F_STATE_IDX) != 0;
            let cfwl = bwd_cfwl(p, dev);
            let cfw2 = !states && !cfwl && bwd_cfw2(p, g, dev);
            let fam = match (bwd_cfw_rows(p, g, dev).1, states) {
                _ if cfwl => "cfwl",
                _ if cfw2 => "cfw2",
                (true, false) => "cfw7",
                (true, true) => "cfw7x",
                (false, false) => "cfw",
                (false, true) => "cfwx",
            };
            (fam, if cfw2 { NT_CFW2 } else { NT })
        } else if split_short_rows(&mut km, inp, g) {
            ("cfs", NT)
        } else if g.layout == Layout::ChannelLast && bwd_clw(p, dev) {
            km.rows_log2 = clw_ring(g, inp.width, dev);
            if clw_halo(g, dt, inp.width, dev) {
                km.flags |= F_CLW_HALO;
            }
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
