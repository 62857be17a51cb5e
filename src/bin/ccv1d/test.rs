//! `ccv1d test`: named accuracy cases through the C ABI, every output compared with the f64
//! oracle by the library's test harness (`causal_conv1d::harness`, the one `cargo test` uses):
//! outputs poisoned with NaN before each call, guard zones and gaps between strided elements
//! checked byte for byte, inputs checked unchanged, per-element tolerances (tests/README.md).
//!
//! The matrix: the seed reports' configuration tables (000: six, natively channel-last; 003: ten,
//! natively channel-first) in f32/f16/bf16 and both layouts, and feature cases (every width,
//! seq_idx with padding, initial/final states including L < W-1 and aliased pools, packed varlen
//! with slots/skip/has_initial_state, decode update with/without circular buffer and slot
//! indices and S > 1, non-contiguous views, mixed dtypes). The oracle is the slow part, so by
//! default the big 003 shapes (8×2048×1024, 4×256×4096, 4×4096×512) run in a reduced set of
//! combinations (see `seed_cases`); `--full` runs every combination.
//!
//! Cases run on as many threads as there are cores (each case builds its own tensors and runs
//! its own oracle); lines are printed in case order.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use causal_conv1d::harness::*;
use causal_conv1d::oracle::ErrStats;
use causal_conv1d::params::{CCV1D_BACKEND_CPU, CCV1D_BACKEND_GPU};
use causal_conv1d::plan::DType;

use crate::args::{Args, Usage};

pub const OPTIONS: [&str; 8] = ["backend", "op", "dtype", "layout", "filter", "seed", "threads", "image"];
pub const FLAGS: [&str; 2] = ["full", "list"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Fwd,
    Bwd,
    Update,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Fwd => "fwd",
            Op::Bwd => "bwd",
            Op::Update => "update",
        }
    }
}

/// x layout of a case: channel-first, channel-last, or non-contiguous views.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lay {
    Cf,
    Cl,
    Strided,
}

impl Lay {
    pub fn name(self) -> &'static str {
        match self {
            Lay::Cf => "cf",
            Lay::Cl => "cl",
            Lay::Strided => "strided",
        }
    }
    fn kind(self) -> Kind {
        match self {
            Lay::Cf => Kind::Cf,
            Lay::Cl => Kind::Cl,
            Lay::Strided => Kind::Strided,
        }
    }
}

type MakeConv = Box<dyn Fn(&mut Rng) -> ConvCfg + Send + Sync>;
type MakeUpd = Box<dyn Fn(&mut Rng) -> UpdCfg + Send + Sync>;

enum Make {
    Conv(MakeConv),
    Upd(MakeUpd),
}

/// One named case.
pub struct Case {
    pub name: String,
    pub op: Op,
    pub dt: DType,
    pub lay: Lay,
    pub shape: String,
    make: Make,
}

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
const BOTH: [Lay; 2] = [Lay::Cf, Lay::Cl];

/// A forward or backward case over `ConvCfg::plain(b, d, l, w, dt, layout)` adjusted by `f`.
#[allow(clippy::too_many_arguments)]
fn conv(
    name: &str,
    op: Op,
    dt: DType,
    lay: Lay,
    (b, d, l, w): (usize, usize, usize, usize),
    f: impl Fn(&mut ConvCfg, &mut Rng) + Send + Sync + 'static,
) -> Case {
    let kind = lay.kind();
    let make = move |rng: &mut Rng| {
        let mut c = ConvCfg::plain(b, d, l, w, dt, kind, rng);
        if kind == Kind::Strided {
            // Every tensor (weights, indices, states included) in some non-contiguous layout.
            c.lay = ConvLayouts::random(kind, rng);
        }
        f(&mut c, rng);
        c
    };
    Case { name: name.into(), op, dt, lay, shape: format!("{b}x{d}x{l} w{w}"), make: Make::Conv(Box::new(make)) }
}

/// fwd and bwd cases of one configuration.
fn conv2(out: &mut Vec<Case>, name: &str, dt: DType, lay: Lay, shape: (usize, usize, usize, usize), f: impl Fn(&mut ConvCfg, &mut Rng) + Send + Sync + Clone + 'static) {
    out.push(conv(name, Op::Fwd, dt, lay, shape, f.clone()));
    out.push(conv(name, Op::Bwd, dt, lay, shape, f));
}

/// An update case: `x [b, d, s]`, width `w`, conv_state `[b, d, sl]`, every tensor of the
/// layout kind (the small ones dense), SiLU and bias on; adjusted by `f`.
#[allow(clippy::too_many_arguments)]
fn upd(
    out: &mut Vec<Case>,
    name: &str,
    dt: DType,
    lay: Lay,
    (b, d, s, w, sl): (usize, usize, usize, usize, usize),
    f: impl Fn(&mut UpdCfg, &mut Rng) + Send + Sync + 'static,
) {
    let kind = lay.kind();
    let make = move |rng: &mut Rng| {
        let strided = kind == Kind::Strided;
        let small = |rng: &mut Rng, n: usize| if strided { Layout::strided(rng, n) } else { Layout::cf(n) };
        let mut c = UpdCfg {
            batch: b,
            dim: d,
            seqlen: s,
            width: w,
            state_len: sl,
            silu: true,
            xdt: dt,
            wdt: dt,
            bias: Some(dt),
            slots: b,
            num_state_slots: 0,
            cache_seqlens: None,
            indices: None,
            in_place: false,
            lay_x: Layout::of(kind, rng, 3),
            lay_out: Layout::of(kind, rng, 3),
            lay_w: small(rng, 2),
            lay_b: small(rng, 1),
            lay_state: Layout::of(kind, rng, 3),
            lay_idx: small(rng, 1),
        };
        f(&mut c, rng);
        c
    };
    out.push(Case {
        name: name.into(),
        op: Op::Update,
        dt,
        lay,
        shape: format!("{b}x{d}x{s} w{w} state{sl}"),
        make: Make::Upd(Box::new(make)),
    });
}

/// The seed tables. 000 (tiny) and 003's small/medium shapes: every dtype, both layouts, fwd and
/// bwd. 003's big shapes (4.2M–16.8M elements per tensor), unless `full`: forward in every dtype
/// in the report's layout (channel-first) plus f32 channel-last; backward in f32 channel-first
/// (all six), plus f32 channel-last and bf16 channel-first for Long Sequence and Wide Channel
/// without SiLU: 547 cases in about 23 s on 2 cores; `--full` (every combination) about 75 s.
fn seed_cases(out: &mut Vec<Case>, full: bool) {
    for sd in SEED_000 {
        for dt in DTYPES {
            for lay in [Lay::Cl, Lay::Cf] {
                let sd2 = sd;
                conv2(out, &format!("000/{}", sd.name), dt, lay, (sd.batch, sd.dim, sd.seqlen, SEED_WIDTH), move |c, _| seed_setup(c, &sd2));
            }
        }
    }
    for sd in SEED_003 {
        let big = sd.batch * sd.dim * sd.seqlen > 1 << 20;
        let large = sd.batch * sd.dim * sd.seqlen > 8 << 20;
        for dt in DTYPES {
            for lay in BOTH {
                for op in [Op::Fwd, Op::Bwd] {
                    let keep = full
                        || !big
                        || match op {
                            Op::Fwd => lay == Lay::Cf || dt == DType::F32,
                            _ => match (dt, lay) {
                                (DType::F32, Lay::Cf) => true,
                                (DType::F32, _) | (DType::BF16, Lay::Cf) => !large && !sd.silu,
                                _ => false,
                            },
                        };
                    if keep {
                        let sd2 = sd;
                        out.push(conv(&format!("003/{}", sd.name), op, dt, lay, (sd.batch, sd.dim, sd.seqlen, SEED_WIDTH), move |c, _| seed_setup(c, &sd2)));
                    }
                }
            }
        }
    }
}

fn seed_setup(c: &mut ConvCfg, sd: &SeedConfig) {
    c.silu = sd.silu;
    c.bias = sd.bias.then_some(c.xdt);
    c.dbias = sd.bias.then_some(DType::F32);
    // As in tests/seeds.rs: dweight in the weight dtype (Dao's API).
    c.dw_dt = c.xdt;
}

/// Every state feature on: initial, final, dfinal, dinitial.
fn states(c: &mut ConvCfg) {
    c.initial = true;
    c.fin = true;
    c.dfinal = true;
    c.dinit = true;
}

fn seq_idx_rows(l: usize) -> Vec<i32> {
    // Row 0: left padding, two segments. Row 1: three segments (one of length 3), right padding.
    let mut v = Vec::with_capacity(2 * l);
    for t in 0..l {
        v.push(if t < 7 { -1 } else if t < 107 { 0 } else { 1 });
    }
    for t in 0..l {
        v.push(if t < 60 { 0 } else if t < 63 { 1 } else if t + 44 < l { 2 } else { -1 });
    }
    v
}

fn feature_cases(out: &mut Vec<Case>) {
    for dt in DTYPES {
        for lay in BOTH {
            for w in 1..=8 {
                conv2(out, &format!("width/w{w}"), dt, lay, (2, 24, 333, w), move |c, _| c.silu = w % 2 == 0);
            }
            // Rows of whole tiles and warp spans (4096 = 2 x 2048 16-bit, 4 x 1024 f32): the
            // warp-span kernels (at every width with CCV1D_CF_WARP=1), the initial state before
            // the first span and dfinal in the last.
            if lay == Lay::Cf {
                for w in 1..=8 {
                    conv2(out, &format!("width/w{w}-whole-tiles"), dt, lay, (1, 6, 4096, w), move |c, _| {
                        c.silu = w % 2 == 1;
                        states(c);
                    });
                }
            }
            // The warp-span kernels on rows that are not whole spans (1000 = 512 + 488 16-bit
            // tokens, 3 x 256 + 232 f32): the last span is moved back to end at L; one row skipped
            if lay == Lay::Cf {
                for w in [2, 4, 6] {
                    conv2(out, &format!("rows/ragged-spans-w{w}"), dt, lay, (3, 10, 1000, w), move |c, _| {
                        c.silu = w != 2;
                        c.slots = 3;
                        c.num_state_slots = 3;
                        c.state_indices = Some(vec![1, -1, 0]);
                        states(c);
                    });
                }
            }
            conv2(out, "seq_idx/padding+states", dt, lay, (2, 20, 257, 4), |c, _| {
                c.silu = true;
                c.seq_idx = Some(seq_idx_rows(257));
                states(c);
            });
            for l in [0, 1, 2, 3, 4, 40] {
                conv2(out, &format!("states/w4-L{l}"), dt, lay, (2, 12, l, 4), |c, _| {
                    c.silu = true;
                    states(c);
                });
            }
            conv2(out, "states/w8-L3", dt, lay, (2, 12, 3, 8), |c, _| states(c));
            conv2(out, "states/aliased", dt, lay, (2, 12, 50, 4), |c, _| {
                states(c);
                c.alias = true;
            });
            // A skipped batch row (state index -1) long enough for whole interior tiles: its
            // outputs and gradients are 0 (the GPU's lean tiles once computed them).
            conv2(out, "states/skipped-row-long", dt, lay, (3, 16, 4500, 4), |c, _| {
                c.silu = true;
                c.slots = 3;
                c.num_state_slots = 3;
                c.state_indices = Some(vec![2, -1, 0]);
                states(c);
            });
            // bwd_cf walks several batch rows of a channel per block where that saves waves
            // (kernels/geometry.rs cf_row_group): on a 132-SM H100 this shape takes groups of 3, 3
            // and 2 rows (3 partial rows); one row skipped.
            if lay == Lay::Cf {
                conv2(out, "rows/grouped-bwd", dt, lay, (8, 600, 2048, 4), |c, _| {
                    c.silu = true;
                    c.bias = Some(c.xdt);
                    c.dbias = Some(DType::F32);
                    c.slots = 8;
                    c.num_state_slots = 8;
                    c.state_indices = Some(vec![0, 1, 2, -1, 4, 5, 6, 7]);
                    states(c);
                });
            }
            // f32 bwd_cfw's chunk rules (kernels/bwd.rs bwd_cfw_f32_chunks) on a 132-SM H100:
            // - batch >= 4, W <= 4, rows of >= 4 tiles: 2-tile chunks, one row a block (2 chunks a
            //   row, 8 partial rows, a reduce launch);
            // - batch 1-2, rows of >= 8 tiles, at most 2048 rows: 3-tile chunks (3 + 3 + 2, 3
            //   partial rows a channel).
            // The forward runs both, and bf16 1x800x16384 (main_geometry's 3 + 3 + 2 tiles), on
            // `fwd_cfw` in blocks of one tile of one row (kernels/fwd.rs fwd_one_step: each makes
            // 4 waves of such blocks or more; validate.sh's cf-warp-never runs them on the tile
            // kernel in 2-tile chunks). At W >= 6 the forward takes f32 rows in 3-tile chunks
            // (4x600x4096: 3 + 1 tiles) and gives a 16-bit `fwd_cfw` block at most 4 steps
            // (4x600x8192: one row of 4 tiles, not 2).
            let chunked = [
                (DType::F32, "rows/f32-2tile-chunks", (4, 600, 4096, 4)),
                (DType::F32, "rows/f32-3tile-chunks", (1, 1400, 8192, 4)),
                (DType::BF16, "rows/16bit-2tile-chunks", (1, 800, 16384, 4)),
                (DType::F32, "rows/f32-wide-3tile-chunks", (4, 600, 4096, 7)),
                (DType::BF16, "rows/16bit-wide-4step-blocks", (4, 600, 8192, 6)),
            ];
            if lay == Lay::Cf {
                for (_, name, shape) in chunked.into_iter().filter(|c| c.0 == dt) {
                    conv2(out, name, dt, lay, shape, |c, _| {
                        c.silu = true;
                        c.bias = Some(c.xdt);
                        c.dbias = Some(DType::F32);
                    });
                }
            }
            // Packed: lengths 3, 0, 37, 1, 159; a pool of 8 slots, one sequence skipped.
            let cu = vec![0, 3, 3, 40, 41, 200];
            let cu2 = cu.clone();
            conv2(out, "varlen/slots+skip+has_init", dt, lay, (1, 16, 200, 4), move |c, _| {
                c.silu = true;
                c.cu_seqlens = Some(cu.clone());
                c.slots = 8;
                c.num_state_slots = 8;
                c.state_indices = Some(vec![5, -1, 0, 7, 2]);
                c.has_init = Some((vec![1, 0, 7, 1, 0], Dt::I32));
                states(c);
            });
            conv2(out, "varlen/bool-has_init+aliased", dt, lay, (1, 16, 200, 3), move |c, _| {
                c.cu_seqlens = Some(cu2.clone());
                c.slots = 5;
                c.has_init = Some((vec![0, 1, 1, 0, 2], Dt::Bool));
                states(c);
                c.alias = true;
            });
            // Mixed dtypes: weight and bias in the other two float dtypes, dweight/dbias too.
            let others: Vec<DType> = DTYPES.into_iter().filter(|&d| d != dt).collect();
            let (wd, bd) = (others[0], others[1]);
            conv2(out, "mixed-dtypes", dt, lay, (2, 24, 120, 4), move |c, _| {
                c.silu = true;
                c.wdt = wd;
                c.bias = Some(bd);
                c.dw_dt = wd;
                c.dbias = Some(bd);
            });
            out.push(conv("nondeterministic", Op::Bwd, dt, lay, (3, 40, 1500, 4), |c, _| {
                c.silu = true;
                c.nondet = true;
            }));
            update_cases(out, dt, lay);
        }
        conv2(out, "views/non-contiguous", dt, Lay::Strided, (2, 19, 150, 4), |c, _| {
            c.silu = true;
            c.seq_idx = Some(seq_idx_rows(150));
            states(c);
        });
        update_cases(out, dt, Lay::Strided);
    }
}

fn update_cases(out: &mut Vec<Case>, dt: DType, lay: Lay) {
    let strided = lay == Lay::Strided;
    let pre = if strided { "views/update-" } else { "update/" };
    upd(out, &format!("{pre}s1"), dt, lay, (3, 40, 1, 4, 3), |_, _| {});
    if strided {
        return;
    }
    upd(out, "update/state_len6", dt, lay, (3, 40, 1, 4, 6), |_, _| {});
    upd(out, "update/w2", dt, lay, (3, 40, 1, 2, 1), |c, _| c.silu = false);
    upd(out, "update/w8", dt, lay, (3, 40, 1, 8, 7), |_, _| {});
    upd(out, "update/circular", dt, lay, (3, 40, 1, 4, 4), |c, _| c.cache_seqlens = Some(vec![0, 5, 13]));
    upd(out, "update/indices+padding", dt, lay, (3, 40, 1, 4, 3), |c, _| {
        c.slots = 4;
        c.num_state_slots = 4;
        c.indices = Some(vec![2, -1, 0]);
    });
    upd(out, "update/S4+circular+indices", dt, lay, (3, 40, 4, 4, 5), |c, _| {
        c.slots = 4;
        c.num_state_slots = 4;
        c.cache_seqlens = Some(vec![7, 0, 2]);
        c.indices = Some(vec![1, 3, -1]);
    });
    upd(out, "update/S6>state_len", dt, lay, (2, 24, 6, 4, 3), |_, _| {});
    upd(out, "update/in-place", dt, lay, (3, 40, 2, 4, 3), |c, _| c.in_place = true);
}

/// Every case of the matrix, before filtering.
pub fn all_cases(full: bool) -> Vec<Case> {
    let mut v = Vec::new();
    seed_cases(&mut v, full);
    feature_cases(&mut v);
    v
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| (h ^ c as u64).wrapping_mul(0x100_0000_01b3))
}

/// What one case found.
struct Outcome {
    report: CaseReport,
    secs: f64,
}

fn run_case(c: &Case, seed: u64) -> Outcome {
    let t0 = Instant::now();
    let key = format!("{}|{}|{}|{}", c.name, c.op.name(), c.dt.name(), c.lay.name());
    let mut rng = Rng::new(seed ^ fnv(&key));
    let r = catch_unwind(AssertUnwindSafe(|| match (&c.make, c.op) {
        (Make::Conv(m), Op::Fwd) => fwd_case(&m(&mut rng), &mut rng),
        (Make::Conv(m), _) => bwd_case(&m(&mut rng), &mut rng),
        (Make::Upd(m), _) => update_case(&m(&mut rng), &mut rng),
    }));
    let report = r.unwrap_or_else(|p| {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
        let mut rep = CaseReport::default();
        rep.fail(format!("panic: {msg}"));
        rep
    });
    Outcome { report, secs: t0.elapsed().as_secs_f64() }
}

fn fmt_out(o: &OutCheck) -> String {
    let e: &ErrStats = &o.stats;
    match &o.tol {
        Some(t) => format!(
            "{}: max_abs {:.2e} rel {:.2e} tol {:.0e} ({:.2} of elem bound)",
            o.name, e.max_abs, e.rel, t.rel, e.max_elem
        ),
        None => format!("{}: max_abs {:.2e} (exact copy)", o.name, e.max_abs),
    }
}

fn line(c: &Case, o: &Outcome) -> String {
    let status = if o.report.passed() { "PASS" } else { "FAIL" };
    let outs: Vec<String> = o.report.outputs.iter().map(fmt_out).collect();
    let mut s = format!(
        "{status}  {:<30} {:<6} {:<4} {:<7} {:<24} {}  [{:.2} s]",
        c.name,
        c.op.name(),
        c.dt.name(),
        c.lay.name(),
        c.shape,
        if outs.is_empty() { "-".to_string() } else { outs.join("; ") },
        o.secs
    );
    for f in &o.report.failures {
        s += &format!("\n      - {f}");
    }
    s
}

pub fn run(argv: &[String]) -> Result<i32, Usage> {
    let a = Args::parse(argv, &OPTIONS, &FLAGS)?;
    let backend = a.choice("backend", &["cpu", "gpu"])?.unwrap_or("cpu");
    let op = a.choice("op", &["fwd", "bwd", "update", "all"])?.unwrap_or("all");
    let dtype = a.choice("dtype", &["f32", "f16", "bf16"])?;
    let layout = a.choice("layout", &["cf", "cl", "strided"])?;
    let filter = a.get("filter").map(|s| s.to_lowercase());
    let seed = match a.get("seed") {
        None => 0,
        Some(s) => parse_u64(s).ok_or_else(|| Usage(format!("--seed {s:?}: expected an integer (decimal or 0x hex)")))?,
    };
    let full = a.flag("full");
    // Kernel tuning: check a kernel image built with other flags (as `ccv1d bench --image` times it).
    if let Some(path) = a.get("image") {
        if let Err(e) = causal_conv1d::gpu::testing::set_image_file(path) {
            eprintln!("ccv1d test --image: {e}");
            return Ok(2);
        }
    }
    let cases: Vec<Case> = all_cases(full)
        .into_iter()
        .filter(|c| op == "all" || c.op.name() == op)
        .filter(|c| dtype.map_or(true, |d| c.dt.name() == d))
        .filter(|c| layout.map_or(true, |l| c.lay.name() == l))
        .filter(|c| filter.as_ref().map_or(true, |f| c.name.to_lowercase().contains(f.as_str())))
        .collect();
    if a.flag("list") {
        for c in &cases {
            println!("{:<30} {:<6} {:<4} {:<7} {}", c.name, c.op.name(), c.dt.name(), c.lay.name(), c.shape);
        }
        println!("{} cases", cases.len());
        return Ok(0);
    }
    if cases.is_empty() {
        eprintln!("ccv1d test: no case matches the options (see --list)");
        return Ok(2);
    }
    if backend == "gpu" {
        if let Err(e) = crate::info::device_count() {
            eprintln!("ccv1d test --backend gpu: no usable GPU: {e}");
            return Ok(1);
        }
        set_backend(CCV1D_BACKEND_GPU);
    } else {
        set_backend(CCV1D_BACKEND_CPU);
    }
    let avail = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let workers = a.number("threads")?.unwrap_or(avail).clamp(1, cases.len());
    println!(
        "ccv1d test: {} cases, backend {backend}, seed {seed}{}, {workers} worker thread(s) (outputs NaN-poisoned before each call; compared with the f64 oracle)",
        cases.len(),
        if full { ", full matrix" } else { "" }
    );
    // Panics inside a case become its failure message, not noise on stderr.
    std::panic::set_hook(Box::new(|_| {}));
    let t0 = Instant::now();
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Outcome)>();
    let cases = Arc::new(cases);
    let failed_names = Mutex::new(Vec::new());
    let (mut passed, mut failed) = (0usize, 0usize);
    std::thread::scope(|s| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (cases, next) = (&cases, &next);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= cases.len() {
                    break;
                }
                let o = run_case(&cases[i], seed);
                if tx.send((i, o)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        // Print in case order as results arrive.
        let mut pending = BTreeMap::new();
        let mut shown = 0;
        for (i, o) in rx {
            pending.insert(i, o);
            while let Some(o) = pending.remove(&shown) {
                let c = &cases[shown];
                println!("{}", line(c, &o));
                if o.report.passed() {
                    passed += 1;
                } else {
                    failed += 1;
                    failed_names.lock().unwrap().push(format!("{} {} {} {}", c.name, c.op.name(), c.dt.name(), c.lay.name()));
                }
                shown += 1;
            }
        }
    });
    let _ = std::panic::take_hook();
    println!();
    for n in failed_names.lock().unwrap().iter() {
        println!("FAILED: {n}");
    }
    println!("{passed} passed, {failed} failed ({:.1} s, backend {backend}, seed {seed})", t0.elapsed().as_secs_f64());
    Ok(if failed > 0 { 1 } else { 0 })
}
