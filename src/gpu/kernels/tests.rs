//! Unit tests of kernel selection and launch geometry (launches are built and checked, not
//! run; the on-GPU checks are in `gputest`).

use super::*;
use crate::gpu::launch::peak_mem_gbps;
use std::mem::offset_of;

/// A launch's parameters, back from its bytes (tests).
#[cfg(test)]
pub(super) fn params_of(l: &Launch) -> KParams {
    assert_eq!(l.params.len(), KPARAMS_SIZE);
    let mut k = KParams::default();
    unsafe { std::ptr::copy_nonoverlapping(l.params.as_ptr(), &mut k as *mut KParams as *mut u8, KPARAMS_SIZE) };
    k
}

const KPARAMS_H: &str = include_str!("../../../hip/kparams.h");
const INSTANCES_H: &str = include_str!("../../../hip/instances.h");

fn h100() -> DeviceInfo {
    DeviceInfo { vendor: Vendor::Nvidia, warp_size: 32, multiprocessors: 132, max_threads_per_block: 1024, max_shared_mem_per_block: 49152, arch: 90, mem_gbps: 3352 }
}
/// An H200: an H100's multiprocessors with `fast_memory` (3201 MHz x 6144 bits).
fn h200() -> DeviceInfo {
    DeviceInfo { mem_gbps: 4916, ..h100() }
}
fn mi300() -> DeviceInfo {
    DeviceInfo { vendor: Vendor::Amd, warp_size: 64, multiprocessors: 304, max_threads_per_block: 1024, max_shared_mem_per_block: 65536, arch: 942, mem_gbps: 5300 }
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
        ("CCV_F_CLW_HALO", F_CLW_HALO),
        ("CCV_F_W_ROWS", F_W_ROWS),
        ("CCV_F_PE_TOKENS", F_PE_TOKENS),
        ("CCV_F_STEP_RUN", F_STEP_RUN),

        ("CCV_DT_F32", DT_F32), ("CCV_DT_F16", DT_F16), ("CCV_DT_BF16", DT_BF16),
    ];
    for (n, v) in flags {
        assert_eq!(header_define(KPARAMS_H, n), v as i64, "{n}");
    }
    assert_eq!(DT_F32, DType::F32.code());
    assert_eq!(DT_F16, DType::F16.code());
    assert_eq!(DT_BF16, DType::BF16.code());
    assert_eq!(header_define(INSTANCES_H, "CCV_CF_ITEMS"), CF_ITEMS);
    assert_eq!(header_define(INSTANCES_H, "CCV_CFWL_ITEMS"), CFWL_ITEMS);
    assert_eq!(header_define(INSTANCES_H, "CCV_CL_TT"), CL_TT);
    assert_eq!(header_define(INSTANCES_H, "CCV_CL_CC"), CL_CC);
    assert_eq!(header_define(INSTANCES_H, "CCV_UPD_SMEM"), UPD_SMEM);
    assert_eq!(header_define(INSTANCES_H, "CCV_UPD_ROWS"), UPD_ROWS);
    for fam in ["fwd_cf", "fwd_cfs", "fwd_cfw", "fwd_cl", "fwd_cl11", "fwd_clw", "fwd_pt", "fwd_pe", "bwd_cf", "bwd_cfs", "bwd_cfw", "bwd_cfw7", "bwd_cfwl", "bwd_cfwx", "bwd_cfw7x", "bwd_cl", "bwd_cls", "bwd_clw", "update", "step", "stepv", "fwd_states", "bwd_states"] {
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
    // fwd_cl11's chunk is one CCV_CL_BURST_LONG burst for each of its lanes (4 channels a thread)
    assert_eq!(FWD_CL_LONG_CHUNK, NT as i64 / (CL_CC / 4) * header_define(INSTANCES_H, "CCV_CL_BURST_LONG"));
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
    assert!(CLW_HALO_MAX_W <= header_define(INSTANCES_H, "CCV_CLW_HALO_MAXW"), "bwd_clw's halo on instances without it");
    assert_eq!(header_define(INSTANCES_H, "CCV_FWD_CLW_BLOCKS"), FWD_CLW_BLOCKS_PER_SM);
    // bwd_cfw's launch bounds (W <= 4, then above) as bwd_cf_blocks_per_sm mirrors them
    for dt in ["f32", "f16", "bf16"] {
        assert_eq!(header_macro_arms(INSTANCES_H, &format!("CCV_LB_bwd_cfw_{dt}(W)")), [8, 7]);
    }
    assert_eq!([4, 5, 8].map(bwd_cf_blocks_per_sm), [8, 7, 7]);
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
    // 16-bit: chunks of 88 (8 lanes of one 11-token step) up to 2 waves of them (2 x 132 x 6
    // blocks), else of 64 up to 4 waves of them, else 128
    let h = g(4, 5376, 4096, DType::BF16, 4);
    assert_eq!((h.chunk, h.n_chunks, h.n_blocks), (128, 32, 4 * 84 * 32));
    for (b, d, l, dt, w) in [(8, 2048, 1024, DType::F16, 4), (2, 1000, 6500, DType::BF16, 1), (1, 2048, 6400, DType::F16, 2), (4, 576, 7000, DType::F16, 3), (1, 5376, 4096, DType::BF16, 4), (16, 2048, 1004, DType::BF16, 4)] {
        let h = g(b, d, l, dt, w);
        assert!(h.chunk == 128 && h.n_blocks * 2 > 4 * 132 * 6, "{b}x{d}x{l}");
    }
    for (b, d, l, dt, w) in [(4, 4096, 512, DType::BF16, 4), (4, 256, 4096, DType::BF16, 4), (1, 2048, 4096, DType::F16, 3), (4, 576, 2000, DType::BF16, 1)] {
        let h = g(b, d, l, dt, w);
        assert!(h.chunk == 88 && h.n_blocks <= 2 * 132 * 6, "{b}x{d}x{l}");
    }
    assert_eq!(g(4, 256, 4096, DType::BF16, 4).n_blocks, 4 * 4 * 47);
    for (b, d, l, dt, w) in [(1, 2048, 4401, DType::BF16, 4), (1, 5376, 2048, DType::F16, 2)] {
        let h = g(b, d, l, dt, w);
        assert!(h.chunk == 64 && h.n_blocks <= 4 * 132 * 6 && h.n_blocks / h.n_chunks * ceil_div(l, 88) > 2 * 132 * 6, "{b}x{d}x{l}");
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
            // (one wave of 88-token chunks at W <= 4: fwd_cl11)
            assert_eq!(family(dt, 4, 256, 4096, w), if w >= 5 { "clw" } else { "cl11" });
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

/// `fwd_clw`'s halo (`CCV_F_CLW_HALO`) on grids of two waves or more (H100: 2 x 132 x 8 blocks):
/// 4x5376x4096 (5.09 waves) and 2x5376x4096 (2.55) at W = 5-8 on; the one-wave grids off
/// (1x5376x4096: 0.88 waves, 8x2048x1024, 4x4096x512 and 4x256x4096: 0.97)
#[test]
fn fwd_clw_halo_choice() {
    let halo = |b: i64, d: i64, l: i64, w: i64| {
        let v = fwd_launches(&fwd_plan(inputs(DType::BF16, b, d, l, w, cl(b, d, l))), &h100()).unwrap();
        assert!(v[0].kernel.contains("_clw_"), "{}", v[0].kernel);
        params_of(&v[0]).flags & F_CLW_HALO != 0
    };
    for w in 5..=8 {
        assert!(halo(4, 5376, 4096, w) && halo(2, 5376, 4096, w), "W = {w}");
        for (b, d, l) in [(1, 5376, 4096), (8, 2048, 1024), (4, 4096, 512), (4, 256, 4096)] {
            assert!(!halo(b, d, l, w), "{b}x{d}x{l} W = {w}");
        }
    }
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
            // warp spans at W = 4 in one-step blocks (fwd_one_step) where those make 4 waves
            // (4 x 132 x 12 blocks), f32 on rows of 2 tiles or more: 4x5376x4096 and 1x64x2^20
            let tile = tile_tokens(Layout::ChannelFirst, dt);
            let warp = b * d * ceil_div(l, tile) >= 4 * 132 * 12 && (dt != DType::F32 || l >= 2 * tile);
            let fam = if warp { "cfw" } else if params_of(&v[0]).rows_log2 > 0 { "cfs" } else { "cf" };
            assert_eq!(v[0].kernel, format!("ccv1d_fwd_{fam}_{}_w4", dt.name()));
            check_grid(&v[0]);
            let k = params_of(&v[0]);
            assert_eq!(k.chunk % tile, 0);
            assert!(k.chunk / tile <= MAX_TILES_PER_BLOCK);
            assert_eq!(k.n_chunks, ceil_div(l, k.chunk));
            assert!((k.n_chunks - 1) * k.chunk < l);
            if warp {
                assert_eq!((k.rows_log2, k.chunk, k.brows), (0, tile, 1), "one step: a tile of one row");
                assert_eq!(k.n_blocks, b * d * k.n_chunks);
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
    // several batch rows of a channel per block, one step at W <= 4 (4x4096x512: all 4 rows of
    // one span, 4096 blocks; 8x2048x1024: 2 rows of 2 spans); and at W >= 6 on long rows, at
    // most 4 steps (tiles) a block (fwd_max_steps): 4x5376x4096 2 rows of 2 tiles, 4x2048x8192
    // one row of 4 (the old rule took all 4 rows: 16 steps)
    for (dt, b, d, l, w, brows, blocks) in [(DType::BF16, 4, 4096, 512, 4, 4, 4096), (DType::F16, 8, 2048, 1024, 4, 2, 8192), (DType::BF16, 4, 5376, 4096, 6, 2, 10752), (DType::BF16, 4, 2048, 8192, 7, 1, 8192)] {
        let p = fwd_plan(inputs(dt, b, d, l, w, cf(b, d, l)));
        let v = fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap();
        let k = params_of(&v[0]);
        assert_eq!(v[0].kernel, format!("ccv1d_fwd_cfw_{}_w{w}", dt.name()));
        assert_eq!((k.brows as i64, k.n_chunks, k.n_blocks), (brows, 1, blocks), "{dt:?} {b}x{d}x{l}");
    }
    // W >= 6 (fwd_cf_chunks): f32 in 3-tile chunks and a shorter last one (16 tiles in 5 x 3 + 1,
    // 32 in 10 x 3 + 2, 8 in 3 + 3 + 2, 4 in 3 + 1); 16-bit in evened chunks of at most 4 tiles
    // (main_geometry's 7 + 1 become 4 + 4, its whole 8-tile rows of 2x2048x16384 too)
    for (dt, b, d, l, w, chunk, n) in [
        (DType::F32, 1, 2048, 16384, 8, 3072, 6),
        (DType::F32, 1, 1024, 32768, 8, 3072, 11),
        (DType::F32, 1, 1400, 8192, 6, 3072, 3),
        (DType::F32, 4, 5376, 4096, 6, 3072, 2),
        (DType::F32, 4, 5376, 2048, 7, 2048, 1),
        (DType::BF16, 1, 2048, 16384, 6, 8192, 2),
        (DType::BF16, 2, 2048, 16384, 7, 8192, 2),
    ] {
        let p = fwd_plan(inputs(dt, b, d, l, w, cf(b, d, l)));
        let k = params_of(&fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap()[0]);
        assert_eq!((k.chunk, k.n_chunks, k.n_blocks), (chunk, n, b * d * n), "{dt:?} {b}x{d}x{l} W = {w}");
    }
    // at W <= 5 on the tile kernel, chunks of at most 2 tiles, evened (fwd_cf_chunks):
    // main_geometry's whole rows of 4 and 5 tiles (2 + 2 + 1) at W = 5 and on grids of one-step
    // blocks under 4 waves, f32 rows of one tile whole; at W <= 4 elsewhere one tile a block on
    // fwd_cfw (fwd_one_step; f32 from rows of 2 tiles)
    for (dt, b, d, l, w, fam, chunk, n) in [
        (DType::F32, 4, 5376, 4096, 5, "cf", 2048, 2),
        (DType::F32, 4, 2048, 5000, 5, "cf", 2048, 3),
        (DType::F32, 1, 1024, 4096, 4, "cf", 1024, 4),
        (DType::F32, 8, 2048, 1024, 4, "cf", 1024, 1),
        (DType::BF16, 4, 5376, 8192, 5, "cf", 4096, 2),
        (DType::F32, 4, 5376, 4096, 4, "cfw", 1024, 4),
        (DType::F32, 4, 5376, 4096, 1, "cfw", 1024, 4),
        (DType::F32, 1, 2048, 16384, 4, "cfw", 1024, 16),
        (DType::F32, 1, 1024, 32768, 2, "cfw", 1024, 32),
        (DType::F32, 4, 2048, 5000, 4, "cfw", 1024, 5),
        (DType::F32, 2, 1024, 4096, 4, "cfw", 1024, 4),
        (DType::BF16, 4, 5376, 8192, 4, "cfw", 2048, 4),
        (DType::F16, 1, 2048, 16384, 3, "cfw", 2048, 8),
        (DType::BF16, 4, 5376, 4096, 4, "cfw", 2048, 2),
        (DType::BF16, 8, 5376, 2048, 4, "cfw", 2048, 1),
    ] {
        let p = fwd_plan(inputs(dt, b, d, l, w, cf(b, d, l)));
        let v = fwd_launches_pt(&p, &h100(), Some(0), Some(0)).unwrap();
        assert_eq!(v[0].kernel, format!("ccv1d_fwd_{fam}_{}_w{w}", dt.name()), "{b}x{d}x{l}");
        let k = params_of(&v[0]);
        assert_eq!((k.chunk, k.n_chunks, k.n_blocks, k.brows), (chunk, n, b * d * n, 1), "{dt:?} {b}x{d}x{l} W = {w}");
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
        let k = params_of(&v[0]);
        // 8x2048x1024: 1.7 waves of 88-token chunks on the MI300's 304 CUs
        assert_eq!(v[0].kernel, if k.chunk == 88 { "ccv1d_fwd_cl11_bf16_w3" } else { "ccv1d_fwd_cl_bf16_w3" });
        assert_eq!(k.chunk == 88, (b, d, l) == (8, 2048, 1024));
        check_grid(&v[0]);
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
    // f32: 2-tile chunks at batch >= 4 where main_geometry gives whole rows of >= 4 tiles
    assert_eq!(geom(DType::F32, (4, 5376, 4096)), (2048, 43008, 1, 2));
    assert_eq!(geom(DType::F32, (4, 5376, 8192)), (2048, 86016, 1, 2));
    assert_eq!(geom(DType::F32, (2, 5376, 4096)), (4096, 5376, 2, 1));
    assert_eq!(geom(DType::F32, (8, 5376, 2048)).0, 2048);
    // f32 batch 1-2, rows of >= 8 tiles: 3-tile chunks up to 2048 rows, at batch 2 up to 8192
    assert_eq!(geom(DType::F32, (1, 2048, 8192)), (3072, 2048 * 3, 1, 2));
    assert_eq!(geom(DType::F32, (1, 1400, 8192)), (3072, 1400 * 3, 1, 2), "ccv1d test rows/f32-3tile-chunks");
    assert_eq!(geom(DType::F32, (1, 1024, 32768)), (3072, 1024 * 11, 1, 2));
    assert_eq!(geom(DType::F32, (2, 4096, 8192)), (3072, 8192 * 3, 1, 2));
    assert_eq!(geom(DType::F32, (1, 5376, 8192)).0, 8192);
    assert_eq!(geom(DType::F32, (2, 5376, 8192)).0, 8192);
    assert_ne!(geom(DType::F32, (1, 1024, 4096)).0, 3072, "rows of 4 tiles: main_geometry's");
    let w5 = bwd_plan(inputs(DType::F32, 4, 5376, 4096, 5, cf(4, 5376, 4096)));
    assert_eq!(params_of(&bwd_launches(&w5, &h100(), 0x8000_0000).unwrap()[0]).chunk, 4096, "W = 5 keeps whole rows");
    assert_eq!(geom(DType::BF16, (4, 5376, 4096)), (4096, 5376, 4, 1));
    // at most 12 steps (tiles) a block (cf_max_steps): no more 2 rows of 8 tiles or a whole
    // 16-tile row; 2 rows of 6 still
    assert_eq!(geom(DType::BF16, (2, 2048, 16384)), (16384, 4096, 1, 2));
    assert_eq!(geom(DType::BF16, (4, 2048, 8192)), (8192, 4096, 2, 2));
    assert_eq!(geom(DType::BF16, (1, 1024, 32768)), (16384, 2048, 1, 2));
    assert_eq!(geom(DType::BF16, (2, 2048, 12288)), (12288, 2048, 2, 1));
    assert_eq!(geom(DType::F32, (1, 4096, 16384)).0, 8192);
    assert_eq!(geom(DType::BF16, (8, 2048, 1024)), (2048, 2048, 8, 1));
}

/// `bwd_cfw` at W <= 4 on `bwd_cfw7` (7 resident blocks) where its grid's last wave is
/// fuller: the Mamba-2 grid (5376 blocks: 5.09 waves at 8 blocks a multiprocessor, 5.82 at
/// 7) takes it, at any batch and dtype, unless its warps walk enough spans for `bwd_cfw2`
/// (bwd_cfw2_choice), and so does a grid of 2200 blocks (2.08 / 2.38 waves); grids of 2048 and
/// 2000 blocks (1.94 / 2.22, 1.89 / 2.16 waves), W = 5, AMD and the small kernels' shapes do not.
#[test]
fn bwd_cfw7_choice() {
    let fam = |dt: DType, (b, d, l): (i64, i64, i64), w: i64, dev: &DeviceInfo| {
        let p = bwd_plan(inputs(dt, b, d, l, w, cf(b, d, l)));
        let v = bwd_launches_pt(&p, dev, 0x8000_0000, SmallBwd::ALL).unwrap();
        let k = params_of(&v[0]);
        (v[0].kernel.clone(), k.n_blocks, k.brows)
    };
    let dev = h100();
    assert_eq!(fam(DType::BF16, (2, 5376, 4096), 4, &dev), ("ccv1d_bwd_cfw7_bf16_w4".into(), 5376, 2));
    assert_eq!(fam(DType::F16, (1, 5376, 4096), 2, &dev), ("ccv1d_bwd_cfw7_f16_w2".into(), 5376, 1));
    assert_eq!(fam(DType::F32, (1, 1100, 4096), 4, &dev), ("ccv1d_bwd_cfw7_f32_w4".into(), 2200, 1));
    // f32 4x5376x4096 in 2-tile chunks (bwd_cfw_f32_chunks): 43008 one-row blocks, fuller at 8
    assert_eq!(fam(DType::F32, (4, 5376, 4096), 4, &dev), ("ccv1d_bwd_cfw_f32_w4".into(), 43008, 1));
    assert_eq!(fam(DType::BF16, (1, 1100, 8192), 3, &dev).0, "ccv1d_bwd_cfw7_bf16_w3");
    for (dt, shape, w) in [(DType::BF16, (8, 2048, 1024), 4), (DType::F32, (4, 256, 4096), 4), (DType::BF16, (4, 5376, 4096), 5), (DType::BF16, (1, 1000, 8192), 4)] {
        assert!(fam(dt, shape, w, &dev).0.starts_with("ccv1d_bwd_cfw_"), "{shape:?} {dt:?} W {w}");
    }
    assert!(fam(DType::BF16, (4, 5376, 4096), 4, &mi300()).0.starts_with("ccv1d_bwd_cfw_"));
    // rows with state tensors or state_indices: the instances that read them (bwd_cfwx, bwd_cfw7x)
    let with = |f: &dyn Fn(&mut BwdPlan), w: i64| {
        let mut p = bwd_plan(inputs(DType::BF16, 4, 5376, 4096, w, cf(4, 5376, 4096)));
        f(&mut p);
        bwd_launches(&p, &dev, 0x8000_0000).unwrap()[0].kernel.clone()
    };
    let idx = |p: &mut BwdPlan| p.inp.pool.state_indices = Some(IdxView { addr: 0x7600_0000, stride: [1, 1], elem_bytes: 4 });
    let init = |p: &mut BwdPlan| p.inp.initial_states = Some(view(0x7400_0000, DType::BF16, [5376 * 8, 8, 1]));
    let dfinal = |p: &mut BwdPlan| p.dfinal_states = Some(view(0x7400_0000, DType::BF16, [5376 * 8, 8, 1]));
    // (4x5376x4096 without them: bwd_cfw2)
    assert_eq!(with(&idx, 4), "ccv1d_bwd_cfw7x_bf16_w4");
    assert_eq!(with(&init, 4), "ccv1d_bwd_cfw7x_bf16_w4");
    assert_eq!(with(&dfinal, 6), "ccv1d_bwd_cfwx_bf16_w6");
    assert_eq!(with(&|_| {}, 6), "ccv1d_bwd_cfw_bf16_w6");
    assert!(fam(DType::BF16, (4, 4096, 512), 4, &dev).0.starts_with("ccv1d_bwd_pt_"));
}

/// `bwd_cfw` at W <= 4 (NVIDIA, rows without states) on `bwd_cfw2` (256-thread blocks) where
/// each of a block's 8 warps walks at least 4 spans (f32: 2), with the batch rows and chunk it had.
#[test]
fn bwd_cfw2_choice() {
    let run = |dt: DType, (b, d, l): (i64, i64, i64), w: i64, dev: &DeviceInfo| {
        let p = bwd_plan(inputs(dt, b, d, l, w, cf(b, d, l)));
        let v = bwd_launches(&p, dev, 0x8000_0000).unwrap();
        let k = params_of(&v[0]);
        (v[0].kernel.clone(), v[0].block[0], k.brows, k.chunk, v.len())
    };
    let dev = h100();
    // 8 rows x 4 spans (f32, 1024 tokens) a block: one partial row, no reduce launch
    assert_eq!(run(DType::F32, (8, 2048, 1024), 4, &dev), ("ccv1d_bwd_cfw2_f32_w4".into(), 256, 8, 1024, 1));
    assert_eq!(run(DType::F32, (8, 2048, 1024), 2, &dev).0, "ccv1d_bwd_cfw2_f32_w2");
    // the Mamba-2 shape: 4 rows x 8 spans (bf16, 4096 tokens), the rows bwd_cfw7 had
    assert_eq!(run(DType::BF16, (4, 5376, 4096), 4, &dev), ("ccv1d_bwd_cfw2_bf16_w4".into(), 256, 4, 4096, 1));
    assert_eq!(run(DType::F16, (4, 5376, 4096), 3, &dev).0, "ccv1d_bwd_cfw2_f16_w3");
    // f32 at 2 spans a warp: 4 rows x 4 spans, 1 row x 16
    assert_eq!(run(DType::F32, (4, 4096, 1024), 4, &dev), ("ccv1d_bwd_cfw2_f32_w4".into(), 256, 4, 1024, 1));
    assert_eq!(run(DType::F32, (1, 5376, 4096), 4, &dev).0, "ccv1d_bwd_cfw2_f32_w4");
    // fewer (16-bit: 2 or 3 spans a warp; f32: 1 or less): bwd_cfw / bwd_cfw7 in 128-thread blocks
    let fewer = [(DType::BF16, (8, 2048, 1024)), (DType::BF16, (2, 5376, 4096)), (DType::BF16, (3, 5376, 4096)), (DType::F32, (4, 256, 4096)), (DType::F32, (4, 5376, 4096)), (DType::F32, (1, 1100, 8192))];
    for (dt, shape) in fewer {
        let (name, threads, ..) = run(dt, shape, 4, &dev);
        assert!(name.starts_with("ccv1d_bwd_cfw_") || name.starts_with("ccv1d_bwd_cfw7_"), "{shape:?} {dt:?}: {name}");
        assert_eq!(threads, 128);
    }
    // W = 5, AMD, rows with states: never
    assert!(run(DType::BF16, (4, 5376, 4096), 5, &dev).0.starts_with("ccv1d_bwd_cfw_"));
    assert!(run(DType::F32, (8, 2048, 1024), 4, &mi300()).0.starts_with("ccv1d_bwd_cfw_"));
    let mut p = bwd_plan(inputs(DType::F32, 8, 2048, 1024, 4, cf(8, 2048, 1024)));
    p.inp.initial_states = Some(view(0x7400_0000, DType::F32, [2048 * 8, 8, 1]));
    assert!(bwd_launches(&p, &dev, 0x8000_0000).unwrap()[0].kernel.starts_with("ccv1d_bwd_cfwx_"));
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
    // f32: at W <= 5 and W = 8 on grids of two waves or more (1x5376x4096: 2.04 waves), else bwd_cls
    for w in 1..=8 {
        assert_eq!(family(DType::F32, 4, 5376, 4096, w), if w <= 5 || w == 8 { "clw" } else { "cls" }, "f32 W = {w}");
    }
    assert_eq!(family(DType::F32, 1, 5376, 4096, 4), "clw");
    assert_eq!(family(DType::F32, 16, 5376, 512, 4), "clw");
    // f32 at W = 1-4 on every grid, with the halo (4x256x4096: one wave, a ring of 2), W = 5
    // there on bwd_cls
    for w in 1..=5 {
        let p = bwd_plan(inputs(DType::F32, 4, 256, 4096, w, cl(4, 256, 4096)));
        let v = bwd_launches(&p, &h100(), 0x8000_0000).unwrap();
        let k = params_of(&v[0]);
        if (1..=4).contains(&w) {
            assert_eq!((v[0].kernel.as_str(), k.rows_log2, k.flags & F_CLW_HALO != 0), (format!("ccv1d_bwd_clw_f32_w{w}").as_str(), 2, true));
        } else {
            assert_eq!(v[0].kernel, format!("ccv1d_bwd_cls_f32_w{w}"));
        }
    }
    // f32 at W <= 4 in 64-token chunks where those make 3 to 10 waves (3 x 660 to 10 x 660 blocks
    // at 5 a SM), whatever the chunks otherwise: the halo on, a ring of 3 (16 tokens a warp)
    let f32_geometry = |b: i64, d: i64, l: i64, w: i64| {
        let p = bwd_plan(inputs(DType::F32, b, d, l, w, cl(b, d, l)));
        let v = bwd_launches(&p, &h100(), 0x8000_0000).unwrap();
        let k = params_of(&v[0]);
        (v[0].kernel.clone(), k.chunk, k.rows_log2, k.flags & F_CLW_HALO != 0)
    };
    for (b, d, l, w) in [(8, 2048, 1024, 4), (8, 2048, 1024, 2), (4, 4096, 512, 4), (1, 5376, 4096, 4), (8, 5376, 512, 1), (2, 4096, 2048, 3)] {
        assert_eq!(f32_geometry(b, d, l, w), (format!("ccv1d_bwd_clw_f32_w{w}"), 64, 3, true), "f32 {b}x{d}x{l} W = {w}");
    }
    // not at W = 5, nor past 10 waves (16x2048x1024: 12.4) or under 3 (2x2048x1024: 1.6, the
    // stream geometry's chunks)
    assert_eq!(f32_geometry(8, 2048, 1024, 5).0, "ccv1d_bwd_cls_f32_w5");
    assert_eq!(f32_geometry(16, 2048, 1024, 4).1, 192);
    assert_eq!(f32_geometry(4, 5376, 4096, 4).1, 192);
    let stream = cl_stream_geometry(2, 2048, 1024, ClFit { blocks_per_sm: 5, one_wave: None }, &h100()).unwrap();
    assert_eq!(f32_geometry(2, 2048, 1024, 4), ("ccv1d_bwd_clw_f32_w4".to_string(), stream.chunk, 2, true));
    assert_ne!(family_on(DType::F32, 4, 5374, 4096, 4, 5376), "clw", "D not a multiple of 4");
    // chunks of 256 (from W = 7 on 512) where rows are that long and those make two waves
    // (H100: 2 x 132 x 5 blocks, 2 x 132 x 4 from W = 6), and of 192 on those grids up to W = 4,
    // else the stream geometry's; the ring: 2 slots under two waves, else 4 where a warp walks at
    // least 64 tokens, else 3 (8x5376x128 and 5x3072x2048: gpu_bwd_clw's cases of 3 and 4)
    let rings = [
        (4, 5376, 4096, 4, 192, 3),
        (16, 5376, 512, 4, 192, 3),
        (5, 3072, 2048, 4, 192, 3),
        (5, 3072, 2048, 5, 256, 4),
        (4, 5376, 2048, 4, 192, 3),
        (1, 5376, 4096, 4, 192, 3),
        (4, 5376, 4096, 2, 192, 3),
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
        (4, 5376, 4096, 5, 256, 4),
        (2, 5376, 4096, 4, 192, 3),
    ];
    // the halo: 4x5376x4096 at W = 2-5 and 2x5376x4096 (4 waves), not 1x5376x4096 (2.04 waves)
    let halo = |b: i64, w: i64| {
        let v = bwd_launches(&bwd_plan(inputs(DType::BF16, b, 5376, 4096, w, cl(b, 5376, 4096))), &h100(), 0x8000_0000).unwrap();
        params_of(&v[0]).flags & F_CLW_HALO != 0
    };
    assert!((2..=5).all(|w| halo(4, w)) && !halo(4, 6) && halo(2, 4) && !halo(1, 4));
    for (b, d, l, w, chunk, ring) in rings {
        let p = bwd_plan(inputs(DType::BF16, b, d, l, w, cl(b, d, l)));
        let v = bwd_launches(&p, &h100(), 0x8000_0000).unwrap();
        check_clw_geometry(&v[0], b, d, l);
        let k = params_of(&v[0]);
        assert_eq!((k.chunk, k.rows_log2), (chunk, ring), "{b}x{d}x{l} W = {w}");
        assert_eq!(ring > 2, k.n_blocks >= 2 * 132 * clw_blocks_per_sm(w));
        // the halo on grids of CLW_HALO_WAVES waves or more up to CLW_HALO_MAX_W
        let halo = k.n_blocks >= CLW_HALO_WAVES * 132 * clw_blocks_per_sm(w) && w <= CLW_HALO_MAX_W;
        assert_eq!(k.flags & F_CLW_HALO != 0, halo, "{b}x{d}x{l} W = {w}");
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
                // (4x5376x4096 at W <= 4: bwd_cfw7, bwd_cfw7_choice; with states: the x instances)
                if warp && w <= 4 { "cfw7x" } else if warp { "cfwx" } else if short { "cfs" } else { "cf" }
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
    // one block (direct); f32 takes 2-tile chunks there (bwd_cfw_f32_chunks: one row a block),
    // and at batch 2 whole rows, 16 spans: (11, 5), (6, 9) for 1, 2 rows → 2; 8x600x2048 (ccv1d
    // test rows/grouped-bwd): 3 (groups of 3, 3, 2 rows); 8x2048x1024 bf16, 2 spans per row:
    // (16, 2), (8, 2), (4, 3), (2, 5) → 8; 4x4096x512: one span per row → 4. Long rows
    // (several chunks) stay at one row; so do those of bwd_cf (W = 8). bwd_cfs (rows shorter
    // than a span) takes every row of a channel when the batch is a power of two up to
    // 2^rows_log2 (4x64x64: 4; 3x64x64: 1). Seeds' Small 2x64x256: f32 on warp spans, one
    // span per row, 1 or 2 rows tie at (1, 2) → 2 (no reduce launch); bf16 bwd_cfs → 2
    for (dt, b, d, l, w, rows) in [
        (DType::BF16, 4, 5376, 4096, 4, 4),
        (DType::F32, 4, 5376, 4096, 4, 1),
        (DType::F32, 2, 5376, 4096, 4, 2),
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
    let kp = params_of(lp);
    assert_eq!((lp.kernel.as_str(), kp.flags & (F_STEP_PM | F_STEP_RUN), kp.n_ctiles, kp.chunk), ("ccv1d_stepv_f16_w4", F_STEP_PM, 11, 2));
    // channel-major state_len 4: a thread's 2 channels' rows are one 16-byte vector (the RUN),
    // 21 tiles of 128 x 2 channels, twice the 4-channel thread's 2 rows a block; a slot stride of
    // 8-byte multiples: 4 channels in 8-byte pieces; state_len 3 (above) has no RUN
    let reg4 = UpdatePlan { conv_state: view(0x3000, DType::BF16, [5376 * 4, 4, 1]), state_len: 4, ..reg };
    let l4 = &update_launches(&reg4, &h100()).unwrap()[0];
    check_grid(l4);
    let k4 = params_of(l4);
    assert_eq!((l4.kernel.as_str(), k4.flags & (F_STEP_PM | F_STEP_RUN), k4.n_ctiles, k4.chunk), ("ccv1d_stepv_f16_w4", F_STEP_RUN, 21, 4));
    assert_eq!(l4.grid, [21, 64, 1]);
    assert_eq!(kr.flags & F_STEP_RUN, 0);
    for cs in [view(0x3008, DType::BF16, [5376 * 4, 4, 1]), view(0x3000, DType::BF16, [5376 * 4 + 4, 4, 1])] {
        let k = params_of(&update_launches(&UpdatePlan { conv_state: cs, ..reg4 }, &h100()).unwrap()[0]);
        assert_eq!((k.flags & F_STEP_RUN, k.n_ctiles), (0, 11));
    }
    // state_len 2 (W = 2 at state_len W): 4 channels, their rows one vector
    let reg2 = UpdatePlan { conv_state: view(0x3000, DType::F16, [5376 * 2, 2, 1]), state_len: 2, width: 2, ..reg };
    let k2 = params_of(&update_launches(&reg2, &h100()).unwrap()[0]);
    assert_eq!((k2.flags & F_STEP_RUN, k2.n_ctiles), (F_STEP_RUN, 11));
    let f32v = view(0x1000, DType::F32, [5376, 1, 1]);
    let reg32 = UpdatePlan { x: f32v, out: f32v, conv_state: view(0x3000, DType::F32, [5376 * 3, 3, 1]), ..reg };
    assert_eq!(update_launches(&reg32, &h100()).unwrap()[0].kernel, "ccv1d_step_f32_w4", "f32: the staged step");
    let reg_small = UpdatePlan { batch: 8, ..reg };
    assert_eq!(update_launches(&reg_small, &h100()).unwrap()[0].kernel, "ccv1d_update_f16_w4", "one wave: update");
    // fast memory (H200): f32 on big grids too (at least 2 rows a block; state_len 4's RUN at
    // 1 channel a thread, 4 times the rows), 16-bit at every batch size; f32 at B = 1: update
    let reg32_4 = UpdatePlan { x: f32v, out: f32v, conv_state: view(0x3000, DType::F32, [5376 * 4, 4, 1]), state_len: 4, ..reg };
    let (l32, l32_4) = (&update_launches(&reg32, &h200()).unwrap()[0], &update_launches(&reg32_4, &h200()).unwrap()[0]);
    check_grid(l32_4);
    let (k32, k32_4) = (params_of(l32), params_of(l32_4));
    assert_eq!((l32.kernel.as_str(), k32.flags & F_STEP_RUN, k32.n_ctiles, k32.chunk), ("ccv1d_stepv_f32_w4", 0, 11, 2));
    assert_eq!((l32_4.kernel.as_str(), k32_4.flags & F_STEP_RUN, k32_4.n_ctiles, k32_4.chunk), ("ccv1d_stepv_f32_w4", F_STEP_RUN, 42, 8));
    assert_eq!(update_launches(&UpdatePlan { batch: 1, ..reg32 }, &h200()).unwrap()[0].kernel, "ccv1d_update_f32_w4");
    let l1 = &update_launches(&UpdatePlan { batch: 1, ..reg }, &h200()).unwrap()[0];
    assert_eq!((l1.kernel.as_str(), params_of(l1).chunk), ("ccv1d_stepv_f16_w4", 1));
    assert_eq!(update_launches(&reg_small, &h200()).unwrap()[0].kernel, "ccv1d_stepv_f16_w4");
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
    assert_eq!(names.len(), 3 * (21 * 8 + 2 + 3 * 4) + 2 * 4 + 2);
    let set: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(set.len(), names.len());
    assert!(names.contains(&"ccv1d_fwd_cl_bf16_w4".to_string()));
    assert!(names.contains(&"ccv1d_bwd_cls_f32_w8".to_string()));
    assert!(names.contains(&"ccv1d_bwd_clw_f16_w3".to_string()));
    assert!(names.contains(&"ccv1d_fwd_clw_bf16_w8".to_string()));
    assert!(names.contains(&"ccv1d_bwd_cfw_bf16_w6".to_string()));
    assert!(names.contains(&"ccv1d_bwd_cfwl_f16_w8".to_string()));
}

#[test]
fn peak_mem_gbps_from_clock_and_bus() {
    assert_eq!(peak_mem_gbps(2_619_000, 5120), 3352); // H100 SXM
    assert_eq!(peak_mem_gbps(3_201_000, 6144), 4916); // H200
    assert_eq!(peak_mem_gbps(0, 6144), 0);
    assert_eq!(peak_mem_gbps(3_201_000, -1), 0);
    assert!(!fast_memory(&h100()) && fast_memory(&h200()));
    assert!(!fast_memory(&mi300()), "no AMD device was measured: its rules stay");
}

/// The rules that differ on `fast_memory` devices (H200, docs/perf.md sessions 43-48), against the
/// H100's on the same shapes.
#[test]
fn fast_memory_kernel_choice() {
    let first = |ls: Vec<Launch>| (ls[0].kernel.clone(), params_of(&ls[0]).chunk);
    // forward: the tile kernel instead of one-step fwd_cfw blocks (W <= 4, every dtype)
    for dt in [DType::BF16, DType::F16, DType::F32] {
        let p = fwd_plan(inputs(dt, 4, 5376, 4096, 4, cf(4, 5376, 4096)));
        let name = |dev| first(fwd_launches(&p, &dev).unwrap()).0;
        assert!(name(h100()).starts_with("ccv1d_fwd_cfw_"), "{dt:?}");
        assert!(name(h200()).starts_with("ccv1d_fwd_cf_"), "{dt:?}: {}", name(h200()));
    }
    // and at 16-bit W >= 6, where the H100 takes fwd_cfw
    for w in 6..=8 {
        let p = fwd_plan(inputs(DType::BF16, 4, 5376, 4096, w, cf(4, 5376, 4096)));
        let name = |dev| first(fwd_launches(&p, &dev).unwrap()).0;
        assert!(name(h100()).starts_with("ccv1d_fwd_cfw_"), "W={w}");
        assert!(name(h200()).starts_with("ccv1d_fwd_cf_"), "W={w}: {}", name(h200()));
    }
    // fwd_pt: rows of a tile or more (1024 f32 tokens, 2048 16-bit) leave it from 2^19 vectors;
    // shorter rows and fewer vectors keep it (pt: whether a shape takes it on the H100 / the H200)
    let pe_off = |dt, b, d, l, dev| fwd_launches_pt(&fwd_plan(inputs(dt, b, d, l, 4, cf(b, d, l))), &dev, None, Some(0)).unwrap();
    let pt = |dt, b, d, l| [h100(), h200()].map(|dev| pe_off(dt, b, d, l, dev)[0].kernel.contains("_pt_"));
    for (dt, b, d, l, want) in [
        (DType::F32, 4, 256, 4096, [true, false]),   // 2^20 vectors, rows of 4 tiles
        (DType::F32, 1, 512, 4096, [true, false]),   // 2^19
        (DType::F32, 2, 2048, 2048, [true, false]),  // 2^21
        (DType::F32, 4, 4096, 512, [true, true]),    // 2^21, rows of half a tile
        (DType::F32, 1, 1024, 1024, [true, true]),   // 2^18
        (DType::BF16, 2, 2048, 2048, [true, false]), // 2^20
        (DType::BF16, 4, 256, 4096, [true, false]),  // 2^19
        (DType::BF16, 2, 256, 4096, [true, true]),   // 2^18
        (DType::BF16, 8, 2048, 1024, [true, false]), // 2^21, rows of half a tile: bf16 SiLU at 2^19
        (DType::BF16, 4, 4096, 512, [true, false]),  // 2^20
        (DType::BF16, 8, 512, 1024, [true, true]),   // 2^19
        (DType::F16, 4, 256, 4096, [true, false]),   // 2^19, f16's own limit on the H100
    ] {
        assert_eq!(pt(dt, b, d, l), want, "{dt:?} {b}x{d}x{l}");
    }
    // ... and without activation bf16 keeps the H100's limit on rows shorter than a tile
    for (b, d, l) in [(8, 2048, 1024), (4, 4096, 512)] {
        let mut inp = inputs(DType::BF16, b, d, l, 4, cf(b, d, l));
        inp.act = Act::None;
        let v = fwd_launches_pt(&fwd_plan(inp), &h200(), None, Some(0)).unwrap();
        assert!(v[0].kernel.contains("_pt_"), "{b}x{d}x{l}: {}", v[0].kernel);
    }
    // channel-last SiLU forward on fwd_clw (fwd_clw_fast_silu): W = 3; 16-bit W = 4 in 256-token
    // chunks; f32 W = 4 on two waves or chunks of at most 128 tokens, W = 5-7, W = 8 from 128;
    // never on the H100 (16-bit W >= 5 on fwd_clw there too), at W = 2 or without activation
    let clw = |dt, b, d, l, w, act, dev| {
        let mut inp = inputs(dt, b, d, l, w, cl(b, d, l));
        inp.act = act;
        let v = fwd_launches_pt(&fwd_plan(inp), &dev, None, Some(0)).unwrap();
        v[0].kernel.starts_with("ccv1d_fwd_clw_")
    };
    let mamba = (4, 5376, 4096);
    for (dt, (b, d, l), w, want) in [
        (DType::BF16, mamba, 3, true),
        (DType::F16, (4, 256, 4096), 3, true),
        (DType::F32, (1, 5376, 4096), 3, true),
        (DType::BF16, mamba, 4, true),      // 5376 blocks of 256 tokens
        (DType::F16, (8, 2048, 1024), 4, true), // 1024 blocks of 256
        (DType::BF16, (4, 2048, 4096), 4, false), // 512-token chunks
        (DType::BF16, (4, 4096, 512), 4, false),  // 128
        (DType::BF16, (1, 5376, 4096), 4, false), // 384
        (DType::F32, mamba, 4, true),
        (DType::F32, (4, 256, 4096), 4, true),    // 64-token chunks
        (DType::F32, (8, 2048, 1024), 4, false),  // one wave of 256
        (DType::F32, (4, 2048, 4096), 4, false),  // one wave of 512
        (DType::F32, mamba, 5, true),
        (DType::F32, (4, 256, 4096), 7, true),
        (DType::F32, (4, 4096, 512), 8, true),    // 128
        (DType::F32, (4, 256, 4096), 8, false),   // 64
        (DType::BF16, mamba, 2, false),
        (DType::F32, mamba, 2, false),
        (DType::BF16, mamba, 1, false),
        (DType::F32, (4, 256, 512), 4, false),    // 8-token chunks
        (DType::F32, (4, 256, 512), 3, false),
        (DType::F32, (4, 256, 512), 6, false),
    ] {
        assert_eq!(clw(dt, b, d, l, w, Act::Silu, h200()), want, "{dt:?} {b}x{d}x{l} W={w}");
        assert!(!clw(dt, b, d, l, w, Act::Silu, h100()), "{dt:?} {b}x{d}x{l} W={w}");
        assert!(!clw(dt, b, d, l, w, Act::None, h200()), "{dt:?} {b}x{d}x{l} W={w}");
    }
    assert!(clw(DType::BF16, 4, 5376, 4096, 6, Act::None, h200()) && clw(DType::BF16, 4, 5376, 4096, 6, Act::None, h100()));
    // fwd_clw's chunks at 16-bit SiLU W >= 7: even ones of at most 384 tokens where the H100 cuts 256
    let clw_chunk = |dt, b, d, l, w, dev| {
        let v = fwd_launches(&fwd_plan(inputs(dt, b, d, l, w, cl(b, d, l))), &dev).unwrap();
        assert!(v[0].kernel.starts_with("ccv1d_fwd_clw_"), "{}", v[0].kernel);
        check_clw_geometry(&v[0], b, d, l);
        params_of(&v[0]).chunk
    };
    for (dt, b, d, l, w, want) in [
        (DType::BF16, 4, 5376, 4096, 8, 384), // 11 chunks: 10 of 384 and 256
        (DType::F16, 2, 5376, 4096, 7, 384),
        (DType::BF16, 4, 5376, 2048, 7, 384), // 6 chunks: 5 of 384 and 128
        (DType::BF16, 16, 5376, 512, 8, 256), // 2 even chunks of 256
        (DType::BF16, 4, 5376, 4096, 6, 256),
        (DType::F32, 4, 5376, 4096, 8, 256),
    ] {
        assert_eq!(clw_chunk(dt, b, d, l, w, h200()), want, "{dt:?} {b}x{d}x{l} W={w}");
    }
    assert_eq!(clw_chunk(DType::BF16, 4, 5376, 4096, 8, h100()), 256);
    // without activation 256 stays
    let mut inp = inputs(DType::BF16, 4, 5376, 4096, 8, cl(4, 5376, 4096));
    inp.act = Act::None;
    assert_eq!(params_of(&fwd_launches(&fwd_plan(inp), &h200()).unwrap()[0]).chunk, 256);
    // not where the chunks were not cut to 256 (one wave of them)
    assert_eq!(clw_chunk(DType::BF16, 8, 2048, 1024, 8, h200()), clw_chunk(DType::BF16, 8, 2048, 1024, 8, h100()));
    // channel-first backward: bwd_cfw (or bwd_cfw7, its last-wave rule), not bwd_cfw2
    for (dt, (b, d, l)) in [(DType::BF16, (4, 5376, 4096)), (DType::F32, (8, 2048, 1024))] {
        let p = bwd_plan(inputs(dt, b, d, l, 4, cf(b, d, l)));
        let name = |dev| first(bwd_launches(&p, &dev, 0x8000_0000).unwrap()).0;
        assert!(name(h100()).starts_with("ccv1d_bwd_cfw2_"), "{dt:?}");
        let fast = name(h200());
        assert!(fast.starts_with("ccv1d_bwd_cfw") && !fast.starts_with("ccv1d_bwd_cfw2_"), "{dt:?}: {fast}");
    }
    // channel-first backward in long spans (bwd_cfwl): f32 at W >= 3 from 2^24 elements, 16-bit
    // with SiLU at W <= 5 from 2^26 elements in rows of at most 4096 tokens; never on the H100,
    // nor with states
    let cf_name = |dt, b, d, l, w, act, dev| {
        let mut inp = inputs(dt, b, d, l, w, cf(b, d, l));
        inp.act = act;
        first(bwd_launches(&bwd_plan(inp), &dev, 0x8000_0000).unwrap()).0
    };
    for (dt, b, d, l, w, act, want) in [
        (DType::F32, 4, 5376, 4096, 4, Act::Silu, true),
        (DType::F32, 4, 5376, 4096, 8, Act::Silu, true),
        (DType::F32, 4, 5376, 4096, 4, Act::None, true),
        (DType::F32, 4, 5376, 4096, 1, Act::Silu, false),
        (DType::F32, 4, 5376, 4096, 2, Act::Silu, false),
        (DType::F32, 4, 5376, 4096, 3, Act::Silu, true),
        (DType::F32, 8, 2048, 1024, 4, Act::Silu, true),  // 2^24 elements
        (DType::F32, 2, 2048, 2048, 4, Act::Silu, false), // 2^23
        (DType::BF16, 4, 5376, 4096, 4, Act::Silu, true),
        (DType::F16, 4, 5376, 4096, 2, Act::Silu, true),
        (DType::BF16, 4, 4096, 4096, 5, Act::Silu, true), // 2^26
        (DType::BF16, 2, 5376, 4096, 4, Act::Silu, false), // 2^25.4
        (DType::BF16, 4, 5376, 4096, 6, Act::Silu, false),
        (DType::BF16, 4, 5376, 4096, 4, Act::None, false),
        (DType::BF16, 2, 5376, 8192, 4, Act::Silu, false), // rows of 8192 tokens
        (DType::BF16, 8, 2048, 1024, 4, Act::Silu, false), // 2^24
    ] {
        let fast = cf_name(dt, b, d, l, w, act, h200());
        assert_eq!(fast.starts_with("ccv1d_bwd_cfwl_"), want, "{dt:?} {b}x{d}x{l} W={w} {act:?}: {fast}");
        assert!(!cf_name(dt, b, d, l, w, act, h100()).starts_with("ccv1d_bwd_cfwl_"), "{dt:?} {b}x{d}x{l} W={w}");
    }
    let mut states = bwd_plan(inputs(DType::F32, 4, 5376, 4096, 4, cf(4, 5376, 4096)));
    states.dinitial_states = Some(view(0x7500_0000, DType::F32, [5376 * 8, 8, 1]));
    states.inp.initial_states = Some(view(0x7400_0000, DType::F32, [5376 * 8, 8, 1]));
    assert!(first(bwd_launches(&states, &h200(), 0x8000_0000).unwrap()).0.starts_with("ccv1d_bwd_cfwx_"));
    // channel-last backward, 16-bit SiLU at W = 3-4: 512-token chunks where they make two waves
    let cl_chunk = |dt, b, d, l, w, act, dev| {
        let mut inp = inputs(dt, b, d, l, w, cl(b, d, l));
        inp.act = act;
        first(bwd_launches(&bwd_plan(inp), &dev, 0x8000_0000).unwrap())
    };
    for (b, w) in [(4, 4), (2, 4), (4, 3)] {
        let (name, chunk) = cl_chunk(DType::BF16, b, 5376, 4096, w, Act::Silu, h200());
        assert_eq!((name.starts_with("ccv1d_bwd_clw_"), chunk), (true, 512), "{b} W={w}");
        assert_eq!(cl_chunk(DType::BF16, b, 5376, 4096, w, Act::Silu, h100()).1, 192, "{b} W={w}");
    }
    // not under two waves of them, at W = 2, without activation, at f32
    assert_eq!(cl_chunk(DType::BF16, 1, 5376, 4096, 4, Act::Silu, h200()).1, 192);
    assert_eq!(cl_chunk(DType::BF16, 4, 5376, 4096, 2, Act::Silu, h200()).1, 192);
    assert_eq!(cl_chunk(DType::BF16, 4, 5376, 4096, 3, Act::None, h200()).1, 192);
    // without activation at W = 4, 256-token chunks from three waves of them
    for (b, d, l, want) in [(4, 5376, 4096, 256), (2, 5376, 4096, 256), (16, 5376, 512, 256), (1, 5376, 4096, 192)] {
        assert_eq!(cl_chunk(DType::F16, b, d, l, 4, Act::None, h200()).1, want, "{b}x{d}x{l}");
        assert_eq!(cl_chunk(DType::F16, b, d, l, 4, Act::None, h100()).1, 192, "{b}x{d}x{l}");
    }
    assert_ne!(cl_chunk(DType::F32, 4, 5376, 4096, 4, Act::Silu, h200()).1, 512);
    // W = 5-7: 1024-token chunks; not at W = 8
    for w in 5..=7 {
        assert_eq!(cl_chunk(DType::BF16, 4, 5376, 4096, w, Act::Silu, h200()).1, 1024, "W={w}");
        assert_ne!(cl_chunk(DType::BF16, 4, 5376, 4096, w, Act::Silu, h100()).1, 1024, "W={w}");
    }
    assert_eq!(cl_chunk(DType::BF16, 4, 5376, 4096, 8, Act::Silu, h200()), cl_chunk(DType::BF16, 4, 5376, 4096, 8, Act::Silu, h100()));
    // f32 channel-last backward at W <= 4: bwd_cls on mid-sized problems only
    let cl_name = |b, d, l, w, dev| cl_chunk(DType::F32, b, d, l, w, Act::Silu, dev).0;
    for (b, d, l) in [(8, 2048, 1024), (4, 4096, 512), (1, 5376, 4096), (16, 2048, 1024)] {
        assert!(cl_name(b, d, l, 4, h200()).starts_with("ccv1d_bwd_cls_"), "{b}x{d}x{l}");
        assert!(cl_name(b, d, l, 4, h100()).starts_with("ccv1d_bwd_clw_"), "{b}x{d}x{l}");
    }
    for (b, d, l, w) in [(4, 256, 4096, 4), (2, 5376, 4096, 4), (4, 5376, 4096, 4), (4, 5376, 4096, 8), (2, 5376, 4096, 7)] {
        assert_eq!(cl_name(b, d, l, w, h200()), cl_name(b, d, l, w, h100()), "{b}x{d}x{l} W={w}");
    }
    // ... and bwd_clw at W = 8 on every grid, at W = 6 / 7 from 2^26 elements
    for (b, d, l, w) in [(8, 2048, 1024, 8), (1, 5376, 4096, 8), (4, 256, 4096, 8), (4, 5376, 4096, 6), (4, 5376, 4096, 7)] {
        assert!(cl_name(b, d, l, w, h200()).starts_with("ccv1d_bwd_clw_"), "{b}x{d}x{l} W={w}");
        assert!(cl_name(b, d, l, w, h100()).starts_with("ccv1d_bwd_cls_"), "{b}x{d}x{l} W={w}");
    }
}
