//! Decode update launches (`update`, `stepv`, `step`) and their row staging.

use super::*;

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
    let mut f = F_STATES_ANY | weight_params(&mut k, &p.weight, p.bias.as_ref(), p.act);
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
    let big_grid = p.batch.saturating_mul(k.n_ctiles) > wave / 2;
    let stepv_wanted = match knob(Knob::Stepv) {
        Some(v) => v > 0,
        None => stepv_rule(p.x.dtype, big_grid, dev),
    };
    let family = if let Some(sv) = stepv_fits(p).filter(|_| stepv_wanted) {
        // The decode step in registers: thread = (`sv.channels`, `chunk` batch rows), weights
        // loaded once per thread; rows enough to bring a grid of 4-channel threads back to about
        // one wave of blocks (f32 on fast memory: at least 2, a whole row pass), and a thread of
        // fewer channels as many more rows (the same blocks: B = 64 and 256 took 0.3-0.8 µs
        // longer on twice the blocks, H200, docs/perf.md session 46).
        let tiles4 = ceil_div(p.dim / 4, NT as i64);
        k.n_ctiles = ceil_div(p.dim / sv.channels, NT as i64);
        let least = if p.x.dtype == DType::F32 && fast_memory(dev) { 2 } else { 1 };
        let rows = ceil_div(p.batch.saturating_mul(tiles4), wave).max(least) * (4 / sv.channels);
        k.chunk = knob(Knob::StepRows).unwrap_or(rows).clamp(1, UPD_ROWS);
        if sv.position_major {
            k.flags |= F_STEP_PM;
        }
        if sv.run {
            k.flags |= F_STEP_RUN;
        }
        // Weights as whole contiguous rows and a contiguous bias: each thread's channels in
        // vector loads (the checks here, not in each thread before its loads go out; 4 elements'
        // alignment covers the 1, 2 and 4 channels a thread takes).
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

/// Whether a one-token update that `stepv_fits` runs on the register decode step, by dtype and
/// grid (`big_grid`: past half a wave of one-row `update` blocks).
/// - H100: 16-bit on big grids (B = 256, D = 5376, bf16: 12.0 µs against the staged step's 16.8);
///   for f32 the staged step was faster, 21.9 against 24.4 µs, and at B = 1 both lost to `update`
///   (2.9-3.2 against 2.3-2.6 µs).
/// - Fast memory (H200, docs/perf.md session 46; D = 5376, SiLU, µs, `CCV1D_STEPV=1` against the
///   staged step / `update`): 16-bit at every batch size (bf16 B = 1 2.2-2.3 against 2.4-2.5;
///   B = 2-63 not measured); f32 on big grids (B = 256 state 3 14.4 / 13.9 against 19.5, state 4
///   position-major 15.2 against 21.0; B = 64 5.3-6.7 against 7.4-7.8), not at B = 1 (channel-major
///   2.6-2.8 against 2.4).
fn stepv_rule(dt: DType, big_grid: bool, dev: &DeviceInfo) -> bool {
    if dt != DType::F32 {
        big_grid || fast_memory(dev)
    } else {
        big_grid && fast_memory(dev)
    }
}

/// How `ccv1d_stepv_*` takes a call: slots position-major or channel-major, the channels a thread
/// takes, and whether a thread's channel-major state is whole 16-byte vectors (`F_STEP_RUN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StepV {
    position_major: bool,
    channels: i64,
    run: bool,
}

/// Channels a thread takes where its channel-major state rows make one 16-byte vector (`stepv`'s
/// RUN, hip/misc.hip `StepvRun`): 1, 2 or 4, or None.
fn stepv_run_channels(es: i64, state_len: i64) -> Option<i64> {
    let row = state_len.checked_mul(es)?;
    (row > 0 && 16 % row == 0).then_some(16 / row).filter(|c| (1..=4).contains(c))
}

/// Whether the register decode step (`ccv1d_stepv_*`) takes the call, and how: a one-token update
/// with contiguous slots, width >= 2, state_len W-1 or W (its shift is unrolled for those two),
/// dim a multiple of 4 and every access of 4 channels aligned (8 bytes for 16-bit types, 16 for
/// f32): conv_state, x and out with unit channel stride. The RUN (never with
/// `CCV1D_STEP_RUN=0`): channel-major slots whose rows fill 16-byte vectors (16-bit state_len 2,
/// 4 or 8, f32 1, 2 or 4) where conv_state and its slot stride are 16-byte aligned. (16-bit
/// position-major slots in 8-channel 16-byte vectors lost: H200, docs/perf.md session 46.)
fn stepv_fits(p: &UpdatePlan) -> Option<StepV> {
    let pm = one_token_slots(p)?;
    let w = p.width;
    if w < 2 || !(p.state_len == w - 1 || p.state_len == w) || p.dim % 4 != 0 {
        return None;
    }
    let es = p.x.dtype.size() as i64;
    let aligned_to = |a: i64, v: &View, extra: &[i64]| v.addr as i64 % a == 0 && extra.iter().all(|s| s.wrapping_mul(es) % a == 0);
    let cs = &p.conv_state;
    let run_c = stepv_run_channels(es, p.state_len).filter(|_| !pm && aligned_to(16, cs, &[cs.stride[0]]) && knob(Knob::StepRun) != Some(0));
    let channels = run_c.unwrap_or(4);
    // its 2-D grid: channel tiles along x, row blocks (of at least one row) along y
    if p.batch > MAX_GRID_Y || ceil_div(p.dim / channels, NT as i64) > MAX_GRID_X {
        return None;
    }
    let a = 4 * es;
    let state_ok = aligned_to(a, cs, &[cs.stride[0], if pm { cs.stride[2] } else { 0 }]);
    let rows_ok = |v: &View| v.stride[1] == 1 && aligned_to(a, v, &[if p.batch > 1 { v.stride[0] } else { 0 }]);
    (state_ok && rows_ok(&p.x) && rows_ok(&p.out)).then_some(StepV { position_major: pm, channels, run: run_c.is_some() })
}
