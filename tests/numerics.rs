//! Special values on the harness backend (`CCV1D_TEST_BACKEND=cpu|gpu`), compared with the f64
//! oracle element by element by class: NaN where the oracle has NaN (and only there), the same
//! ±inf, finite values within one ulp of the output dtype plus the fp32 allowance
//! (docs/semantics.md "Special values").
//! - NaN / ±inf in x (and NaN in dout) reach only the outputs whose terms include them, also with
//!   seq_idx boundaries and padding;
//! - SiLU and its derivative at ±88, ±89, ±1e4, ±f32::MAX, ±inf, NaN (no NaN from a non-NaN);
//! - f16/bf16 outputs beyond their range are ±inf (the cast of the fp32 result); f16 subnormals
//!   in and out;
//! - zero-sized problems (batch, dim, seqlen 0) return OK and write only what the rules define.

mod common;

use common::*;

use causal_conv1d::capi;
use causal_conv1d::oracle::{self, round_to};
use causal_conv1d::plan::DType;

const U32: f64 = 1.0 / (1u64 << 24) as f64;

/// Element-by-element class comparison of `got` (as stored) with the oracle's `want` (f64,
/// rounded into `dt` here) and its magnitude `mag`. `acc`: the fp32 allowance per unit of mag.
fn same_classes(what: &str, got: &[f64], want: &[f64], mag: &[f64], dt: DType, acc: f64) -> Result<(), String> {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut bad = Vec::new();
    for i in 0..got.len() {
        let (g, w) = (got[i], round_to(dt, want[i]));
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else if !g.is_finite() {
            false
        } else {
            // A finite value whose magnitude is not (an inf elsewhere in its terms' magnitudes,
            // e.g. SiLU' of an infinite pre-activation): judged relative to itself.
            let m = if mag[i].is_finite() { mag[i] } else { 4.0 * want[i].abs() };
            // One ulp of the output dtype (not half): GPU fast-math exp can move an fp32 result
            // across a rounding boundary of a 16-bit output; accuracy proper is the sweep's job.
            (g - want[i]).abs() <= 2.002 * oracle::half_ulp(dt, w) + acc * m + 1e-36
        };
        if !ok {
            bad.push(format!("[{i}] got {g:e} want {w:e} (f64 {:e})", want[i]));
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{what} ({} dtype): {} of {} elements differ: {}", dt.name(), bad.len(), got.len(), bad[..bad.len().min(8)].join("; ")))
    }
}

/// Forward then backward of `c`, after `poke` has changed x's and dout's values (logical index
/// → value); every output compared by class with the oracle.
fn special_case(c: &ConvCfg, rng: &mut Rng, poke: &dyn Fn(&ConvTensors)) -> Result<(), String> {
    let elem = 128.0 * U32;
    // Forward.
    let t = ConvTensors::build(c, rng, false);
    poke(&t);
    let prob = t.problem(c);
    t.upload(c);
    expect_ok(unsafe { capi::ccv1d_fwd(&t.fwd_params(c), std::ptr::null_mut()) }, "ccv1d_fwd")?;
    t.download(c);
    let r = oracle::forward(&prob);
    same_classes("out", &t.out.as_ref().unwrap().to_f64(), &r.out, &r.out_mag, c.xdt, elem)?;
    // Backward.
    let t = ConvTensors::build(c, rng, true);
    poke(&t);
    let prob = t.problem(c);
    let dout = t.dout.as_ref().unwrap().to_f64();
    t.upload(c);
    expect_ok(unsafe { capi::ccv1d_bwd(&t.bwd_params(c), std::ptr::null_mut()) }, "ccv1d_bwd")?;
    t.download(c);
    let r = oracle::backward(&prob, &dout, None);
    let red = elem + 4.0 * U32 * (c.tokens() as f64).sqrt();
    same_classes("dx", &t.dx.as_ref().unwrap().to_f64(), &r.dx, &r.dx_mag, c.xdt, elem)?;
    same_classes("dweight", &t.dw.as_ref().unwrap().to_f64(), &r.dweight, &r.dweight_mag, c.dw_dt, red)?;
    same_classes("dbias", &t.db.as_ref().unwrap().to_f64(), &r.dbias, &r.dbias_mag, DType::F32, red)
}

/// Set logical elements of a tensor: (index, value) pairs, everything else kept.
fn set_some(t: &Tensor, vals: &[(usize, f64)]) {
    let mut v = t.to_f64();
    for &(i, x) in vals {
        v[i] = x;
    }
    t.set_f64(&v);
}

#[test]
fn nan_and_inf_reach_only_their_windows() {
    let mut failures = Vec::new();
    let mut rng = Rng::new(base_seed());
    for xdt in [DType::F32, DType::F16, DType::BF16] {
        for kind in [Kind::Cf, Kind::Cl] {
            for (width, silu, seq) in [(4, false, false), (4, true, false), (2, true, true), (8, false, true)] {
                let (b, d, l) = (2usize, 6usize, 40usize);
                let mut c = ConvCfg::plain(b, d, l, width, xdt, kind, &mut rng);
                c.silu = silu;
                if seq {
                    // Row 0: two sequences and padding; row 1: one sequence starting with padding.
                    let mut ids: Vec<i32> = (0..l).map(|t| if t < 15 { 0 } else if t < 30 { 1 } else { -1 }).collect();
                    ids.extend((0..l).map(|t| if t < 5 { -1 } else { 3 }));
                    c.seq_idx = Some(ids);
                }
                // x: NaN, +inf, -inf (two opposite infinities in one window: NaN), at the last
                // token of a sequence (next to a boundary), and in padding; dout: a NaN.
                let at = |bb: usize, dd: usize, tt: usize| (bb * d + dd) * l + tt;
                let poke = move |t: &ConvTensors| {
                    set_some(
                        &t.x,
                        &[
                            (at(0, 0, 3), f64::NAN),
                            (at(0, 1, 14), f64::INFINITY),
                            (at(0, 2, 20), f64::NEG_INFINITY),
                            (at(0, 2, 21), f64::INFINITY),
                            (at(0, 3, 33), f64::NAN),
                            (at(1, 4, 2), f64::INFINITY),
                            (at(1, 5, 39), f64::NEG_INFINITY),
                        ],
                    );
                    if let Some(dout) = &t.dout {
                        set_some(dout, &[(at(1, 0, 10), f64::NAN)]);
                    }
                };
                if let Err(e) = special_case(&c, &mut rng, &poke) {
                    failures.push(format!("{} {kind:?} W={width} silu={silu} seq_idx={seq}: {e}", xdt.name()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} cases differ from the oracle:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn silu_saturates_without_nan() {
    // W = 1, weight 1, no bias: out = silu(x), dx = dout·silu'(x), one value per channel.
    let zs = [-f64::INFINITY, -3.0e38, -1e4, -89.0, -88.0, -20.0, -1.0, -0.0, 0.0, 1.0, 20.0, 88.0, 89.0, 1e4, 3.0e38, f64::INFINITY, f64::NAN];
    let mut failures = Vec::new();
    let mut rng = Rng::new(7);
    for xdt in [DType::F32, DType::BF16, DType::F16] {
        let mut c = ConvCfg::plain(1, zs.len(), 1, 1, xdt, Kind::Cf, &mut rng);
        c.silu = true;
        c.bias = None;
        c.dbias = None;
        let t = ConvTensors::build(&c, &mut rng, false);
        t.x.set_f64(&zs);
        t.w.set_f64(&vec![1.0; zs.len()]);
        let stored = t.x.to_f64(); // f16: ±3e38 and ±1e4... as the dtype holds them
        t.upload(&c);
        let run = expect_ok(unsafe { capi::ccv1d_fwd(&t.fwd_params(&c), std::ptr::null_mut()) }, "ccv1d_fwd");
        if let Err(e) = run {
            failures.push(e);
            continue;
        }
        t.download(&c);
        let got = t.out.as_ref().unwrap().to_f64();
        let want: Vec<f64> = stored.iter().map(|&z| oracle::silu(z)).collect();
        let mag: Vec<f64> = stored.iter().map(|z| 1.1 * z.abs()).collect();
        if let Err(e) = same_classes("silu(x)", &got, &want, &mag, xdt, 128.0 * U32) {
            failures.push(e);
        }
        for (i, (&z, &g)) in stored.iter().zip(&got).enumerate() {
            if g.is_nan() && !z.is_nan() {
                failures.push(format!("{}: silu({z:e}) is NaN (channel {i})", xdt.name()));
            }
        }
        // Backward, dout = 1: dx = silu'(x).
        let tb = ConvTensors::build(&c, &mut rng, true);
        tb.x.set_f64(&zs);
        tb.w.set_f64(&vec![1.0; zs.len()]);
        tb.dout.as_ref().unwrap().set_f64(&vec![1.0; zs.len()]);
        tb.upload(&c);
        if let Err(e) = expect_ok(unsafe { capi::ccv1d_bwd(&tb.bwd_params(&c), std::ptr::null_mut()) }, "ccv1d_bwd") {
            failures.push(e);
            continue;
        }
        tb.download(&c);
        let got = tb.dx.as_ref().unwrap().to_f64();
        let want: Vec<f64> = stored.iter().map(|&z| oracle::silu_grad(z)).collect();
        let mag: Vec<f64> = stored.iter().map(|z| 0.5 * z.abs()).collect();
        if let Err(e) = same_classes("silu'(x)", &got, &want, &mag, xdt, 128.0 * U32) {
            failures.push(e);
        }
        for (i, (&z, &g)) in stored.iter().zip(&got).enumerate() {
            if g.is_nan() && !z.is_nan() {
                failures.push(format!("{}: silu'({z:e}) is NaN (channel {i})", xdt.name()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn half_precision_overflow_is_inf_and_subnormals_survive() {
    let mut rng = Rng::new(8);
    let mut failures = Vec::new();
    // (dtype, x values, weight): out = w·x rounded once into the dtype.
    let f16_sub = [6.0e-8, 1.0e-6, -3.0e-5, 6.0e-5];
    let cases: [(DType, Vec<f64>, f64); 4] = [
        (DType::F16, vec![60000.0, -60000.0, 30000.0, 40000.0, 65504.0], 2.0),
        (DType::BF16, vec![3.0e38, -3.0e38, 1.0e38, 2.0e38, 1.0], 2.0),
        (DType::F16, f16_sub.to_vec(), 1.0),
        (DType::F16, f16_sub.to_vec(), 0.5),
    ];
    for (dt, xs, w) in cases {
        let mut c = ConvCfg::plain(1, xs.len(), 1, 1, dt, Kind::Cf, &mut rng);
        c.bias = None;
        let t = ConvTensors::build(&c, &mut rng, false);
        t.x.set_f64(&xs);
        t.w.set_f64(&vec![w; xs.len()]);
        let stored = t.x.to_f64();
        t.upload(&c);
        if let Err(e) = expect_ok(unsafe { capi::ccv1d_fwd(&t.fwd_params(&c), std::ptr::null_mut()) }, "ccv1d_fwd") {
            failures.push(e);
            continue;
        }
        t.download(&c);
        let got = t.out.as_ref().unwrap().to_f64();
        // w·x is exact in fp32 here, so the output is exactly the dtype's rounding of it.
        let want: Vec<f64> = stored.iter().map(|&x| round_to(dt, (w * x) as f32 as f64)).collect();
        for i in 0..got.len() {
            if got[i].to_bits() != want[i].to_bits() && !(got[i] == 0.0 && want[i] == 0.0 && got[i].is_sign_negative() == want[i].is_sign_negative()) {
                failures.push(format!("{} w={w}: {w}·{:e} stored as {:e}, want {:e}", dt.name(), stored[i], got[i], want[i]));
            }
        }
        if dt == DType::F16 && w == 1.0 && stored[..3].iter().any(|&v| v == 0.0) {
            failures.push(format!("f16 subnormal inputs were flushed when stored: {stored:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Batch 0, dim 0, seqlen 0 on the harness backend (device memory on the GPU): OK, and every
/// buffer byte-identical afterwards except what the rules define (final_states = initial_states
/// at L = 0; dweight/dbias = 0 and dinitial_states = dfinal_states when there are no tokens).
#[test]
fn zero_sized_problems_write_nothing() {
    let mut rng = Rng::new(9);
    let mut failures = Vec::new();
    for (b, d, l) in [(0usize, 5usize, 9usize), (2, 0, 9), (2, 5, 0), (0, 0, 0)] {
        for bwd in [false, true] {
            let mut c = ConvCfg::plain(b, d, l, 4, DType::F32, Kind::Cl, &mut rng);
            c.initial = true;
            c.fin = !bwd;
            c.dfinal = bwd;
            c.dinit = bwd;
            let t = ConvTensors::build(&c, &mut rng, bwd);
            let all = t.all(&c);
            let before: Vec<Vec<u8>> = all.iter().map(|(_, x)| x.snapshot()).collect();
            t.upload(&c);
            let st = unsafe {
                if bwd {
                    capi::ccv1d_bwd(&t.bwd_params(&c), std::ptr::null_mut())
                } else {
                    capi::ccv1d_fwd(&t.fwd_params(&c), std::ptr::null_mut())
                }
            };
            let what = format!("{} B={b} D={d} L={l}", if bwd { "bwd" } else { "fwd" });
            if let Err(e) = expect_ok(st, &what) {
                failures.push(e);
                continue;
            }
            t.download(&c);
            for (i, (name, x)) in all.iter().enumerate() {
                let defined = match *name {
                    "final_states" => l == 0 && b * d > 0,
                    "dweight" | "dbias" => d > 0 && b * l == 0,
                    "dinitial_states" => l == 0 && b * d > 0,
                    _ => false,
                };
                if defined {
                    continue;
                }
                if x.snapshot() != before[i] {
                    failures.push(format!("{what}: {name} was written"));
                }
            }
            if !bwd && l == 0 && b * d > 0 && t.fin.as_ref().unwrap().to_f64() != t.init.as_ref().unwrap().to_f64() {
                failures.push(format!("{what}: final_states != initial_states"));
            }
            if bwd && d > 0 && b * l == 0 {
                for (name, x) in [("dweight", t.dw.as_ref().unwrap()), ("dbias", t.db.as_ref().unwrap())] {
                    if x.to_f64().iter().any(|&v| v != 0.0) {
                        failures.push(format!("{what}: {name} must be 0 (a sum over no tokens)"));
                    }
                }
            }
            if bwd && l == 0 && b * d > 0 && t.dinit.as_ref().unwrap().to_f64() != t.dfin.as_ref().unwrap().to_f64() {
                failures.push(format!("{what}: dinitial_states != dfinal_states"));
            }
        }
    }
    // Decode update with batch 0 or dim 0.
    for (b, d) in [(0usize, 5usize), (3, 0)] {
        let mut t = |shape: &[usize]| {
            let x = Tensor::dense(Dt::F32, shape);
            x.fill_random(&mut rng, 1.0);
            x
        };
        let (x, w, state, out) = (t(&[b, d, 1]), t(&[d, 4]), t(&[b, d, 3]), t(&[b, d, 1]));
        let bufs = [&x, &w, &state, &out];
        let before: Vec<Vec<u8>> = bufs.iter().map(|x| x.snapshot()).collect();
        bufs.iter().for_each(|x| x.upload());
        let z = causal_conv1d::params::ccv1d_tensor::default();
        let p = causal_conv1d::params::ccv1d_update_params {
            struct_size: std::mem::size_of::<causal_conv1d::params::ccv1d_update_params>() as u32,
            backend: backend_code(),
            activation: 1,
            batch: b as i64,
            dim: d as i64,
            seqlen: 1,
            width: 4,
            state_len: 3,
            num_state_slots: 0,
            x: x.view(),
            weight: w.view(),
            bias: z,
            out: out.view(),
            conv_state: state.view(),
            cache_seqlens: z,
            conv_state_indices: z,
        };
        let what = format!("update B={b} D={d}");
        if let Err(e) = expect_ok(unsafe { capi::ccv1d_update(&p, std::ptr::null_mut()) }, &what) {
            failures.push(e);
            continue;
        }
        bufs.iter().for_each(|x| x.download());
        for (i, x) in bufs.iter().enumerate() {
            if x.snapshot() != before[i] {
                failures.push(format!("{what}: buffer {i} was written"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
