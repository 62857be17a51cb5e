//! Randomized sweeps of every feature against the f64 oracle, through the C ABI.
//!
//! Each sweep test runs `CCV1D_TEST_CASES` cases (defaults below keep `cargo test` to a few
//! minutes on 2 cores; for a thorough local run use e.g. `CCV1D_TEST_CASES=3000 cargo test
//! --release --test sweep`). Case `i` fixes width = 1 + i%8, x dtype = (i/8)%3 and x layout =
//! (i/24)%3 (channel-first, channel-last, non-contiguous), so 72 consecutive cases cover every
//! combination of those; everything else is drawn at random from the case's seed. Every output
//! is poisoned (NaN) before the call; outputs the op must not touch (skipped slots, unused pool
//! slots, padding rows, bytes between elements of strided views) are compared byte for byte;
//! inputs must be unchanged.
//!
//! Backend: `CCV1D_TEST_BACKEND=cpu` (default) or `gpu` (device buffers).

mod common;

use causal_conv1d::capi;
use causal_conv1d::plan::DType;
use common::*;

const DEFAULT_CASES: usize = 144;
const DEFAULT_VARLEN_CASES: usize = 96;

fn summary(c: &ConvCfg) -> String {
    let mut s = format!(
        "B{} D{} L{} W{} x={} w={} bias={} silu={} slots={} (field {}) init={} fin={}{}",
        c.batch,
        c.dim,
        c.seqlen,
        c.width,
        c.xdt.name(),
        c.wdt.name(),
        c.bias.map_or("-", |d| d.name()),
        c.silu,
        c.slots,
        c.num_state_slots,
        c.initial,
        c.fin,
        if c.alias { " (aliased)" } else { "" }
    );
    if let Some(v) = &c.seq_idx {
        s += &format!(" seq_idx={v:?}");
    }
    if let Some(v) = &c.cu_seqlens {
        s += &format!(" cu_seqlens={v:?}");
    }
    if let Some(v) = &c.state_indices {
        s += &format!(" state_indices={v:?}");
    }
    if let Some((v, dt)) = &c.has_init {
        s += &format!(" has_initial_state={v:?} ({dt:?})");
    }
    s += &format!(
        " | bwd: dfinal={} dinit={} dweight={} dbias={} nondet={} | layouts {:?}",
        c.dfinal,
        c.dinit,
        c.dw_dt.name(),
        c.dbias.map_or("-", |d| d.name()),
        c.nondet,
        c.lay
    );
    s
}

/// seq_idx rows: one id, monotonic segments, left/right padding (< 0), or arbitrary runs.
fn gen_seq_idx(rng: &mut Rng, b: usize, l: usize) -> Vec<i32> {
    let mut v = Vec::with_capacity(b * l);
    for _ in 0..b {
        let mode = rng.below(5);
        let run_max = (l / 2).max(2);
        let mut id: i32 = rng.range(0, 2) as i32;
        let pad_left = if mode == 2 { rng.range(1, l.max(1)) } else { 0 };
        let pad_right = if mode == 3 { rng.range(1, l.max(1)) } else { 0 };
        let mut left = rng.range(1, run_max);
        for t in 0..l {
            if t < pad_left || t >= l.saturating_sub(pad_right) {
                v.push(-1);
                continue;
            }
            if mode != 0 {
                if left == 0 {
                    left = rng.range(1, run_max);
                    id = if mode == 4 { rng.range(0, 3) as i32 - 1 } else { id + rng.range(1, 2) as i32 };
                }
                left -= 1;
            }
            v.push(id);
        }
    }
    v
}

/// Slots for `n` sequences in a pool of `slots`: distinct, some -1 (skipped).
fn gen_state_indices(rng: &mut Rng, n: usize, slots: usize) -> Vec<i32> {
    let mut perm: Vec<i32> = (0..slots as i32).collect();
    rng.shuffle(&mut perm);
    (0..n).map(|i| if i >= slots || rng.chance(0.25) { -1 } else { perm[i] }).collect()
}

/// has_initial_state as int32 (any nonzero is true) or 1-byte bool (nonzero is true).
fn gen_has_init(rng: &mut Rng, n: usize) -> (Vec<i32>, Dt) {
    let (vals, dt): (&[i32], Dt) = if rng.chance(0.5) { (&[0, 0, 1, 1, 7, -3], Dt::I32) } else { (&[0, 0, 1, 1, 1, 2], Dt::Bool) };
    ((0..n).map(|_| rng.pick(vals)).collect(), dt)
}

/// Features shared by rows-mode and packed cases (dtypes, bias, SiLU, backward outputs).
fn gen_common(rng: &mut Rng, c: &mut ConvCfg) {
    c.silu = rng.chance(0.5);
    c.wdt = rng.pick(&FLOATS);
    c.bias = rng.chance(0.75).then(|| rng.pick(&FLOATS));
    c.dfinal = rng.chance(0.5);
    c.dinit = c.initial && rng.chance(0.7);
    c.dw_dt = rng.pick(&[DType::F32, c.wdt]);
    c.dbias = c.bias.and_then(|bd| rng.chance(0.75).then(|| rng.pick(&[DType::F32, bd])));
    c.nondet = rng.chance(0.2);
}

/// A rows-mode case (each batch row one sequence, optionally split by seq_idx).
fn gen_rows(rng: &mut Rng, i: usize) -> ConvCfg {
    let width = 1 + i % 8;
    let k = width - 1;
    let xdt = FLOATS[(i / 8) % 3];
    let kind = KINDS[(i / 24) % 3];
    let class = rng.below(20);
    let (batch, dim, mut seqlen) = match class {
        0..=13 => (rng.range(1, 3), rng.pick(&[1, 2, 3, 5, 8, 13, 16, 20]), rng.range(2, 40)),
        14..=18 => (rng.range(1, 4), rng.pick(&[24, 33, 64, 72]), rng.range(40, 300)),
        _ => (rng.range(1, 2), rng.pick(&[4, 8, 16]), rng.range(1000, 3000)),
    };
    if rng.chance(0.3) {
        seqlen = rng.pick(&[0, 1, 2, k.saturating_sub(1), k, k + 1]);
    }
    let mut c = ConvCfg::plain(batch, dim, seqlen, width, xdt, kind, rng);
    c.lay = ConvLayouts::random(kind, rng);
    c.seq_idx = rng.chance(0.35).then(|| gen_seq_idx(rng, batch, seqlen));
    c.initial = rng.chance(0.5);
    c.fin = rng.chance(0.5);
    c.alias = c.initial && c.fin && rng.chance(0.4);
    if rng.chance(0.2) {
        c.slots = rng.range(1, batch + 2);
        c.state_indices = Some(gen_state_indices(rng, batch, c.slots));
        c.num_state_slots = c.slots as i64;
    } else if rng.chance(0.3) {
        c.slots = batch + rng.range(1, 2);
        c.num_state_slots = c.slots as i64;
    } else {
        c.slots = batch;
        c.num_state_slots = if rng.chance(0.5) { 0 } else { batch as i64 };
    }
    if c.initial && rng.chance(0.3) {
        c.has_init = Some(gen_has_init(rng, batch));
    }
    gen_common(rng, &mut c);
    c
}

/// A packed (cu_seqlens) case: batch 1, sequences of lengths 0.., slot pool, skip, flags.
fn gen_varlen(rng: &mut Rng, i: usize) -> ConvCfg {
    let width = 1 + i % 8;
    let k = width - 1;
    let xdt = FLOATS[(i / 8) % 3];
    let kind = KINDS[(i / 24) % 3];
    let n = rng.range(1, 6);
    let big = rng.chance(0.1);
    let lens: Vec<usize> = (0..n)
        .map(|_| match rng.below(20) {
            0..=2 => 0,
            3..=7 => rng.range(1, k.max(1)),
            _ if big => rng.range(20, 200),
            _ => rng.range(1, 16),
        })
        .collect();
    let mut cu = vec![0i32];
    for l in &lens {
        cu.push(cu.last().unwrap() + *l as i32);
    }
    let total = *cu.last().unwrap() as usize;
    let dim = if big { rng.pick(&[8, 33, 64]) } else { rng.pick(&[1, 2, 3, 5, 8, 16]) };
    let mut c = ConvCfg::plain(1, dim, total, width, xdt, kind, rng);
    c.lay = ConvLayouts::random(kind, rng);
    c.cu_seqlens = Some(cu);
    if rng.chance(0.6) {
        c.slots = n + rng.range(0, 3);
        c.state_indices = Some(gen_state_indices(rng, n, c.slots));
        c.num_state_slots = c.slots as i64;
    } else {
        c.slots = n + if rng.chance(0.3) { rng.range(1, 2) } else { 0 };
        c.num_state_slots = if c.slots == n && rng.chance(0.5) { 0 } else { c.slots as i64 };
    }
    c.initial = rng.chance(0.7);
    c.fin = rng.chance(0.7);
    c.alias = c.initial && c.fin && rng.chance(0.5);
    if rng.chance(0.5) {
        c.has_init = Some(gen_has_init(rng, n));
    }
    gen_common(rng, &mut c);
    c
}

fn gen_update(rng: &mut Rng, i: usize) -> UpdCfg {
    let width = 1 + i % 8;
    let k = width - 1;
    let xdt = FLOATS[(i / 8) % 3];
    let kind = KINDS[(i / 24) % 3];
    let (batch, dim) = if rng.chance(0.15) {
        // decode-sized: several 128-channel tiles (with a tail) and, on a GPU, several batch
        // rows per block of the staged one-token step (ccv1d_step_*)
        (rng.range(300, 1200), rng.pick(&[129, 250, 256, 300]))
    } else {
        (rng.range(1, 5), rng.pick(&[1, 2, 3, 7, 8, 16, 33, 64]))
    };
    let with_cache = rng.chance(0.5);
    let mut state_len = k + rng.pick(&[0, 0, 1, 2, 5]);
    if state_len == 0 && with_cache {
        state_len = 1;
    }
    let seqlen = if rng.chance(0.15) { state_len + rng.range(1, 3) } else { rng.pick(&[1, 1, 1, 2, 3, 4]) };
    let (slots, num_state_slots, indices) = if rng.chance(0.4) {
        let slots = rng.range(1, batch + 2);
        (slots, slots as i64, Some(gen_state_indices(rng, batch, slots)))
    } else {
        let slots = batch + if rng.chance(0.3) { rng.range(1, 2) } else { 0 };
        (slots, if slots == batch && rng.chance(0.5) { 0 } else { slots as i64 }, None)
    };
    let cache_seqlens = with_cache.then(|| (0..batch).map(|_| rng.range(0, 3 * state_len + 2) as i32).collect());
    let lay_x = Layout::of(kind, rng, 3);
    let lay_out = if rng.chance(0.6) { Layout::of(kind, rng, 3) } else { Layout::random(rng, 3) };
    let lay_state = if rng.chance(0.6) { Layout::of(kind, rng, 3) } else { Layout::random(rng, 3) };
    UpdCfg {
        batch,
        dim,
        seqlen,
        width,
        state_len,
        silu: rng.chance(0.5),
        xdt,
        wdt: rng.pick(&FLOATS),
        bias: rng.chance(0.75).then(|| rng.pick(&FLOATS)),
        slots,
        num_state_slots,
        cache_seqlens,
        indices,
        in_place: rng.chance(0.3),
        lay_x,
        lay_out,
        lay_w: Layout::random(rng, 2),
        lay_b: Layout::random(rng, 1),
        lay_state,
        lay_idx: Layout::random(rng, 1),
    }
}

#[test]
fn fwd_rows_sweep() {
    sweep("fwd_rows", DEFAULT_CASES, |rng, i| {
        let c = gen_rows(rng, i);
        run_fwd(&c, rng).map_err(|e| format!("{e}\n    {}", summary(&c)))
    });
}

#[test]
fn bwd_rows_sweep() {
    sweep("bwd_rows", DEFAULT_CASES, |rng, i| {
        let c = gen_rows(rng, i);
        run_bwd(&c, rng).map_err(|e| format!("{e}\n    {}", summary(&c)))
    });
}

#[test]
fn fwd_varlen_sweep() {
    sweep("fwd_varlen", DEFAULT_VARLEN_CASES, |rng, i| {
        let c = gen_varlen(rng, i);
        run_fwd(&c, rng).map_err(|e| format!("{e}\n    {}", summary(&c)))
    });
}

#[test]
fn bwd_varlen_sweep() {
    sweep("bwd_varlen", DEFAULT_VARLEN_CASES, |rng, i| {
        let c = gen_varlen(rng, i);
        run_bwd(&c, rng).map_err(|e| format!("{e}\n    {}", summary(&c)))
    });
}

#[test]
fn update_sweep() {
    sweep("update", DEFAULT_CASES, |rng, i| {
        let c = gen_update(rng, i);
        run_update(&c, rng).map_err(|e| format!("{e}\n    {c:?}"))
    });
}

/// Every width × the short lengths around W-1 (L = 0, 1, K-1, K, K+1) × states (separate and
/// aliased) × seq_idx, forward and backward, in channel-first and channel-last: not left to
/// chance.
#[test]
fn short_sequences_every_width() {
    let mut cases = Vec::new();
    for width in 1..=8usize {
        let k = width - 1;
        let mut lens = vec![0, 1, k.saturating_sub(1), k, k + 1];
        lens.sort();
        lens.dedup();
        for &l in &lens {
            for variant in 0..4 {
                cases.push((width, l, variant));
            }
        }
    }
    sweep_n("short_sequences", env_usize("CCV1D_TEST_CASES", 0).max(cases.len()), |rng, i| {
        let (width, l, variant) = cases[i % cases.len()];
        let kind = if variant % 2 == 0 { Kind::Cf } else { Kind::Cl };
        let xdt = FLOATS[i % 3];
        let mut c = ConvCfg::plain(2, 5, l, width, xdt, kind, rng);
        c.silu = i % 2 == 1;
        c.initial = true;
        c.fin = true;
        c.alias = variant >= 2;
        c.dfinal = true;
        c.dinit = true;
        if variant == 1 || variant == 3 {
            c.seq_idx = Some(gen_seq_idx(rng, 2, l));
        }
        let f = run_fwd(&c, rng);
        let b = run_bwd(&c, rng);
        match (f, b) {
            (Ok(a), Ok(b)) => Ok(format!("{a}; {b}")),
            (f, b) => Err(format!("fwd: {f:?}\n    bwd: {b:?}\n    {}", summary(&c))),
        }
    });
}

/// x and out (and dout/dx) as the two channel halves of one `[B, 2D, L]` buffer, like the
/// `xz` split of Mamba: not an overlap; neither half may be written by the other's op.
#[test]
fn interleaved_halves_of_one_buffer() {
    sweep("interleaved", 24, |rng, i| {
        let (b, d, l, w) = (2, rng.range(1, 12), rng.range(1, 40), 1 + i % 8);
        let xdt = FLOATS[i % 3];
        let cl = i % 2 == 1;
        let lay = if cl { Layout::cl(3) } else { Layout::cf(3) };
        let whole = Tensor::new(xdt.into(), &[b, 2 * d, l], &lay);
        whole.fill_random(rng, 1.0);
        let st = whole.strides.clone();
        let x = whole.alias(xdt.into(), whole.offset, &[b, d, l], &st);
        let half = d * st[1] as usize;
        let out = whole.alias(xdt.into(), whole.offset + half, &[b, d, l], &st);
        out.poison();
        let wt = Tensor::dense(xdt.into(), &[d, w]);
        wt.fill_random(rng, 1.0);
        let x_vals = x.to_f64();
        let w_vals = wt.to_f64();
        let before = whole.snapshot();
        whole.upload();
        wt.upload();
        let mut p = fwd_params_base(b, d, l, w, false);
        p.x = x.view();
        p.weight = wt.view();
        p.out = out.view();
        expect_ok(unsafe { capi::ccv1d_fwd(&p, std::ptr::null_mut()) }, "ccv1d_fwd")?;
        whole.download();
        let prob = causal_conv1d::oracle::ConvProblem { batch: b, dim: d, seqlen: l, width: w, x: x_vals.clone(), weight: w_vals.clone(), ..Default::default() };
        let r = causal_conv1d::oracle::forward(&prob);
        check_tensor("out", &out, &r.out, &r.out_mag, causal_conv1d::oracle::Tol::elementwise(xdt), "interleaved out")?;
        if x.to_f64().iter().zip(&x_vals).any(|(a, b)| a.to_bits() != b.to_bits()) {
            return Err("x half changed".into());
        }
        check_gaps("whole", &[&x, &out], &before)?;
        Ok(String::new())
    });
}

/// Backward with `nondeterministic = 0`: dweight/dbias (and dx) bitwise equal across repeated
/// calls, on problems long enough for the backend to split the reduction across threads.
#[test]
fn backward_is_deterministic() {
    sweep_n("determinism", 6, |rng, i| {
        let xdt = FLOATS[i % 3];
        let varlen = i >= 3;
        let mut c = if varlen {
            let mut c = ConvCfg::plain(1, 24, 0, 4, xdt, Kind::Cl, rng);
            let mut cu = vec![0i32];
            for _ in 0..5 {
                cu.push(cu.last().unwrap() + rng.range(500, 2500) as i32);
            }
            c.seqlen = *cu.last().unwrap() as usize;
            c.cu_seqlens = Some(cu);
            c.slots = 5;
            c
        } else {
            ConvCfg::plain(3, 40, 4096 + rng.range(0, 100), 4, xdt, Kind::Cf, rng)
        };
        c.silu = true;
        c.dw_dt = DType::F32;
        c.initial = true;
        c.dinit = true;
        c.dfinal = true;
        let t = ConvTensors::build(&c, rng, true);
        t.upload(&c);
        let p = t.bwd_params(&c);
        let mut first: Option<Vec<Vec<u8>>> = None;
        // CCV1D_TEST_REPEATS: 4 by default; the GPU validation run uses 100.
        for rep in 0..env_usize("CCV1D_TEST_REPEATS", 4).max(2) {
            for (_, o) in t.outputs() {
                o.poison();
                o.upload();
            }
            expect_ok(unsafe { capi::ccv1d_bwd(&p, std::ptr::null_mut()) }, "ccv1d_bwd")?;
            t.download(&c);
            let snaps: Vec<Vec<u8>> = t.outputs().iter().map(|(_, o)| o.snapshot()).collect();
            match &first {
                None => first = Some(snaps),
                Some(f) => {
                    for (j, (n, _)) in t.outputs().iter().enumerate() {
                        if f[j] != snaps[j] {
                            return Err(format!("{n} differs between call 0 and call {rep} (B{} D{} L{})", c.batch, c.dim, c.seqlen));
                        }
                    }
                }
            }
        }
        // And the result is right.
        run_bwd(&c, rng)
    });
}

/// The dtype of every tensor is independent: x in each float dtype with weight, bias, dweight
/// and dbias in every other one (forward and backward), not left to chance.
#[test]
fn mixed_dtypes_every_combination() {
    let mut combos = Vec::new();
    for &x in &FLOATS {
        for &w in &FLOATS {
            for &b in &FLOATS {
                combos.push((x, w, b));
            }
        }
    }
    sweep_n("mixed_dtypes", env_usize("CCV1D_TEST_CASES", 0).max(combos.len()), |rng, i| {
        let (x, w, b) = combos[i % combos.len()];
        let mut c = ConvCfg::plain(2, 9, 17, 4, x, Kind::Strided, rng);
        c.wdt = w;
        c.bias = Some(b);
        c.silu = true;
        c.dw_dt = if i % 2 == 0 { DType::F32 } else { w };
        c.dbias = Some(if i % 2 == 0 { b } else { DType::F32 });
        run_fwd(&c, rng)?;
        run_bwd(&c, rng)
    });
}

/// The backward problem of the thread-count test: big enough for the CPU backend to split the
/// work (≥ 2^16 elements), with every reduction feature.
fn determinism_problem(rng: &mut Rng, varlen: bool) -> ConvCfg {
    let mut c = if varlen {
        let mut c = ConvCfg::plain(1, 40, 0, 4, DType::BF16, Kind::Cl, rng);
        let cu = vec![0, 1000, 1000, 3500, 6000];
        c.seqlen = 6000;
        c.cu_seqlens = Some(cu);
        c.slots = 4;
        c
    } else {
        ConvCfg::plain(3, 40, 4096, 4, DType::F32, Kind::Cf, rng)
    };
    c.silu = true;
    c.dw_dt = DType::F32;
    c.initial = true;
    c.dinit = true;
    c.dfinal = true;
    c
}

/// dweight/dbias/dx/dinitial_states bitwise identical whatever the number of worker threads
/// (`CCV1D_NUM_THREADS`, read once per process: each count runs in a child process).
#[test]
fn backward_is_deterministic_across_thread_counts() {
    let seed = base_seed();
    let exe = std::env::current_exe().unwrap();
    let mut seen: Vec<(String, String)> = Vec::new();
    for threads in ["1", "2", "3", "8"] {
        let out = std::process::Command::new(&exe)
            .args(["--ignored", "--exact", "determinism_child", "--nocapture", "--test-threads=1"])
            .env("CCV1D_NUM_THREADS", threads)
            .env("CCV1D_TEST_SEED", seed.to_string())
            .output()
            .expect("run the child test process");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child with CCV1D_NUM_THREADS={threads} failed:\n{text}");
        let hashes: Vec<&str> = text.lines().filter_map(|l| l.split_once("DETHASH ").map(|(_, h)| h.trim())).collect();
        assert_eq!(hashes.len(), 2, "child output without hashes:\n{text}");
        seen.push((threads.to_string(), hashes.join(" ")));
    }
    let first = &seen[0].1;
    for (t, h) in &seen {
        assert_eq!(h, first, "CCV1D_NUM_THREADS={t} gives different gradient bits than 1 thread (seed {seed}): {seen:?}");
    }
}

/// Child of the test above: one backward per problem, prints a hash of every output's bits.
#[test]
#[ignore = "child process of backward_is_deterministic_across_thread_counts"]
fn determinism_child() {
    for varlen in [false, true] {
        let mut rng = Rng::new(base_seed() ^ varlen as u64);
        let c = determinism_problem(&mut rng, varlen);
        let t = ConvTensors::build(&c, &mut rng, true);
        t.upload(&c);
        let p = t.bwd_params(&c);
        expect_ok(unsafe { capi::ccv1d_bwd(&p, std::ptr::null_mut()) }, "ccv1d_bwd").unwrap();
        t.download(&c);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (_, o) in t.outputs() {
            for v in o.to_f64() {
                h = (h ^ v.to_bits()).wrapping_mul(0x100_0000_01b3);
            }
        }
        println!("DETHASH {h:016x}");
    }
}
