//! `ccv1d bench`: warm-up, then timed calls of each row through the C ABI; median / min / mean
//! time, achieved bandwidth of the minimal traffic, and its fraction of a copy measured in the
//! same run.
//!
//! - Traffic (bytes each call must move at least): fwd x + out; bwd x + dout + dx; update x +
//!   conv_state read + conv_state write + out. Weights, bias, dweight, dbias are not counted.
//! - Copy reference. CPU: a host memcpy of max(4×LLC, 256 MiB), best of 5, on one thread and on
//!   all the backend's threads; the better one is the reference. GPU: a device-to-device
//!   copy of 1 GiB, best of 10, by the driver (`ccv1d_memcpy`) and by the library's 16-byte-vector
//!   copy kernel; the faster one. Copy bandwidth counts read + write (2 × bytes).
//! - Same-bytes copy (GPU, last column `SameCopy(ms)`): the same two copies moving one row's
//!   traffic (half read, half written), timed like the rows; for small rows, where launch and
//!   tail dominate, the time a plain copy of those bytes takes.
//! - Timing. CPU: host clock around each call. GPU (`--timing`): `graph` (default) captures the
//!   row's calls (at least 20, every buffer set once or more) into a CUDA/HIP graph on a stream of
//!   its own and times each replay with device events, so host launch cost is not in the number;
//!   `events` puts device events around each separately launched call; `host` (also the fallback
//!   without device events) times batches of back-to-back calls ended by `ccv1d_synchronize`.
//!   The header says which.
//! - Cache: each row cycles over several buffer sets (x, outputs, states) whose total is at
//!   least 128 MiB on the GPU (> the L2 of an H100, 50 MB, or an H200, 60 MB) or 2×LLC on the
//!   CPU, at most 8192 sets; the `cache` column says "cold" when the rotation reaches that total,
//!   else "warm" (the sets together fit in the cache: tiny shapes).
//! - `--image FILE`: use this kernel image (fatbin, or `.hsaco`) instead of the embedded one, to
//!   compare kernels built with other flags (CAUSAL_CONV1D_NVCC_FLAGS) in the same run setup.
//! - Iterations: `--warmup`/`--iters` (default 10 + 100, as in the seed reports). On the CPU,
//!   when they are not given, a row whose first call takes over 20 ms runs 2 warm-up calls and
//!   as many timed calls as fit in about 1.5 s (at least 5).
//! - Output: the table on stdout; `--json FILE` / `--csv FILE` write the same records;
//!   `--plot FILE.png` draws a 1200x800 PNG (plot.rs): GB/s against bytes moved per call (log
//!   axis), one series per op/dtype/layout, the copy reference as a dashed line; failed rows
//!   are left out and counted under the chart.

use std::ffi::c_void;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::time::Instant;

use causal_conv1d::capi;
use causal_conv1d::error::CCV1D_OK;
use causal_conv1d::gpu::timing::{Events, Graph};
use causal_conv1d::harness::{last_error, status_str, Rng, SEED_000, SEED_003, SEED_WIDTH};
use causal_conv1d::params::*;
use causal_conv1d::plan::DType;

use crate::args::{Args, Usage};
use crate::plot::{Chart, Series, PALETTE};
use crate::raster::Marker;
use crate::test::Op;

pub const OPTIONS: [&str; 16] =
    ["backend", "preset", "op", "dtype", "layout", "filter", "json", "csv", "plot", "warmup", "iters", "timing", "image", "shape", "width", "act"];

const MIB: usize = 1 << 20;
/// Most buffer sets a row rotates over.
const MAX_SETS: usize = 8192;
/// Rotation target on the GPU: well above the L2 of an H100 (50 MB) or H200 (60 MB) (MI300's 4
/// MB L2 + 256 MB Infinity Cache is not covered: the column says "cold" only against 128 MiB).
const GPU_ROTATION: usize = 128 * MIB;
/// CPU rows whose first call takes longer than this get fewer iterations (unless given).
const SLOW_CALL_S: f64 = 0.020;
const CPU_ROW_BUDGET_S: f64 = 1.5;

/// One benchmark row.
#[derive(Clone, Debug)]
struct Row {
    preset: &'static str,
    name: String,
    op: Op,
    dt: DType,
    cl: bool,
    silu: bool,
    bias: bool,
    batch: usize,
    dim: usize,
    /// Sequence length (update: tokens per call, S).
    seqlen: usize,
    width: usize,
    /// Update only.
    state_len: usize,
}

impl Row {
    fn shape(&self) -> String {
        match self.op {
            Op::Update => format!("{}x{}x{} w{} state{}", self.batch, self.dim, self.seqlen, self.width, self.state_len),
            _ => format!("{}x{}x{} w{}", self.batch, self.dim, self.seqlen, self.width),
        }
    }
    fn layout(&self) -> &'static str {
        if self.cl {
            "cl"
        } else {
            "cf"
        }
    }
    fn elems(&self) -> usize {
        self.batch * self.dim * self.seqlen
    }
    fn state_elems(&self) -> usize {
        self.batch * self.dim * self.state_len
    }
    /// Bytes each call must move at least.
    fn traffic(&self) -> usize {
        let e = self.dt.size();
        match self.op {
            Op::Fwd => 2 * self.elems() * e,
            Op::Bwd => 3 * self.elems() * e,
            Op::Update => (2 * self.elems() + 2 * self.state_elems()) * e,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Timing {
    median_ms: f64,
    min_ms: f64,
    mean_ms: f64,
    warmup: usize,
    iters: usize,
    sets: usize,
    cold: bool,
}

fn seed_rows(out: &mut Vec<Row>) {
    for (tag, table) in [("000", &SEED_000[..]), ("003", &SEED_003[..])] {
        for sd in table {
            for op in [Op::Fwd, Op::Bwd] {
                for dt in [DType::F32, DType::F16, DType::BF16] {
                    for cl in [false, true] {
                        out.push(Row {
                            preset: "seeds",
                            name: format!("{tag}/{}", sd.name),
                            op,
                            dt,
                            cl,
                            silu: sd.silu,
                            bias: sd.bias,
                            batch: sd.batch,
                            dim: sd.dim,
                            seqlen: sd.seqlen,
                            width: SEED_WIDTH,
                            state_len: 0,
                        });
                    }
                }
            }
        }
    }
}

fn mamba_rows(out: &mut Vec<Row>) {
    let shapes = [
        ("mamba2-2.7b-train", 4, 5376, 4096),
        ("8x2048x1024", 8, 2048, 1024),
        ("4x256x4096", 4, 256, 4096),
        ("4x4096x512", 4, 4096, 512),
    ];
    // (name, shape, dtypes, SiLU, width): the four shapes at W=4 with SiLU, and for the big one
    // the rest of issue #4's targets: f16, no activation, widths 2-8.
    let (big, b0, d0, l0) = shapes[0];
    let mut cases: Vec<(String, (usize, usize, usize), Vec<DType>, bool, usize)> = Vec::new();
    for (name, b, d, l) in shapes {
        let dts = if name == big { vec![DType::F32, DType::F16, DType::BF16] } else { vec![DType::F32, DType::BF16] };
        cases.push((format!("mamba/{name}"), (b, d, l), dts, true, 4));
    }
    cases.push(("mamba/2.7b-train-noact".to_string(), (b0, d0, l0), vec![DType::F32, DType::F16, DType::BF16], false, 4));
    for w in [2, 3, 5, 6, 7, 8] {
        cases.push((format!("mamba/2.7b-train-w{w}"), (b0, d0, l0), vec![DType::F32, DType::BF16], true, w));
    }
    for (name, (batch, dim, seqlen), dts, silu, width) in cases {
        for op in [Op::Fwd, Op::Bwd] {
            for &dt in &dts {
                for cl in [false, true] {
                    out.push(Row {
                        preset: "mamba",
                        name: name.clone(),
                        op,
                        dt,
                        cl,
                        silu,
                        bias: true,
                        batch,
                        dim,
                        seqlen,
                        width,
                        state_len: 0,
                    });
                }
            }
        }
    }
}

/// `--shape BxDxL [--width W] [--act silu|none]`: one shape of the caller's instead of a preset,
/// forward, backward and the decode update (L new tokens a call, state_len W - 1 and W, as the
/// decode preset's 3 and 4 at W = 4), every dtype and both layouts (then filtered like a preset's
/// rows).
fn shape_rows(out: &mut Vec<Row>, shape: &str, width: usize, silu: bool) -> Result<(), Usage> {
    let bad = || Usage(format!("--shape {shape:?}: expected BxDxL, three positive integers (e.g. 8x2048x1024)"));
    let dims: Vec<usize> = shape.split('x').map(|v| v.trim().parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
    let [batch, dim, seqlen] = dims[..] else { return Err(bad()) };
    if batch == 0 || dim == 0 || seqlen == 0 {
        return Err(bad());
    }
    if !(1..=8).contains(&width) {
        return Err(Usage(format!("--width {width}: expected 1 to 8")));
    }
    for op in [Op::Fwd, Op::Bwd, Op::Update] {
        let state_lens: &[usize] = match op {
            Op::Update if width > 1 => &[width - 1, width],
            Op::Update => &[1],
            _ => &[0],
        };
        for &state_len in state_lens {
            for dt in [DType::F32, DType::F16, DType::BF16] {
                for cl in [false, true] {
                    let name = format!("shape/{batch}x{dim}x{seqlen}");
                    out.push(Row { preset: "shape", name, op, dt, cl, silu, bias: true, batch, dim, seqlen, width, state_len });
                }
            }
        }
    }
    Ok(())
}

fn decode_rows(out: &mut Vec<Row>) {
    for b in [1, 64, 256] {
        for sl in [3, 4] {
            for dt in [DType::F32, DType::BF16] {
                for cl in [false, true] {
                    out.push(Row {
                        preset: "decode",
                        name: format!("decode/B{b}-state{sl}"),
                        op: Op::Update,
                        dt,
                        cl,
                        silu: true,
                        bias: true,
                        batch: b,
                        dim: 5376,
                        seqlen: 1,
                        width: 4,
                        state_len: sl,
                    });
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers

/// One allocation: host memory (16-byte aligned) or device memory.
struct Buf {
    host: Vec<u128>,
    dev: *mut c_void,
    bytes: usize,
}

impl Buf {
    fn new(bytes: usize, gpu: bool) -> Result<Buf, String> {
        let bytes = bytes.max(16);
        if gpu {
            let mut p = std::ptr::null_mut();
            let st = unsafe { capi::ccv1d_malloc(&mut p, bytes) };
            if st != CCV1D_OK {
                return Err(format!("ccv1d_malloc({bytes}): {}: {}", status_str(st), last_error()));
            }
            Ok(Buf { host: Vec::new(), dev: p, bytes })
        } else {
            // Zero-filled: every page is touched before timing.
            Ok(Buf { host: vec![0u128; bytes.div_ceil(16)], dev: std::ptr::null_mut(), bytes })
        }
    }
    fn ptr(&self, offset: usize) -> *mut c_void {
        let base = if self.dev.is_null() { self.host.as_ptr() as *mut u8 } else { self.dev as *mut u8 };
        unsafe { base.add(offset) as *mut c_void }
    }
    /// `sets` copies of `per` bytes of random values of `dt` at stride `stride` bytes.
    fn fill(&mut self, dt: DType, per: usize, stride: usize, sets: usize, rng: &mut Rng) -> Result<(), String> {
        let n = per / dt.size();
        let mut one = vec![0u8; per];
        for i in 0..n {
            let v = rng.value();
            match dt {
                DType::F32 => one[4 * i..4 * i + 4].copy_from_slice(&(v as f32).to_le_bytes()),
                DType::F16 => one[2 * i..2 * i + 2].copy_from_slice(&half::f16::from_f64(v).to_bits().to_le_bytes()),
                DType::BF16 => one[2 * i..2 * i + 2].copy_from_slice(&half::bf16::from_f64(v).to_bits().to_le_bytes()),
            }
        }
        if self.dev.is_null() {
            let bytes = unsafe { std::slice::from_raw_parts_mut(self.host.as_mut_ptr() as *mut u8, self.bytes) };
            for s in 0..sets {
                bytes[s * stride..s * stride + per].copy_from_slice(&one);
            }
            return Ok(());
        }
        for s in 0..sets {
            let st = unsafe { capi::ccv1d_memcpy(self.ptr(s * stride), one.as_ptr() as *const c_void, per, std::ptr::null_mut()) };
            if st != CCV1D_OK {
                return Err(format!("ccv1d_memcpy: {}: {}", status_str(st), last_error()));
            }
        }
        sync()
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if !self.dev.is_null() {
            unsafe { capi::ccv1d_free(self.dev) };
        }
    }
}

fn sync() -> Result<(), String> {
    let st = unsafe { capi::ccv1d_synchronize(std::ptr::null_mut()) };
    if st != CCV1D_OK {
        return Err(format!("ccv1d_synchronize: {}: {}", status_str(st), last_error()));
    }
    Ok(())
}

fn status(st: i32, what: &str) -> Result<(), String> {
    if st != CCV1D_OK {
        return Err(format!("{what}: {}: {}", status_str(st), last_error()));
    }
    Ok(())
}

/// A slab of `sets` tensors of `per` bytes each (stride rounded up to 256 bytes).
struct Slab {
    buf: Buf,
    stride: usize,
}

impl Slab {
    fn new(per: usize, sets: usize, gpu: bool) -> Result<Slab, String> {
        let stride = per.max(1).next_multiple_of(256);
        Ok(Slab { buf: Buf::new(stride * sets, gpu)?, stride })
    }
    fn at(&self, set: usize) -> *mut c_void {
        self.buf.ptr(set * self.stride)
    }
}

fn t(data: *mut c_void, dt: DType, stride: [i64; 3]) -> ccv1d_tensor {
    ccv1d_tensor { data, dtype: dt.code(), stride }
}

/// x-like strides of `[b, d, l]`: channel-first or channel-last.
fn xs(d: usize, l: usize, cl: bool) -> [i64; 3] {
    let (d, l) = (d as i64, l as i64);
    if cl {
        [l * d, 1, d]
    } else {
        [d * l, l, 1]
    }
}

// ---------------------------------------------------------------------------------------------
// One row

/// Everything a row's calls need, and a function making the call on buffer set `s`.
struct Prepared {
    _bufs: Vec<Slab>,
    _small: Vec<Buf>,
    /// The call on buffer set `s`, ordered on `stream` (0 = the default stream; ignored on the CPU).
    call: Box<dyn Fn(usize, usize) -> i32>,
    sets: usize,
    cold: bool,
}

fn prepare(r: &Row, gpu: bool, rotation: usize) -> Result<Prepared, String> {
    let mut rng = Rng::new(0xbe9c ^ r.elems() as u64);
    let e = r.dt.size();
    let (b, d, l, w) = (r.batch, r.dim, r.seqlen, r.width);
    let xbytes = r.elems() * e;
    let sbytes = r.state_elems() * e;
    let per_set = match r.op {
        Op::Fwd => 2 * xbytes,
        Op::Bwd => 3 * xbytes,
        Op::Update => 2 * xbytes + sbytes,
    };
    let sets = rotation.div_ceil(per_set.max(1)).clamp(1, MAX_SETS);
    let cold = sets * per_set >= rotation;
    let mut weight = Buf::new(d * w * e, gpu)?;
    weight.fill(r.dt, d * w * e, 0, 1, &mut rng)?;
    let mut bias = Buf::new(d * e, gpu)?;
    bias.fill(r.dt, d * e, 0, 1, &mut rng)?;
    let wt = t(weight.ptr(0), r.dt, [w as i64, 1, 0]);
    let bt = if r.bias { t(bias.ptr(0), r.dt, [1, 0, 0]) } else { ccv1d_tensor::default() };
    let act = if r.silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE };
    let backend = if gpu { CCV1D_BACKEND_GPU } else { CCV1D_BACKEND_CPU };
    let (dt, cl) = (r.dt, r.cl);
    let stride = xs(d, l, cl);
    match r.op {
        Op::Fwd => {
            let mut x = Slab::new(xbytes, sets, gpu)?;
            let st = x.stride;
            x.buf.fill(dt, xbytes, st, sets, &mut rng)?;
            let out = Slab::new(xbytes, sets, gpu)?;
            let (xp, op) = (x.at(0) as usize, out.at(0) as usize);
            let (xs_, os_) = (x.stride, out.stride);
            let call = move |s: usize, stream: usize| {
                let p = ccv1d_fwd_params {
                    struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
                    backend,
                    activation: act,
                    batch: b as i64,
                    dim: d as i64,
                    seqlen: l as i64,
                    width: w as i64,
                    x: t((xp + s * xs_) as *mut c_void, dt, stride),
                    weight: wt,
                    bias: bt,
                    out: t((op + s * os_) as *mut c_void, dt, stride),
                    seq_idx: Default::default(),
                    initial_states: Default::default(),
                    final_states: Default::default(),
                    cu_seqlens: Default::default(),
                    state_indices: Default::default(),
                    has_initial_state: Default::default(),
                    num_seqs: 0,
                    num_state_slots: 0,
                };
                unsafe { capi::ccv1d_fwd(&p, stream as *mut c_void) }
            };
            Ok(Prepared { _bufs: vec![x, out], _small: vec![weight, bias], call: Box::new(call), sets, cold })
        }
        Op::Bwd => {
            let mut x = Slab::new(xbytes, sets, gpu)?;
            let st = x.stride;
            x.buf.fill(dt, xbytes, st, sets, &mut rng)?;
            let mut dout = Slab::new(xbytes, sets, gpu)?;
            let st = dout.stride;
            dout.buf.fill(dt, xbytes, st, sets, &mut rng)?;
            let dx = Slab::new(xbytes, sets, gpu)?;
            let dw = Buf::new(d * w * 4, gpu)?;
            let db = Buf::new(d * 4, gpu)?;
            let (xp, gp, dxp) = (x.at(0) as usize, dout.at(0) as usize, dx.at(0) as usize);
            let sstride = x.stride;
            let dwt = t(dw.ptr(0), DType::F32, [w as i64, 1, 0]);
            let dbt = if r.bias { t(db.ptr(0), DType::F32, [1, 0, 0]) } else { ccv1d_tensor::default() };
            let params = move |s: usize, ws: *mut c_void, ws_bytes: usize| ccv1d_bwd_params {
                struct_size: std::mem::size_of::<ccv1d_bwd_params>() as u32,
                backend,
                activation: act,
                batch: b as i64,
                dim: d as i64,
                seqlen: l as i64,
                width: w as i64,
                x: t((xp + s * sstride) as *mut c_void, dt, stride),
                weight: wt,
                bias: bt,
                seq_idx: Default::default(),
                initial_states: Default::default(),
                cu_seqlens: Default::default(),
                state_indices: Default::default(),
                has_initial_state: Default::default(),
                num_seqs: 0,
                num_state_slots: 0,
                dout: t((gp + s * sstride) as *mut c_void, dt, stride),
                dfinal_states: Default::default(),
                dx: t((dxp + s * sstride) as *mut c_void, dt, stride),
                dweight: dwt,
                dbias: dbt,
                dinitial_states: Default::default(),
                workspace: ws,
                workspace_size: ws_bytes,
                nondeterministic: 0,
            };
            // The caller's workspace (the size the library asks for), allocated once: timing
            // covers the kernels, not the library's pool.
            let mut ws_bytes = 0usize;
            status(unsafe { capi::ccv1d_bwd_workspace_size(&params(0, std::ptr::null_mut(), 0), &mut ws_bytes) }, "ccv1d_bwd_workspace_size")?;
            let ws = if ws_bytes > 0 { Some(Buf::new(ws_bytes, gpu)?) } else { None };
            let wsp = ws.as_ref().map_or(0, |b| b.ptr(0) as usize);
            let call = move |s: usize, stream: usize| {
                let p = params(s, wsp as *mut c_void, ws_bytes);
                unsafe { capi::ccv1d_bwd(&p, stream as *mut c_void) }
            };
            let mut small = vec![weight, bias, dw, db];
            small.extend(ws);
            Ok(Prepared { _bufs: vec![x, dout, dx], _small: small, call: Box::new(call), sets, cold })
        }
        Op::Update => {
            let sl = r.state_len;
            let mut x = Slab::new(xbytes, sets, gpu)?;
            let st = x.stride;
            x.buf.fill(dt, xbytes, st, sets, &mut rng)?;
            let out = Slab::new(xbytes, sets, gpu)?;
            let mut state = Slab::new(sbytes, sets, gpu)?;
            let st = state.stride;
            state.buf.fill(dt, sbytes, st, sets, &mut rng)?;
            let (xp, op, sp) = (x.at(0) as usize, out.at(0) as usize, state.at(0) as usize);
            let (xst, sst) = (x.stride, state.stride);
            let state_strides = xs(d, sl, cl);
            let call = move |s: usize, stream: usize| {
                let p = ccv1d_update_params {
                    struct_size: std::mem::size_of::<ccv1d_update_params>() as u32,
                    backend,
                    activation: act,
                    batch: b as i64,
                    dim: d as i64,
                    seqlen: l as i64,
                    width: w as i64,
                    state_len: sl as i64,
                    num_state_slots: 0,
                    x: t((xp + s * xst) as *mut c_void, dt, stride),
                    weight: wt,
                    bias: bt,
                    out: t((op + s * xst) as *mut c_void, dt, stride),
                    conv_state: t((sp + s * sst) as *mut c_void, dt, state_strides),
                    cache_seqlens: Default::default(),
                    conv_state_indices: Default::default(),
                };
                unsafe { capi::ccv1d_update(&p, stream as *mut c_void) }
            };
            Ok(Prepared { _bufs: vec![x, out, state], _small: vec![weight, bias], call: Box::new(call), sets, cold })
        }
    }
}

/// How GPU calls are timed.
enum Clock {
    Host,
    /// Events around each call (each call is its own host launch).
    Events(Events),
    /// The row's calls captured into a graph on a stream of its own; events around each replay.
    Graph(Events),
}

/// Calls per captured graph, at least (more when the row rotates over more buffer sets).
const GRAPH_CALLS: usize = 20;
/// The fewest timed replays of a row's graph (`--iters 1` or `2` included).
const MIN_REPLAYS: usize = 3;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn time_row(p: &Prepared, gpu: bool, clock: &Clock, mut warmup: usize, mut iters: usize, auto: bool) -> Result<Timing, String> {
    let call = |i: usize| status((p.call)(i % p.sets, 0), "call");
    // First call: checks the row works, and sizes the CPU's iterations.
    let t0 = Instant::now();
    call(0)?;
    if gpu {
        sync()?;
    }
    let first = t0.elapsed().as_secs_f64();
    if auto && !gpu && first > SLOW_CALL_S {
        warmup = warmup.min(2);
        iters = ((CPU_ROW_BUDGET_S / first) as usize).clamp(5, iters.max(5));
    }
    for i in 1..warmup {
        call(i)?;
    }
    if gpu {
        sync()?;
    }
    let base = warmup.max(1);
    let mut ms = Vec::with_capacity(iters);
    match (gpu, clock) {
        (false, _) => {
            for i in 0..iters {
                let t0 = Instant::now();
                call(base + i)?;
                ms.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        (true, Clock::Events(ev)) => {
            let n = iters.min(ev.len() / 2);
            for i in 0..n {
                ev.record(2 * i, 0).map_err(|e| e.msg)?;
                call(base + i)?;
                ev.record(2 * i + 1, 0).map_err(|e| e.msg)?;
            }
            for i in 0..n {
                ms.push(ev.elapsed_ms(2 * i, 2 * i + 1).map_err(|e| e.msg)? as f64);
            }
            iters = n;
        }
        (true, Clock::Graph(ev)) => {
            // One graph holds `n` calls (every buffer set at least once); each replay is timed.
            let n = p.sets.max(GRAPH_CALLS).min(MAX_SETS);
            let mut g = Graph::new().map_err(|e| e.msg)?;
            let sets = p.sets;
            g.capture(|stream| (0..n).try_for_each(|i| status((p.call)((base + i) % sets, stream), "call (captured)")))?;
            g.replay().map_err(|e| e.msg)?; // warm the graph itself
            g.synchronize().map_err(|e| e.msg)?;
            let replays = iters.div_ceil(n).clamp(MIN_REPLAYS, ev.len() / 2);
            for r in 0..replays {
                ev.record(2 * r, g.stream()).map_err(|e| e.msg)?;
                g.replay().map_err(|e| e.msg)?;
                ev.record(2 * r + 1, g.stream()).map_err(|e| e.msg)?;
            }
            for r in 0..replays {
                ms.push(ev.elapsed_ms(2 * r, 2 * r + 1).map_err(|e| e.msg)? as f64 / n as f64);
            }
            iters = replays * n;
        }
        (true, Clock::Host) => {
            // Batches of back-to-back calls, each ended by a synchronize.
            let batch = (iters / 10).max(1);
            let mut done = 0;
            while done < iters {
                let n = batch.min(iters - done);
                let t0 = Instant::now();
                for i in 0..n {
                    call(base + done + i)?;
                }
                sync()?;
                ms.push(t0.elapsed().as_secs_f64() * 1e3 / n as f64);
                done += n;
            }
        }
    }
    let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
    let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(Timing { median_ms: median(&mut ms), min_ms: min, mean_ms: mean, warmup: warmup.max(1), iters, sets: p.sets, cold: p.cold })
}

// ---------------------------------------------------------------------------------------------
// Copy reference

struct CopyRef {
    gbs: f64,
    what: String,
}

fn cpu_copy(llc: usize) -> CopyRef {
    let bytes = (4 * llc).max(256 * MIB);
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let threads = causal_conv1d::cpu::num_threads().max(1);
    let mut best1 = f64::INFINITY;
    let mut bestn = f64::INFINITY;
    for _ in 0..5 {
        let t0 = Instant::now();
        dst.copy_from_slice(&src);
        best1 = best1.min(t0.elapsed().as_secs_f64());
        std::hint::black_box(&dst);
        let chunk = bytes.div_ceil(threads);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for (d, sr) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                s.spawn(move || d.copy_from_slice(sr));
            }
        });
        bestn = bestn.min(t0.elapsed().as_secs_f64());
        std::hint::black_box(&dst);
    }
    let g1 = 2.0 * bytes as f64 / best1 / 1e9;
    let gn = 2.0 * bytes as f64 / bestn / 1e9;
    let (gbs, which) = if gn >= g1 { (gn, format!("{threads} threads")) } else { (g1, "1 thread".to_string()) };
    CopyRef {
        gbs,
        what: format!(
            "host memcpy of {} MiB (>= 4x the {} MiB LLC), best of 5: 1 thread {g1:.1} GB/s, {threads} threads {gn:.1} GB/s -> reference {gbs:.1} GB/s ({which}); read+write bytes",
            bytes / MIB,
            llc / MIB
        ),
    }
}

/// Best of `COPY_REPS` of a 1 GiB device-to-device copy, by the driver (`ccv1d_memcpy`) and by
/// the library's 16-byte-vector copy kernel; the faster one is the reference.
fn gpu_copy(clock: &Clock) -> Result<CopyRef, String> {
    const COPY_REPS: usize = 10;
    let bytes = 1usize << 30;
    let src = Buf::new(bytes, true)?;
    let dst = Buf::new(bytes, true)?;
    let (d, sr) = (dst.ptr(0) as usize, src.ptr(0) as usize);
    let memcpy = || status(unsafe { capi::ccv1d_memcpy(d as *mut c_void, sr as *const c_void, bytes, std::ptr::null_mut()) }, "ccv1d_memcpy");
    let kernel = || causal_conv1d::gpu::copy_kernel(d, sr, bytes, 0).map_err(|e| e.msg);
    let best = |copy: &dyn Fn() -> Result<(), String>| -> Result<f64, String> {
        copy()?;
        sync()?;
        let mut best = f64::INFINITY;
        for _ in 0..COPY_REPS {
            let secs = match clock {
                Clock::Events(ev) | Clock::Graph(ev) => {
                    ev.record(0, 0).map_err(|e| e.msg)?;
                    copy()?;
                    ev.record(1, 0).map_err(|e| e.msg)?;
                    ev.elapsed_ms(0, 1).map_err(|e| e.msg)? as f64 / 1e3
                }
                Clock::Host => {
                    let t0 = Instant::now();
                    copy()?;
                    sync()?;
                    t0.elapsed().as_secs_f64()
                }
            };
            best = best.min(secs);
        }
        Ok(2.0 * bytes as f64 / best / 1e9)
    };
    let by_driver = best(&memcpy)?;
    let (by_kernel, kernel_note) = match best(&kernel) {
        Ok(g) => (g, format!("{g:.1} GB/s")),
        Err(e) => (0.0, format!("failed: {e}")),
    };
    let gbs = by_driver.max(by_kernel);
    Ok(CopyRef {
        gbs,
        what: format!(
            "device-to-device copy of 1 GiB, best of {COPY_REPS}: ccv1d_memcpy {by_driver:.1} GB/s, 16-byte copy kernel {kernel_note} -> reference {gbs:.1} GB/s (read+write bytes)"
        ),
    })
}

/// GPU: median ms of a device copy of a row's traffic (half read, half written), by the driver
/// (`ccv1d_memcpy`) and by the library's 16-byte copy kernel, the faster; timed like the rows
/// (same rotation and clock). The cost of the same bytes in one plain launch, launch and tail
/// included: what a small row can be held against.
fn same_bytes_copy(traffic: usize, clock: &Clock, rotation: usize, warmup: usize, iters: usize) -> Result<f64, String> {
    let half = (traffic / 2).next_multiple_of(16).max(16);
    let sets = rotation.div_ceil(2 * half).clamp(1, MAX_SETS);
    let cold = 2 * half * sets >= rotation;
    let mut best = f64::INFINITY;
    for by_driver in [true, false] {
        let (src, dst) = (Slab::new(half, sets, true)?, Slab::new(half, sets, true)?);
        let (sp, dp, stride) = (src.at(0) as usize, dst.at(0) as usize, src.stride);
        let call = move |s: usize, stream: usize| {
            let (d, sr) = (dp + s * stride, sp + s * stride);
            if by_driver {
                unsafe { capi::ccv1d_memcpy(d as *mut c_void, sr as *const c_void, half, stream as *mut c_void) }
            } else {
                causal_conv1d::gpu::copy_kernel(d, sr, half, stream).map_or_else(|e| e.status, |()| CCV1D_OK)
            }
        };
        let p = Prepared { _bufs: vec![src, dst], _small: Vec::new(), call: Box::new(call), sets, cold };
        best = best.min(time_row(&p, true, clock, warmup, iters, false)?.median_ms);
    }
    Ok(best)
}

// ---------------------------------------------------------------------------------------------
// Output

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

struct Done {
    row: Row,
    res: Result<Timing, String>,
    /// GPU: `same_bytes_copy` of the row's traffic (ms).
    copy_ms: Option<f64>,
}

impl Done {
    fn gbs(&self) -> Option<f64> {
        self.res.as_ref().ok().map(|t| self.row.traffic() as f64 / (t.median_ms * 1e-3) / 1e9)
    }
}

/// One value of a bench record, as both writers need it.
enum Field {
    Text(String),
    /// A measurement: full precision in JSON, `decimals` in CSV; absent (JSON) / empty (CSV) when None.
    Num(Option<f64>, usize),
    Int(Option<usize>),
    Flag(bool),
}

/// The columns of one row, in order: the JSON keys and the CSV header are these names.
fn record(d: &Done, copy: f64) -> Vec<(&'static str, Field)> {
    use Field::*;
    let r = &d.row;
    let t = d.res.as_ref().ok();
    let g = d.gbs();
    let ms = |f: fn(&Timing) -> f64| Num(t.map(f), 6);
    let count = |f: fn(&Timing) -> usize| Int(t.map(f));
    vec![
        ("preset", Text(r.preset.into())),
        ("name", Text(r.name.clone())),
        ("op", Text(r.op.name().into())),
        ("dtype", Text(r.dt.name().into())),
        ("layout", Text(r.layout().into())),
        ("silu", Flag(r.silu)),
        ("bias", Flag(r.bias)),
        ("batch", Int(Some(r.batch))),
        ("dim", Int(Some(r.dim))),
        ("seqlen", Int(Some(r.seqlen))),
        ("width", Int(Some(r.width))),
        ("state_len", Int(Some(r.state_len))),
        ("traffic_bytes", Int(Some(r.traffic()))),
        ("median_ms", ms(|t| t.median_ms)),
        ("min_ms", ms(|t| t.min_ms)),
        ("mean_ms", ms(|t| t.mean_ms)),
        ("gbs", Num(g, 3)),
        ("pct_copy", Num(g.map(|g| 100.0 * g / copy), 2)),
        ("same_bytes_copy_ms", Num(d.copy_ms, 6)),
        ("warmup", count(|t| t.warmup)),
        ("iters", count(|t| t.iters)),
        ("sets", count(|t| t.sets)),
        ("cache", t.map_or(Int(None), |t| Text(if t.cold { "cold" } else { "warm" }.into()))),
        ("error", d.res.as_ref().err().map_or(Int(None), |e| Text(e.clone()))),
    ]
}

fn write_json(path: &str, head: &[(&str, String)], rows: &[Done], copy: f64) -> std::io::Result<()> {
    let mut s = String::from("{\n");
    for (k, v) in head {
        let _ = writeln!(s, "  {}: {},", json_str(k), json_str(v));
    }
    let _ = writeln!(s, "  \"copy_gbs\": {},\n  \"rows\": [", json_num(copy));
    for (i, d) in rows.iter().enumerate() {
        let fields: Vec<String> = record(d, copy)
            .into_iter()
            .filter_map(|(k, v)| {
                let v = match v {
                    Field::Text(t) => json_str(&t),
                    Field::Num(n, _) => json_num(n?),
                    Field::Int(n) => n?.to_string(),
                    Field::Flag(b) => b.to_string(),
                };
                Some(format!("{}: {v}", json_str(k)))
            })
            .collect();
        let _ = writeln!(s, "    {{{}}}{}", fields.join(", "), if i + 1 < rows.len() { "," } else { "" });
    }
    s.push_str("  ]\n}\n");
    std::fs::write(path, s)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn write_csv(path: &str, rows: &[Done], copy: f64) -> std::io::Result<()> {
    let mut s = String::new();
    for (i, d) in rows.iter().enumerate() {
        let rec = record(d, copy);
        if i == 0 {
            let names: Vec<&str> = rec.iter().map(|(k, _)| *k).collect();
            let _ = writeln!(s, "{}", names.join(","));
        }
        let cells: Vec<String> = rec
            .into_iter()
            .map(|(_, v)| match v {
                Field::Text(t) => csv_field(&t),
                Field::Num(n, dec) => n.map_or(String::new(), |n| format!("{n:.dec$}")),
                Field::Int(n) => n.map_or(String::new(), |n| n.to_string()),
                Field::Flag(b) => b.to_string(),
            })
            .collect();
        let _ = writeln!(s, "{}", cells.join(","));
    }
    std::fs::write(path, s)
}

/// One series per (op, dtype, layout) in row order: a colour per (op, dtype); a marker per
/// layout, bwd's differing from fwd's (cf circle / cl square; bwd cf diamond / cl triangle), so
/// shape alone tells fwd from bwd and cf from cl.
fn chart(rows: &[Done], copy: f64, title: Vec<String>) -> Chart {
    let mut series: Vec<Series> = Vec::new();
    let mut colours: Vec<(&str, &str)> = Vec::new();
    let mut skipped = 0;
    for d in rows {
        let r = &d.row;
        let Some(g) = d.gbs().filter(|g| g.is_finite()) else {
            skipped += 1;
            continue;
        };
        let point = (r.traffic() as f64, g);
        let label = format!("{} {} {}", r.op.name(), r.dt.name(), r.layout());
        if let Some(s) = series.iter_mut().find(|s| s.label == label) {
            s.points.push(point);
            continue;
        }
        let key = (r.op.name(), r.dt.name());
        let ci = colours.iter().position(|&k| k == key).unwrap_or_else(|| {
            colours.push(key);
            colours.len() - 1
        });
        let marker = match (r.op, r.cl) {
            (Op::Bwd, false) => Marker::Diamond,
            (Op::Bwd, true) => Marker::TriangleUp,
            (_, false) => Marker::Circle,
            (_, true) => Marker::Square,
        };
        series.push(Series { label, color: PALETTE[ci % PALETTE.len()], marker, points: vec![point] });
    }
    Chart { title, copy_gbs: copy, series, skipped }
}

fn table(rows: &[Done], copy: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<28} {:<6} {:<5} {:<3} {:<4} {:<22} {:>11} {:>10} {:>10} {:>9} {:>7} {:>6} {:>5} cache  SameCopy(ms)",
        "Configuration", "op", "dtype", "lay", "act", "shape", "Median(ms)", "Min(ms)", "Mean(ms)", "BW(GB/s)", "%copy", "iters", "sets"
    );
    let _ = writeln!(s, "{}", "-".repeat(166));
    for d in rows {
        let r = &d.row;
        let _ = write!(s, "{:<28} {:<6} {:<5} {:<3} {:<4} {:<22} ", r.name, r.op.name(), r.dt.name(), r.layout(), if r.silu { "silu" } else { "-" }, r.shape());
        match &d.res {
            Ok(t) => {
                let g = d.gbs().unwrap_or(f64::NAN);
                let _ = writeln!(
                    s,
                    "{:>11.4} {:>10.4} {:>10.4} {:>9.2} {:>6.1}% {:>6} {:>5} {}{}",
                    t.median_ms,
                    t.min_ms,
                    t.mean_ms,
                    g,
                    100.0 * g / copy,
                    t.iters,
                    t.sets,
                    if t.cold { "cold" } else { "warm" },
                    d.copy_ms.map_or(String::new(), |c| format!(" {c:>11.4}"))
                );
            }
            Err(e) => {
                let _ = writeln!(s, "ERROR: {e}");
            }
        }
    }
    s
}

// ---------------------------------------------------------------------------------------------

pub fn run(argv: &[String]) -> Result<i32, Usage> {
    let a = Args::parse(argv, &OPTIONS, &[])?;
    let backend = a.choice("backend", &["cpu", "gpu"])?.unwrap_or("cpu");
    let preset = a.choice("preset", &["seeds", "mamba", "decode", "all"])?.unwrap_or("seeds");
    let op = a.choice("op", &["fwd", "bwd", "update", "all"])?.unwrap_or("all");
    let dtype = a.choice("dtype", &["f32", "f16", "bf16"])?;
    let layout = a.choice("layout", &["cf", "cl"])?;
    let filter = a.get("filter").map(|s| s.to_lowercase());
    let warmup_arg = a.number("warmup")?;
    let iters_arg = a.number("iters")?;
    if iters_arg == Some(0) {
        return Err(Usage("--iters must be at least 1".into()));
    }
    let auto = warmup_arg.is_none() && iters_arg.is_none();
    let warmup = warmup_arg.unwrap_or(10);
    let iters = iters_arg.unwrap_or(100);
    let gpu = backend == "gpu";
    // Kernel tuning: time a kernel image built with other flags instead of the embedded one.
    if let Some(path) = a.get("image") {
        if let Err(e) = causal_conv1d::gpu::testing::set_image_file(path) {
            eprintln!("ccv1d bench --image: {e}");
            return Ok(1);
        }
    }

    let mut rows = Vec::new();
    if let Some(shape) = a.get("shape") {
        if a.get("preset").is_some() {
            return Err(Usage("--shape replaces --preset: give one of them".into()));
        }
        let silu = a.choice("act", &["silu", "none"])?.unwrap_or("silu") == "silu";
        shape_rows(&mut rows, shape, a.number("width")?.unwrap_or(4), silu)?;
    } else if a.get("width").is_some() || a.get("act").is_some() {
        return Err(Usage("--width and --act go with --shape".into()));
    } else {
        if matches!(preset, "seeds" | "all") {
            seed_rows(&mut rows);
        }
        if matches!(preset, "mamba" | "all") {
            mamba_rows(&mut rows);
        }
        if matches!(preset, "decode" | "all") {
            decode_rows(&mut rows);
        }
    }
    rows.retain(|r| {
        (op == "all" || r.op.name() == op)
            && dtype.map_or(true, |d| r.dt.name() == d)
            && layout.map_or(true, |l| r.layout() == l)
            && filter.as_ref().map_or(true, |f| r.name.to_lowercase().contains(f.as_str()))
    });
    if rows.is_empty() {
        eprintln!("ccv1d bench: no row matches the options");
        return Ok(2);
    }

    let threads = causal_conv1d::cpu::num_threads();
    let llc = crate::info::llc_bytes().unwrap_or(32 * MIB);
    let (clock, rotation, timing, device) = if gpu {
        let n = match crate::info::device_count() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("ccv1d bench --backend gpu: no usable GPU: {e}");
                return Ok(1);
            }
        };
        let dev = causal_conv1d::gpu::devices()
            .ok()
            .and_then(|v| v.into_iter().next())
            .map_or(format!("{n} GPU(s)"), |d| format!("{} {} (device 0 of {n})", d.api, d.name.unwrap_or_default()));
        let want = a.choice("timing", &["graph", "events", "host"])?.unwrap_or("graph");
        // at least MIN_REPLAYS pairs: a graph row replays that many times whatever --iters says
        let events = if want == "host" { None } else { Some(Events::new(2 * iters.max(MIN_REPLAYS))) };
        match events {
            Some(Ok(ev)) if want == "graph" && Graph::new().is_ok() => {
                let what = format!(
                    "{} graph replay: each row's calls (>= {GRAPH_CALLS}, every buffer set) captured on a stream, {} events around each replay, time per call = replay / calls (no host launch cost)",
                    ev.api(),
                    ev.api()
                );
                (Clock::Graph(ev), GPU_ROTATION, what, dev)
            }
            Some(Ok(ev)) => {
                let what = format!("{} events around each call (device time, per-call host launches)", ev.api());
                (Clock::Events(ev), GPU_ROTATION, what, dev)
            }
            Some(Err(e)) => (
                Clock::Host,
                GPU_ROTATION,
                format!("host clock over batches of back-to-back calls + ccv1d_synchronize (no device events: {})", e.msg),
                dev,
            ),
            None => (Clock::Host, GPU_ROTATION, "host clock over batches of back-to-back calls + ccv1d_synchronize".to_string(), dev),
        }
    } else {
        (Clock::Host, (2 * llc).max(64 * MIB), "host clock (std::time::Instant) around each call".to_string(), format!("CPU, {threads} backend threads"))
    };
    eprintln!("ccv1d bench: measuring the copy reference...");
    let copy = if gpu {
        match gpu_copy(&clock) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("ccv1d bench: copy reference failed: {e}");
                return Ok(1);
            }
        }
    } else {
        cpu_copy(llc)
    };

    let tty = std::io::stderr().is_terminal();
    let mut done = Vec::with_capacity(rows.len());
    let mut same_copy = std::collections::HashMap::new();
    let t_all = Instant::now();
    for (i, r) in rows.iter().enumerate() {
        let label = format!("[{}/{}] {} {} {} {} {}", i + 1, rows.len(), r.name, r.op.name(), r.dt.name(), r.layout(), r.shape());
        if tty {
            eprint!("\r\x1b[K{label}");
        } else {
            eprintln!("{label}");
        }
        let _ = std::io::stderr().flush();
        let res = prepare(r, gpu, rotation).and_then(|p| time_row(&p, gpu, &clock, warmup, iters, auto));
        let copy_ms = gpu.then(|| *same_copy.entry(r.traffic()).or_insert_with(|| same_bytes_copy(r.traffic(), &clock, rotation, warmup, iters).ok()));
        done.push(Done { row: r.clone(), res, copy_ms: copy_ms.flatten() });
    }
    if tty {
        eprintln!("\r\x1b[K[{}/{}] done in {:.1} s", rows.len(), rows.len(), t_all.elapsed().as_secs_f64());
    }

    let rot = if gpu {
        format!("rotation over buffer sets of >= {} MiB per row (> an H100/H200 L2 of 50/60 MB) where <= {MAX_SETS} sets allow; \"warm\" rows fit in it", rotation / MIB)
    } else {
        format!("rotation over buffer sets of >= {} MiB per row (2x LLC) where <= {MAX_SETS} sets allow; \"warm\" rows fit in the LLC", rotation / MIB)
    };
    let iters_note = if auto && !gpu {
        format!("warm-up {warmup} + {iters} timed calls; rows whose first call takes > {} ms: 2 + as many as fit in ~{CPU_ROW_BUDGET_S} s (>= 5)", SLOW_CALL_S * 1e3)
    } else {
        format!("warm-up {warmup} + {iters} timed calls")
    };
    let head = [
        ("backend", backend.to_string()),
        ("device", device.clone()),
        ("preset", preset.to_string()),
        ("timing", timing.clone()),
        ("copy_reference", copy.what.clone()),
        ("rotation", rot.clone()),
        ("iterations", iters_note.clone()),
        ("traffic", "fwd: x + out; bwd: x + dout + dx; update: x + conv_state read + conv_state write + out; BW from the median".to_string()),
        ("same_copy", if gpu { "SameCopy = a device copy of the row's traffic (half read, half written; ccv1d_memcpy or the 16-byte copy kernel, the faster), timed the same way" } else { "-" }.to_string()),
    ];
    let failures = done.iter().filter(|d| d.res.is_err()).count();
    if let Some(p) = a.get("json") {
        if let Err(e) = write_json(p, &head, &done, copy.gbs) {
            eprintln!("ccv1d bench: cannot write {p}: {e}");
            return Ok(1);
        }
    }
    if let Some(p) = a.get("csv") {
        if let Err(e) = write_csv(p, &done, copy.gbs) {
            eprintln!("ccv1d bench: cannot write {p}: {e}");
            return Ok(1);
        }
    }
    if let Some(p) = a.get("plot") {
        let title = vec![format!("ccv1d bench --backend {backend} --preset {preset}: achieved bandwidth"), device.clone(), format!("timing: {timing}")];
        if let Err(e) = crate::plot::write(p, &chart(&done, copy.gbs, title)) {
            eprintln!("ccv1d bench: cannot write {p}: {e}");
            return Ok(1);
        }
    }
    println!("PERFORMANCE SUMMARY  (ccv1d bench --backend {backend} --preset {preset})");
    for (k, v) in &head[1..] {
        println!("  {k:<15} {v}");
    }
    println!();
    print!("{}", table(&done, copy.gbs));
    if failures > 0 {
        println!("\n{failures} row(s) failed");
        return Ok(1);
    }
    Ok(0)
}
