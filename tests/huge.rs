//! One problem with B·D·L > 2^31 elements (int64 offsets end to end), forward and backward,
//! bf16 channel-last, on whichever backend `CCV1D_TEST_BACKEND` names. Needs ~18 GB of device (or
//! host) memory and ~20 GB of host memory, so it is `#[ignore]`d; the GPU validation runs it with
//! `--ignored`. Every output of the last tokens and 200,000 random positions (most beyond index
//! 2^31) are compared with an f64 reference; dweight/dbias are checked for every channel.

mod common;

use causal_conv1d::capi::*;
use causal_conv1d::error::*;
use causal_conv1d::params::*;
use common::*;
use half::bf16;
use std::ffi::c_void;

const D: usize = 8200;
const L: usize = 262_000; // D·L = 2,148,400,000 > 2^31
const W: usize = 4;

/// A cheap deterministic value in [-1, 1) for element `i` of stream `s` (exactly a bf16).
fn val(s: u64, i: usize) -> bf16 {
    let h = splitmix(s ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    bf16::from_f32(((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
}

fn fill(s: u64, n: usize) -> Vec<bf16> {
    let mut v = vec![bf16::ZERO; n];
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let chunk = n.div_ceil(threads);
    std::thread::scope(|sc| {
        for (c, part) in v.chunks_mut(chunk).enumerate() {
            sc.spawn(move || {
                for (j, e) in part.iter_mut().enumerate() {
                    *e = val(s, c * chunk + j);
                }
            });
        }
    });
    v
}

/// Device copy of `v` on the GPU backend, `v` itself on the CPU; valid for the whole test.
fn place(v: &mut [bf16]) -> *mut c_void {
    if !on_gpu() {
        return v.as_mut_ptr() as *mut c_void;
    }
    let bytes = std::mem::size_of_val(v);
    let mut p = std::ptr::null_mut();
    assert_eq!(unsafe { ccv1d_malloc(&mut p, bytes) }, CCV1D_OK, "{}", last_error());
    assert_eq!(unsafe { ccv1d_memcpy(p, v.as_ptr() as *const c_void, bytes, std::ptr::null_mut()) }, CCV1D_OK);
    p
}

fn fetch(p: *mut c_void, v: &mut [bf16]) {
    if on_gpu() {
        let bytes = std::mem::size_of_val(v);
        assert_eq!(unsafe { ccv1d_memcpy(v.as_mut_ptr() as *mut c_void, p, bytes, std::ptr::null_mut()) }, CCV1D_OK);
        assert_eq!(unsafe { ccv1d_synchronize(std::ptr::null_mut()) }, CCV1D_OK);
    }
}

fn cl(p: *mut c_void) -> ccv1d_tensor {
    ccv1d_tensor { data: p, dtype: CCV1D_DTYPE_BF16, stride: [(L * D) as i64, 1, D as i64] }
}

#[test]
#[ignore = "needs ~18 GB of memory; run by the GPU validation with --ignored"]
fn more_than_2_pow_31_elements() {
    let n = D * L;
    assert!(n > 1 << 31);
    let mut x = fill(1, n);
    let mut dout = fill(2, n);
    let w: Vec<f32> = (0..D * W).map(|i| val(3, i).to_f32()).collect();
    let bias: Vec<f32> = (0..D).map(|i| val(4, i).to_f32()).collect();
    let nan = bf16::from_f32(f32::NAN);
    let (mut out, mut dx) = (vec![nan; n], vec![nan; n]);
    let (mut dw, mut db) = (vec![f32::NAN; D * W], vec![f32::NAN; D]);

    // f32 tensors travel as their bytes (viewed as twice as many bf16).
    let as_bf = |v: &mut [f32]| unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut bf16, v.len() * 2) };
    let (mut w, mut bias) = (w, bias);
    let (xd, gd, od, dxd) = (place(&mut x), place(&mut dout), place(&mut out), place(&mut dx));
    let (wd, bd, dwd, dbd) = (place(as_bf(&mut w)), place(as_bf(&mut bias)), place(as_bf(&mut dw)), place(as_bf(&mut db)));
    let f32t = |p, s0, s1| ccv1d_tensor { data: p, dtype: CCV1D_DTYPE_F32, stride: [s0, s1, 0] };

    let mut p: ccv1d_fwd_params = unsafe { std::mem::zeroed() };
    p.struct_size = std::mem::size_of::<ccv1d_fwd_params>() as u32;
    p.backend = backend_code();
    p.batch = 1;
    p.dim = D as i64;
    p.seqlen = L as i64;
    p.width = W as i64;
    p.x = cl(xd);
    p.out = cl(od);
    p.weight = f32t(wd, W as i64, 1);
    p.bias = f32t(bd, 1, 0);
    assert_eq!(unsafe { ccv1d_fwd(&p, std::ptr::null_mut()) }, CCV1D_OK, "{}", last_error());

    let mut q: ccv1d_bwd_params = unsafe { std::mem::zeroed() };
    q.struct_size = std::mem::size_of::<ccv1d_bwd_params>() as u32;
    q.backend = p.backend;
    (q.batch, q.dim, q.seqlen, q.width) = (1, D as i64, L as i64, W as i64);
    (q.x, q.weight, q.bias) = (p.x, p.weight, p.bias);
    q.dout = cl(gd);
    q.dx = cl(dxd);
    q.dweight = f32t(dwd, W as i64, 1);
    q.dbias = f32t(dbd, 1, 0);
    assert_eq!(unsafe { ccv1d_bwd(&q, std::ptr::null_mut()) }, CCV1D_OK, "{}", last_error());

    fetch(od, &mut out);
    fetch(dxd, &mut dx);
    fetch(dwd, as_bf(&mut dw));
    fetch(dbd, as_bf(&mut db));

    // f64 references at (t, d); x is [L, D] in memory.
    let xa = |t: isize, d: usize| if t < 0 { 0.0 } else { x[t as usize * D + d].to_f64() };
    let ref_out = |t: usize, d: usize| {
        bias[d] as f64 + (0..W).map(|k| w[d * W + k] as f64 * xa(t as isize - (W - 1) as isize + k as isize, d)).sum::<f64>()
    };
    let ref_dx = |t: usize, d: usize| {
        (0..W).filter(|&k| t + W - 1 - k < L).map(|k| w[d * W + k] as f64 * dout[(t + W - 1 - k) * D + d].to_f64()).sum::<f64>()
    };
    let mut rng = Rng::new(5);
    let mut positions: Vec<(usize, usize)> = (L - 3..L).flat_map(|t| (0..D).map(move |d| (t, d))).collect();
    positions.extend((0..200_000).map(|_| (rng.below(L), rng.below(D))));
    let mut worst: f64 = 0.0;
    for &(t, d) in &positions {
        for (got, want) in [(out[t * D + d].to_f64(), ref_out(t, d)), (dx[t * D + d].to_f64(), ref_dx(t, d))] {
            let err = (got - want).abs() / (1.0 + want.abs());
            worst = worst.max(err);
            assert!(err < 1e-2, "t={t} d={d} (element {}): got {got}, want {want}", t * D + d);
        }
    }
    // dweight/dbias of every channel: sums over all 262,000 tokens (f64, channel blocks in parallel).
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let refs: Vec<(Vec<f64>, f64)> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|c| {
                let (x, dout) = (&x, &dout);
                sc.spawn(move || {
                    let mut part = Vec::new();
                    for d in (c..D).step_by(threads) {
                        let (mut dwk, mut dbv) = (vec![0.0f64; W], 0.0f64);
                        for t in 0..L {
                            let g = dout[t * D + d].to_f64();
                            dbv += g;
                            for (k, acc) in dwk.iter_mut().enumerate() {
                                let s = t as isize - (W - 1) as isize + k as isize;
                                if s >= 0 {
                                    *acc += g * x[s as usize * D + d].to_f64();
                                }
                            }
                        }
                        part.push((d, dwk, dbv));
                    }
                    part
                })
            })
            .collect();
        let mut all = vec![(vec![], 0.0); D];
        for h in hs {
            for (d, dwk, dbv) in h.join().unwrap() {
                all[d] = (dwk, dbv);
            }
        }
        all
    });
    for d in 0..D {
        let scale = (L as f64).sqrt() * 0.6; // Σ of L terms of size ~1/3: rms ~ 0.33·√L
        for k in 0..W {
            let (got, want) = (dw[d * W + k] as f64, refs[d].0[k]);
            assert!((got - want).abs() < 1e-4 * scale, "dweight[{d},{k}] = {got}, want {want}");
        }
        assert!((db[d] as f64 - refs[d].1).abs() < 1e-4 * scale, "dbias[{d}] = {}, want {}", db[d], refs[d].1);
    }
    println!("B·D·L = {n} (> 2^31): out/dx at {} positions, worst rel err {worst:.2e}; dweight/dbias of all {D} channels OK", positions.len());
}
