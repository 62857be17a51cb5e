//! Activation math in f32, written so that loops over slices auto-vectorise (no libm calls).

use crate::plan::Act;

/// e^x for f32, within ~2 ulp on [-86, 88] (inputs are clamped there; results saturate).
/// Cody–Waite range reduction with the Cephes `expf` polynomial; rounding to the nearest integer
/// by the 1.5·2^23 trick and scaling by adding to the exponent bits, so that everything is plain
/// arithmetic that vectorises. The multiply-adds are fused (`mul_add`): one FMA instruction in
/// the AVX2 / AVX-512 instantiations (cpu::simd), a correctly rounded libm `fmaf` elsewhere, so
/// every instantiation gives the same bits.
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub fn exp_f32(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    // -86 keeps the scaled result a normal number (the exponent-bits add below needs that).
    let x = x.clamp(-86.0, 88.0);
    let t = x.mul_add(std::f32::consts::LOG2_E, MAGIC);
    let n = t - MAGIC; // round(x·log2 e), -124 ≤ n ≤ 127
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000); // the same integer
    let r = n.mul_add(-0.693_359_375, x);
    let r = n.mul_add(2.121_944_4e-4, r);
    let mut p = 1.987_569_1e-4f32;
    p = p.mul_add(r, 1.398_199_9e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 1.666_666_5e-1);
    p = p.mul_add(r, 5.000_000_1e-1);
    let y = p.mul_add(r * r, r) + 1.0; // e^r in [0.7, 1.42]: a normal number
    f32::from_bits((y.to_bits() as i32).wrapping_add(ni << 23) as u32)
}

#[inline(always)]
pub fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + exp_f32(-z))
}

/// z·σ(z); -0 below -88 (where σ(z) < 2^-126: the clamped exp would leave z/e^88, wrong for
/// huge |z|, and -inf would stay -inf), as docs/semantics.md defines the saturation.
#[inline(always)]
pub fn silu(z: f32) -> f32 {
    let v = z / (1.0 + exp_f32(-z));
    if z < -88.0 {
        -0.0
    } else {
        v
    }
}

/// d silu / dz = σ(z)(1 + z(1 − σ(z))); -0 below -88 and 1 above 88 (the formula gives
/// -inf·0 or inf·0 = NaN at ±inf).
#[inline(always)]
pub fn dsilu(z: f32) -> f32 {
    let s = sigmoid(z);
    let v = s * (1.0 + z * (1.0 - s));
    if z < -88.0 {
        -0.0
    } else if z > 88.0 {
        1.0
    } else {
        v
    }
}

/// `o[i] = act(o[i])`.
#[inline(always)]
pub fn apply_act(act: Act, o: &mut [f32]) {
    if act == Act::Silu {
        for v in o.iter_mut() {
            *v = silu(*v);
        }
    }
}

/// `g[i] *= act'(pre[i])` (nothing for the identity).
#[inline(always)]
pub fn mul_dact(act: Act, g: &mut [f32], pre: &[f32]) {
    if act == Act::Silu {
        let pre = &pre[..g.len()];
        for (g, z) in g.iter_mut().zip(pre) {
            *g *= dsilu(*z);
        }
    }
}

/// `g[i] = dy[i]·act'(pre[i])` (`g = dy` for the identity): [`mul_dact`] on a copy of `dy`, in
/// one pass.
#[inline(always)]
pub fn mul_dact_to(act: Act, g: &mut [f32], dy: &[f32], pre: &[f32]) {
    let n = g.len();
    let (dy, pre) = (&dy[..n], &pre[..n]);
    if act == Act::Silu {
        for i in 0..n {
            g[i] = dy[i] * dsilu(pre[i]);
        }
    } else {
        g.copy_from_slice(dy);
    }
}
