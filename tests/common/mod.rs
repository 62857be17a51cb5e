//! Shared helpers of the integration tests: the library's test harness
//! (`causal_conv1d::harness`: RNG, host/device tensors of any dtype and layout, the builders that
//! run one forward / backward / update case through the C ABI and compare it with the f64 oracle;
//! the `ccv1d test` command uses the same), plus what only the tests need: the environment knobs
//! and the case runner.
//!
//! Environment:
//! - `CCV1D_TEST_BACKEND=cpu|gpu` (default cpu): backend code passed in every params struct;
//!   with `gpu` every buffer is device memory (`ccv1d_malloc` / `ccv1d_memcpy`). Read by
//!   `harness::backend_code`.
//! - `CCV1D_TEST_CASES=N`: cases per sweep test (default in each test, modest for CI).
//! - `CCV1D_TEST_SEED=S`: base seed (default: fresh from the clock, printed on failure).
//! - `CCV1D_TEST_ONLY=I`: run only case I of each sweep (to reproduce a failure).
#![allow(dead_code, unused_imports)]

use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub use causal_conv1d::harness::*;

pub fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("{name}={s:?} is not a number")),
        Err(_) => default,
    }
}

/// Base seed: `CCV1D_TEST_SEED`, else fresh from the clock (printed with every failure).
pub fn base_seed() -> u64 {
    match std::env::var("CCV1D_TEST_SEED") {
        Ok(s) => parse_u64(&s).unwrap_or_else(|| panic!("CCV1D_TEST_SEED={s:?} is not a number")),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
    }
}

/// Run `default_cases` (or `CCV1D_TEST_CASES`) random cases of `f`; each gets its own seeded
/// RNG. All failures are collected; the test fails listing them with how to reproduce each.
pub fn sweep(name: &str, default_cases: usize, f: impl FnMut(&mut Rng, usize) -> Result<String, String>) {
    sweep_n(name, env_usize("CCV1D_TEST_CASES", default_cases), f)
}

/// [`sweep`] with a fixed number of cases (heavy tests that `CCV1D_TEST_CASES` must not scale).
pub fn sweep_n(name: &str, cases: usize, mut f: impl FnMut(&mut Rng, usize) -> Result<String, String>) {
    assert!(cases > 0, "CCV1D_TEST_CASES=0 would run nothing");
    let base = base_seed();
    let only = std::env::var("CCV1D_TEST_ONLY").ok().map(|s| s.parse::<usize>().expect("CCV1D_TEST_ONLY"));
    let name_hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| (h ^ c as u64).wrapping_mul(0x100_0000_01b3));
    take_stats();
    let mut failures = Vec::new();
    let mut ran = 0;
    for i in 0..cases {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        let mut rng = Rng::new(base ^ name_hash ^ splitmix(i as u64));
        ran += 1;
        let res = catch_unwind(AssertUnwindSafe(|| f(&mut rng, i)));
        let err = match res {
            Ok(Ok(_)) => continue,
            Ok(Err(e)) => e,
            Err(p) => {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                format!("panic: {}", msg.unwrap_or_default())
            }
        };
        failures.push(format!("case {i}  (CCV1D_TEST_SEED={base} CCV1D_TEST_ONLY={i})\n    {err}"));
    }
    assert!(ran > 0, "CCV1D_TEST_ONLY selects no case (cases = {cases})");
    let mut report = format!("{name}: {ran} cases, seed {base}, backend {}\n", if on_gpu() { "gpu" } else { "cpu" });
    for (k, e) in take_stats() {
        let _ = writeln!(report, "  worst {k:<24} rel {:.2e}  max_abs {:.2e}  elem/bound {:.2}", e.rel, e.max_abs, e.max_elem);
    }
    println!("{report}");
    if !failures.is_empty() {
        let shown: Vec<&String> = failures.iter().take(12).collect();
        panic!(
            "{name}: {}/{ran} cases failed (seed {base}):\n{}\n{}",
            failures.len(),
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n"),
            if failures.len() > shown.len() { format!("... and {} more", failures.len() - shown.len()) } else { String::new() }
        );
    }
}
