//! `ccv1d`: the host test binary of causal-conv1d.
//!
//! - `ccv1d info`: library version, compiled backends, GPUs, CPU threads.
//! - `ccv1d test`: the accuracy matrix against the f64 oracle (seed configurations and feature
//!   cases), one line per case, non-zero exit status on any failure.
//! - `ccv1d bench`: timings, achieved bandwidth and its fraction of a copy measured in the same run.
//!
//! Everything goes through the C ABI (`causal_conv1d::capi`), as a C caller would.

#[path = "ccv1d/args.rs"]
mod args;
#[path = "ccv1d/bench.rs"]
mod bench;
#[path = "ccv1d/info.rs"]
mod info;
#[path = "ccv1d/plot.rs"]
mod plot;
#[path = "ccv1d/png.rs"]
mod png;
#[path = "ccv1d/raster.rs"]
mod raster;
#[path = "ccv1d/test.rs"]
mod test;

use args::Usage;

const USAGE: &str = "\
usage: ccv1d <command> [options]

commands:
  info     library version, backends compiled in, GPUs, CPU threads
  test     accuracy cases vs the f64 oracle; exit status 1 if any fails
           --backend cpu|gpu            (default cpu)
           --op fwd|bwd|update|all      (default all)
           --dtype f32|f16|bf16         (default: all three)
           --layout cf|cl|strided       (default: all)
           --filter TEXT                case names containing TEXT (case-insensitive)
           --seed S                     base seed (default 0), decimal or 0x hex
           --threads N                  cases run concurrently (default: all cores)
           --full                       every dtype/layout/op of the big seed shapes too
           --list                       list the selected cases, run nothing
           --image FILE                 use this GPU kernel image instead of the embedded one
  bench    timings: median/min ms, GB/s of the minimal traffic, % of a copy
           --backend cpu|gpu            (default cpu)
           --preset seeds|mamba|decode|all   (default seeds)
           --shape BxDxL [--width W] [--act silu|none]
                                        one shape instead of a preset (default W 4, SiLU)
           --op fwd|bwd|update|all      --dtype f32|f16|bf16   --layout cf|cl
           --filter TEXT                row names containing TEXT
           --warmup N --iters N         (default 10 + 100; fewer for slow rows on the CPU)
           --json FILE --csv FILE       also write the rows there
           --plot FILE.png              also draw GB/s vs bytes per call, per op/dtype/layout
           --timing graph|events|host   (GPU; default graph)
           --image FILE                 time this GPU kernel image instead of the embedded one
  help     this text
";

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = argv.first() else {
        eprint!("{USAGE}");
        std::process::exit(2);
    };
    let rest = &argv[1..];
    let r: Result<i32, Usage> = match cmd.as_str() {
        "info" => args::Args::parse(rest, &[], &[]).map(|_| info::run()),
        "test" => test::run(rest),
        "bench" => bench::run(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(0)
        }
        other => Err(Usage(format!("unknown command {other:?}"))),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(Usage(msg)) => {
            eprintln!("ccv1d: {msg}\n");
            eprint!("{USAGE}");
            std::process::exit(2);
        }
    }
}
