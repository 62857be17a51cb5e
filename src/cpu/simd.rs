//! Run-time choice of the vector width for the hot loops.
//!
//! The library is built for baseline x86-64 (SSE2: 4 f32 lanes). The per-job functions of
//! forward and backward are `#[inline(always)]` all the way down, and are instantiated again
//! inside `#[target_feature]` wrappers (AVX2 + FMA: 8 lanes; AVX-512F + FMA: 16), where the same
//! auto-vectorised loops use wider registers. No reassociation, and fused multiply-adds only
//! where the source says `mul_add` (then a libm call in the baseline build, correctly rounded
//! like the instruction): every build performs the same IEEE operations in the same order, so
//! the results are bitwise those of the baseline build (cpu::tests::wide_isa_matches_baseline).
//! The kernels of all three ops (forward, backward, update) go through these wrappers.

/// Instruction sets the kernels are instantiated for, narrowest first (the wide ones with FMA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    Baseline,
    Avx2,
    Avx512,
}

/// The widest instantiation this CPU runs: detected once; `CCV1D_CPU_ISA=baseline|avx2` caps
/// it (to compare the builds).
pub fn best() -> Isa {
    use std::sync::OnceLock;
    static BEST: OnceLock<Isa> = OnceLock::new();
    *BEST.get_or_init(|| {
        let cap = match std::env::var("CCV1D_CPU_ISA").as_deref().map(str::trim) {
            Ok("baseline") => Isa::Baseline,
            Ok("avx2") => Isa::Avx2,
            _ => Isa::Avx512,
        };
        detected().min(cap)
    })
}

fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("fma") && has!("avx512f") {
            return Isa::Avx512;
        }
        if has!("fma") && has!("avx2") {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// Define `$pick(isa, args…)` calling `$f::<W>(args…)` (an `#[inline(always)]` function
/// generic over `const W`) compiled for `isa`, which must not exceed `best()`.
macro_rules! isa_twins {
    ($pick:ident, $f:ident, ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty) => {
        fn $pick<const W: usize>(isa: super::simd::Isa, $($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn avx2<const W: usize>($($arg: $ty),*) -> $ret {
                    $f::<W>($($arg),*)
                }
                #[target_feature(enable = "avx512f,fma")]
                fn avx512<const W: usize>($($arg: $ty),*) -> $ret {
                    $f::<W>($($arg),*)
                }
                debug_assert!(isa <= super::simd::best());
                match isa {
                    // SAFETY: `isa` ≤ `simd::best()`, so the CPU has the feature.
                    super::simd::Isa::Avx512 => return unsafe { avx512::<W>($($arg),*) },
                    super::simd::Isa::Avx2 => return unsafe { avx2::<W>($($arg),*) },
                    super::simd::Isa::Baseline => {}
                }
            }
            let _ = isa;
            $f::<W>($($arg),*)
        }
    };
}
pub(crate) use isa_twins;
