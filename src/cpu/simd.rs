//! Run-time choice of the vector width for the hot loops.
//!
//! The library is built for baseline x86-64 (SSE2: 4 f32 lanes). The per-job functions of
//! forward and backward are `#[inline(always)]` all the way down, and are instantiated a second
//! time inside a `#[target_feature(enable = "avx2")]` wrapper, where the same auto-vectorised
//! loops use 8 lanes. No FMA and no reassociation: the AVX2 build performs the same IEEE
//! operations in the same order, so its results are bitwise those of the baseline build
//! (tests/…/cpu::tests::avx2_matches_baseline checks it).

/// Whether this CPU runs the AVX2 instantiation: detected once; `CCV1D_CPU_AVX2=0` turns it off
/// (to compare the two builds).
pub fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static ON: OnceLock<bool> = OnceLock::new();
        *ON.get_or_init(|| {
            std::env::var("CCV1D_CPU_AVX2").map_or(true, |v| v.trim() != "0") && std::arch::is_x86_feature_detected!("avx2")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Define `$avx2` as `$f` (an `#[inline(always)]` function generic over `const W`) compiled
/// with AVX2, and `$pick` calling one or the other as `avx2` says.
macro_rules! avx2_twin {
    ($pick:ident, $avx2:ident, $f:ident, ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn $avx2<const W: usize>($($arg: $ty),*) -> $ret {
            $f::<W>($($arg),*)
        }

        fn $pick<const W: usize>(avx2: bool, $($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: `avx2` is true only when the CPU has AVX2 (simd::avx2()).
                return unsafe { $avx2::<W>($($arg),*) };
            }
            let _ = avx2;
            $f::<W>($($arg),*)
        }
    };
}
pub(crate) use avx2_twin;
