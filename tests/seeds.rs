//! The configurations of the seed reports as accuracy cases (forward and backward against the
//! f64 oracle), printing max-abs and relative errors (`cargo test --test seeds -- --nocapture`).
//! The tables are `harness::SEED_000` / `SEED_003` (shared with `ccv1d test` and `ccv1d bench`):
//!
//! - 000 (HIP channel-last backward test): Tiny 1×32×64, Small 2×64×256, Medium 4×64×512,
//!   Large 4×64×1024, No Bias 2×64×256, With SiLU 2×64×256; width 4, fp32, channel-last.
//! - 003 (HIP backward report): ten configs × fp32/fp16, width 4, channel-first.
//!
//! The large ones (8×2048×1024) need about 1.5 GB; the tests take one lock so they run one
//! at a time.

mod common;

use std::sync::Mutex;

use causal_conv1d::plan::DType;
use common::*;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Run every seed config forward and backward; print a table; fail listing the failures.
fn run_seeds(title: &str, seeds: &[SeedConfig], xdt: DType, kind: Kind) {
    let _lock = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let base = base_seed();
    let mut failures = Vec::new();
    println!("\n{title} (x {}, {:?}, seed {base}, backend {})", xdt.name(), kind, if on_gpu() { "gpu" } else { "cpu" });
    println!("{:<22} {:>16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}", "config", "B×D×L", "out rel", "out max", "dx rel", "dx max", "dw rel", "dw max", "db rel");
    for (i, sd) in seeds.iter().enumerate() {
        let mut rng = Rng::new(base ^ splitmix(i as u64 + 1000));
        let mut c = ConvCfg::plain(sd.batch, sd.dim, sd.seqlen, SEED_WIDTH, xdt, kind, &mut rng);
        c.silu = sd.silu;
        c.bias = sd.bias.then_some(xdt);
        c.dbias = sd.bias.then_some(DType::F32);
        // Dao's API returns dweight in the weight dtype; the fp32 runs keep fp32.
        c.dw_dt = xdt;
        let shape = format!("{}×{}×{}", sd.batch, sd.dim, sd.seqlen);
        take_stats();
        let fwd = run_fwd(&c, &mut rng);
        let bwd = run_bwd(&c, &mut rng);
        let stats = take_stats();
        let cell = |key: &str, abs: bool| {
            stats.iter().find(|(n, _)| n.starts_with(key)).map_or("-".to_string(), |(_, e)| format!("{:.2e}", if abs { e.max_abs } else { e.rel }))
        };
        println!(
            "{:<22} {:>16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}{}",
            sd.name,
            shape,
            cell("fwd out", false),
            cell("fwd out", true),
            cell("bwd dx", false),
            cell("bwd dx", true),
            cell("bwd dweight", false),
            cell("bwd dweight", true),
            cell("bwd dbias", false),
            if fwd.is_err() || bwd.is_err() { "  FAIL" } else { "" }
        );
        for (what, r) in [("fwd", fwd), ("bwd", bwd)] {
            if let Err(e) = r {
                failures.push(format!("{} {shape} {what}: {e}", sd.name));
            }
        }
    }
    assert!(failures.is_empty(), "{title}: {} failed (CCV1D_TEST_SEED={base}):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn seed000_channel_last_fp32() {
    run_seeds("seed 000: channel-last", &SEED_000, DType::F32, Kind::Cl);
}

#[test]
fn seed003_channel_first_fp32() {
    run_seeds("seed 003: channel-first fp32", &SEED_003, DType::F32, Kind::Cf);
}

#[test]
fn seed003_channel_first_fp16() {
    run_seeds("seed 003: channel-first fp16", &SEED_003, DType::F16, Kind::Cf);
}
