//! Tests of the CPU backend against a naive f64 implementation of docs/semantics.md written here
//! (independent of src/oracle.rs). Plans are built directly; every output buffer is poisoned with
//! NaN first, bytes outside each output view must stay untouched, inputs must stay unchanged.

use half::{bf16, f16};

use super::simd::{self, Isa};
use super::{bwd, fwd, update, Cfg};
use crate::plan::*;

// ---------------------------------------------------------------------------------------------
// Random numbers

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn unif(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
}

// ---------------------------------------------------------------------------------------------
// Strided test tensors in a byte buffer

/// Memory layout of a test tensor: `order` lists dims innermost first; `pad[i]` extra elements
/// of extent added to dim i (so the view is a slice of a larger tensor); `step` the innermost
/// stride; `misalign` shifts the base address by one byte (unaligned element accesses).
#[derive(Clone, Copy, Debug)]
struct Lay {
    order: [usize; 3],
    pad: [usize; 3],
    step: i64,
    misalign: bool,
}

const CF: Lay = Lay { order: [2, 1, 0], pad: [0; 3], step: 1, misalign: false };
const CL: Lay = Lay { order: [1, 2, 0], pad: [0; 3], step: 1, misalign: false };
const CF_PAD: Lay = Lay { order: [2, 1, 0], pad: [3, 2, 1], step: 1, misalign: false };
const CL_PAD: Lay = Lay { order: [1, 2, 0], pad: [2, 3, 1], step: 1, misalign: false };
/// Channel-last with channel stride 2 (every other element), padded.
const CL_STEP2: Lay = Lay { order: [1, 2, 0], pad: [1, 1, 2], step: 2, misalign: false };
/// Batch innermost, then tokens, then channels.
const WEIRD: Lay = Lay { order: [0, 2, 1], pad: [1, 0, 2], step: 3, misalign: false };
const CF_MIS: Lay = Lay { order: [2, 1, 0], pad: [0, 1, 0], step: 1, misalign: true };
const CL_MIS: Lay = Lay { order: [1, 2, 0], pad: [1, 0, 0], step: 1, misalign: true };

const LAYS: [Lay; 8] = [CF, CL, CF_PAD, CL_PAD, CL_STEP2, WEIRD, CF_MIS, CL_MIS];

struct Tensor {
    buf: Vec<u8>,
    base: usize,
    dtype: DType,
    shape: [usize; 3],
    stride: [i64; 3],
}

fn nan_bits(dt: DType) -> Vec<u8> {
    match dt {
        DType::F32 => f32::NAN.to_le_bytes().to_vec(),
        DType::F16 => f16::NAN.to_bits().to_le_bytes().to_vec(),
        DType::BF16 => bf16::NAN.to_bits().to_le_bytes().to_vec(),
    }
}

fn quantize(dt: DType, v: f64) -> f64 {
    match dt {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
    }
}

impl Tensor {
    /// A tensor of `shape` (1 to 3 dims; missing dims are 1), poisoned with NaN.
    fn new(dtype: DType, shape: &[usize], lay: Lay) -> Tensor {
        let mut sh = [1usize; 3];
        sh[..shape.len()].copy_from_slice(shape);
        let nd = shape.len();
        let mut stride = [0i64; 3];
        let mut s = lay.step;
        for &dim in lay.order.iter().filter(|&&d| d < nd) {
            stride[dim] = s;
            s *= (sh[dim] + lay.pad[dim]) as i64;
        }
        let size = dtype.size();
        let base = 2 * size + lay.misalign as usize;
        let elems = s as usize + 3;
        let mut t = Tensor { buf: vec![0u8; base + elems * size], base, dtype, shape: sh, stride };
        t.poison();
        t
    }
    fn poison(&mut self) {
        let nan = nan_bits(self.dtype);
        let n = nan.len();
        for (i, b) in self.buf.iter_mut().enumerate() {
            *b = nan[(i + n - self.base % n) % n];
        }
    }
    fn view(&self) -> View {
        View { addr: self.buf.as_ptr() as usize + self.base, dtype: self.dtype, stride: self.stride }
    }
    fn byte_off(&self, i: usize, j: usize, k: usize) -> usize {
        let e = i as i64 * self.stride[0] + j as i64 * self.stride[1] + k as i64 * self.stride[2];
        self.base + e as usize * self.dtype.size()
    }
    fn get(&self, i: usize, j: usize, k: usize) -> f64 {
        let o = self.byte_off(i, j, k);
        let b = &self.buf[o..];
        match self.dtype {
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::F16 => f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
            DType::BF16 => bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        }
    }
    /// Store `v` rounded to the dtype; returns the stored value.
    fn set(&mut self, i: usize, j: usize, k: usize, v: f64) -> f64 {
        let o = self.byte_off(i, j, k);
        match self.dtype {
            DType::F32 => self.buf[o..o + 4].copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F16 => self.buf[o..o + 2].copy_from_slice(&f16::from_f64(v).to_bits().to_le_bytes()),
            DType::BF16 => self.buf[o..o + 2].copy_from_slice(&bf16::from_f64(v).to_bits().to_le_bytes()),
        }
        quantize(self.dtype, v)
    }
    fn fill_random(&mut self, rng: &mut Rng, scale: f64) {
        let [a, b, c] = self.shape;
        for i in 0..a {
            for j in 0..b {
                for k in 0..c {
                    self.set(i, j, k, scale * rng.unif());
                }
            }
        }
    }
    /// Bytes belonging to logical elements.
    fn covered(&self) -> Vec<bool> {
        let mut m = vec![false; self.buf.len()];
        let [a, b, c] = self.shape;
        for i in 0..a {
            for j in 0..b {
                for k in 0..c {
                    let o = self.byte_off(i, j, k);
                    m[o..o + self.dtype.size()].fill(true);
                }
            }
        }
        m
    }
}

/// Bytes outside the view must be as they were (no stray writes).
fn check_outside(name: &str, t: &Tensor, before: &[u8]) {
    let cov = t.covered();
    for (i, (a, b)) in t.buf.iter().zip(before).enumerate() {
        assert!(cov[i] || a == b, "{name}: byte {i} outside the view was written");
    }
}

struct Idx {
    buf: Vec<u8>,
    stride: [i64; 2],
    elem_bytes: u8,
}

impl Idx {
    /// A 1-D or 2-D (`[rows, cols]`) index tensor holding `vals` (row-major), with a random
    /// element step (non-contiguous views) and 4 or 1 bytes per element.
    fn new(vals: &[i32], cols: usize, elem_bytes: u8, rng: &mut Rng) -> Idx {
        let step = 1 + rng.below(2) as i64;
        let pad = rng.below(2) as i64;
        // 1-D (cols == 0): element i at i·step; 2-D: [r, c] at r·stride[0] + c·step.
        let stride = if cols == 0 { [step, 0] } else { [(cols as i64 + pad) * step, step] };
        let pos = |i: usize| -> usize {
            match i.checked_div(cols) {
                None => i * step as usize,
                Some(r) => (r as i64 * stride[0] + (i % cols) as i64 * stride[1]) as usize,
            }
        };
        let n = vals.len().max(1) * (step as usize) * 2 + 4 + pad as usize * vals.len();
        let mut buf = vec![0xA5u8; n * elem_bytes as usize];
        for (i, &v) in vals.iter().enumerate() {
            let o = pos(i) * elem_bytes as usize;
            if elem_bytes == 1 {
                buf[o] = v as u8;
            } else {
                buf[o..o + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        Idx { buf, stride, elem_bytes }
    }
    fn view(&self) -> IdxView {
        IdxView { addr: self.buf.as_ptr() as usize, stride: self.stride, elem_bytes: self.elem_bytes }
    }
}

fn tol(dt: DType) -> f64 {
    match dt {
        DType::F32 => 5e-5,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
    }
}

fn close(name: &str, got: f64, want: f64, dt: DType, ctx: &dyn Fn() -> String) {
    let ok = (got - want).abs() <= tol(dt) * (1.0 + want.abs());
    assert!(ok, "{name}: got {got}, want {want} ({})", ctx());
}

fn act_f(act: Act, z: f64) -> f64 {
    match act {
        Act::None => z,
        Act::Silu => z / (1.0 + (-z).exp()),
    }
}

fn dact_f(act: Act, z: f64) -> f64 {
    match act {
        Act::None => 1.0,
        Act::Silu => {
            let s = 1.0 / (1.0 + (-z).exp());
            s * (1.0 + z * (1.0 - s))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forward / backward cases

#[derive(Clone, Debug)]
struct Case {
    b: usize,
    d: usize,
    l: usize,
    w: usize,
    dt: DType,
    wdt: DType,
    bias: Option<DType>,
    act: Act,
    xl: Lay,
    ol: Lay,
    sl: Lay,
    seq: Option<Vec<i32>>,
    /// cu_seqlens (then b == 1 and l == cu.last()).
    cu: Option<Vec<i32>>,
    slots: Option<Vec<i32>>,
    has_init: Option<(Vec<i32>, u8)>,
    num_slots: usize,
    init: bool,
    fin: bool,
    alias: bool,
    dfin: bool,
    dinit: bool,
    dwdt: DType,
    dbdt: DType,
}

impl Case {
    fn new(b: usize, d: usize, l: usize, w: usize, dt: DType) -> Case {
        Case {
            b,
            d,
            l,
            w,
            dt,
            wdt: dt,
            bias: Some(dt),
            act: Act::None,
            xl: CF,
            ol: CF,
            sl: CF,
            seq: None,
            cu: None,
            slots: None,
            has_init: None,
            num_slots: b,
            init: false,
            fin: false,
            alias: false,
            dfin: false,
            dinit: false,
            dwdt: DType::F32,
            dbdt: DType::F32,
        }
    }
    /// Initial and final states in, their gradients out (every state path of the call).
    fn all_states(&mut self) {
        self.init = true;
        self.fin = true;
        self.dfin = true;
        self.dinit = true;
    }
    fn nseq(&self) -> usize {
        match &self.cu {
            Some(cu) => cu.len() - 1,
            None => self.b,
        }
    }
    /// (row, t0, len, slot, has_init) per sequence.
    fn units(&self) -> Vec<(usize, usize, usize, i64, bool)> {
        (0..self.nseq())
            .map(|i| {
                let (row, t0, len) = match &self.cu {
                    Some(cu) => (0, cu[i] as usize, (cu[i + 1] - cu[i]) as usize),
                    None => (i, 0, self.l),
                };
                let slot = self.slots.as_ref().map_or(i as i64, |s| s[i] as i64);
                let h = self.has_init.as_ref().map_or(true, |(h, _)| h[i] != 0);
                (row, t0, len, slot, h)
            })
            .collect()
    }
}

/// Everything a case needs, built from a seed (so several configs see the same inputs).
struct Built {
    x: Tensor,
    w: Tensor,
    bias: Option<Tensor>,
    init: Option<Tensor>,
    dout: Tensor,
    dfin: Option<Tensor>,
    seq: Option<Idx>,
    cu: Option<Idx>,
    slots: Option<Idx>,
    has_init: Option<Idx>,
}

fn build(c: &Case, seed: u64) -> Built {
    let mut rng = Rng(seed);
    let k = c.w - 1;
    let mut x = Tensor::new(c.dt, &[c.b, c.d, c.l], c.xl);
    x.fill_random(&mut rng, 1.0);
    let wl = if rng.coin() { Lay { order: [0, 1, 2], ..CF_PAD } } else { CF_PAD };
    let mut w = Tensor::new(c.wdt, &[c.d, c.w], wl);
    w.fill_random(&mut rng, 0.6);
    let bias = c.bias.map(|bd| {
        let mut t = Tensor::new(bd, &[c.d], Lay { step: 2, ..CF });
        t.fill_random(&mut rng, 0.5);
        t
    });
    let init = c.init.then(|| {
        let mut t = Tensor::new(c.dt, &[c.num_slots, c.d, k], c.sl);
        t.fill_random(&mut rng, 1.0);
        t
    });
    let mut dout = Tensor::new(c.dt, &[c.b, c.d, c.l], c.ol);
    dout.fill_random(&mut rng, 1.0);
    let dfin = c.dfin.then(|| {
        let mut t = Tensor::new(c.dt, &[c.num_slots, c.d, k], c.sl);
        t.fill_random(&mut rng, 1.0);
        t
    });
    let seq = c.seq.as_ref().map(|s| Idx::new(s, c.l, 4, &mut rng));
    let cu = c.cu.as_ref().map(|s| Idx::new(s, 0, 4, &mut rng));
    let slots = c.slots.as_ref().map(|s| Idx::new(s, 0, 4, &mut rng));
    let has_init = c.has_init.as_ref().map(|(s, eb)| Idx::new(s, 0, *eb, &mut rng));
    Built { x, w, bias, init, dout, dfin, seq, cu, slots, has_init }
}

fn inputs(c: &Case, bt: &Built) -> ConvInputs {
    ConvInputs {
        backend: Backend::Cpu,
        stream: 0,
        batch: c.b as i64,
        dim: c.d as i64,
        seqlen: c.l as i64,
        width: c.w as i64,
        act: c.act,
        x: bt.x.view(),
        weight: bt.w.view(),
        bias: bt.bias.as_ref().map(|t| t.view()),
        seq_idx: bt.seq.as_ref().map(|t| t.view()),
        initial_states: bt.init.as_ref().map(|t| t.view()),
        seqs: match (&c.cu, &bt.cu) {
            (Some(cu), Some(t)) => Seqs::Packed { cu_seqlens: t.view(), num_seqs: cu.len() as i64 - 1 },
            _ => Seqs::Rows,
        },
        pool: StatePool {
            state_indices: bt.slots.as_ref().map(|t| t.view()),
            has_initial_state: bt.has_init.as_ref().map(|t| t.view()),
            num_slots: c.num_slots as i64,
        },
    }
}

/// The naive f64 reference, straight from docs/semantics.md.
struct Ref {
    out: Vec<f64>,
    /// `[slot][d][j]`, None where no sequence writes.
    fin: Vec<Option<f64>>,
    dx: Vec<f64>,
    dinit: Vec<Option<f64>>,
    dw: Vec<f64>,
    db: Vec<f64>,
}

fn reference(c: &Case, bt: &Built) -> Ref {
    let (b, d_, l, w_) = (c.b, c.d, c.l, c.w);
    let k = w_ - 1;
    let mut r = Ref {
        out: vec![0.0; b * d_ * l],
        fin: vec![None; c.num_slots * d_ * k],
        dx: vec![0.0; b * d_ * l],
        dinit: vec![None; c.num_slots * d_ * k],
        dw: vec![0.0; d_ * w_],
        db: vec![0.0; d_],
    };
    for (row, t0, len, slot, has) in c.units() {
        if slot < 0 {
            continue; // outputs and dx stay 0, nothing else
        }
        let slot = slot as usize;
        let li = len as i64;
        let ki = k as i64;
        for d in 0..d_ {
            let xe = |t: i64| -> f64 {
                if t >= 0 {
                    bt.x.get(row, d, t0 + t as usize)
                } else if has && c.init {
                    bt.init.as_ref().unwrap().get(slot, d, (t + ki) as usize)
                } else {
                    0.0
                }
            };
            let id = |t: i64| -> i64 {
                match &c.seq {
                    Some(s) => s[row * l + t.max(0) as usize] as i64,
                    None => 0,
                }
            };
            let wv = |kk: usize| bt.w.get(d, kk, 0);
            let bias = bt.bias.as_ref().map_or(0.0, |t| t.get(d, 0, 0));
            let pre = |t: i64| -> f64 {
                let mut s = bias;
                for kk in 0..w_ {
                    let p = t - ki + kk as i64;
                    if id(p) == id(t) {
                        s += wv(kk) * xe(p);
                    }
                }
                s
            };
            for t in 0..li {
                let o = if id(t) < 0 { 0.0 } else { act_f(c.act, pre(t)) };
                r.out[(row * d_ + d) * l + t0 + t as usize] = o;
            }
            let fin_cond = |p: i64| len == 0 || c.seq.is_none() || (id(li - 1) >= 0 && id(p) == id(li - 1));
            for j in 0..k {
                let p = li - ki + j as i64;
                r.fin[(slot * d_ + d) * k + j] = Some(if fin_cond(p) { xe(p) } else { 0.0 });
            }
            let g = |t: i64| -> f64 {
                if id(t) < 0 {
                    0.0
                } else {
                    bt.dout.get(row, d, t0 + t as usize) * dact_f(c.act, pre(t))
                }
            };
            for p in -ki..li {
                let mut v = 0.0;
                for kk in 0..w_ {
                    let q = p + ki - kk as i64;
                    if q >= 0 && q < li && id(q) == id(p) {
                        v += wv(kk) * g(q);
                    }
                }
                if let Some(df) = &bt.dfin {
                    if p >= li - ki && fin_cond(p) {
                        v += df.get(slot, d, (p - (li - ki)) as usize);
                    }
                }
                if p >= 0 {
                    r.dx[(row * d_ + d) * l + t0 + p as usize] = v;
                } else {
                    r.dinit[(slot * d_ + d) * k + (p + ki) as usize] = Some(if has { v } else { 0.0 });
                }
            }
            for t in 0..li {
                let gt = g(t);
                for kk in 0..w_ {
                    let p = t - ki + kk as i64;
                    if id(p) == id(t) {
                        r.dw[d * w_ + kk] += gt * xe(p);
                    }
                }
                r.db[d] += gt;
            }
        }
    }
    r
}

fn cfgs() -> Vec<Cfg> {
    vec![
        Cfg::new(1),
        Cfg { threads: 2, chunk: 5, tile: 3, block: 5, ..Cfg::new(2) },
        Cfg { threads: 3, chunk: 8, tile: 1, block: 8, ..Cfg::new(3) },
        // The narrower instantiations of the kernels (when this CPU has wider ones).
        Cfg { threads: 2, chunk: 7, tile: 5, block: 16, isa: Isa::Baseline },
        Cfg { threads: 1, chunk: 9, tile: 2, block: 24, isa: Isa::Avx2.min(simd::best()) },
    ]
}

/// Run forward and backward of `c` under every config and check everything.
fn check_case(c: &Case, seed: u64) {
    let ctx = || format!("case {c:?} seed {seed}");
    let k = c.w - 1;
    for cfg in cfgs() {
        let ctx = || format!("{} cfg {cfg:?}", ctx());
        // ---- forward
        let mut bt = build(c, seed);
        let rf = reference(c, &bt);
        let out = Tensor::new(c.dt, &[c.b, c.d, c.l], c.ol);
        let fin_t = (c.fin && !c.alias).then(|| Tensor::new(c.dt, &[c.num_slots, c.d, k], c.sl));
        let x_before = bt.x.buf.clone();
        let init_before = bt.init.as_ref().map(|t| t.buf.clone());
        let (out_before, fin_before) = (out.buf.clone(), fin_t.as_ref().map(|t| t.buf.clone()));
        let final_view = if c.alias { bt.init.as_ref().map(|t| t.view()) } else { fin_t.as_ref().map(|t| t.view()) };
        let plan = FwdPlan { inp: inputs(c, &bt), out: out.view(), final_states: if c.fin { final_view } else { None } };
        fwd::run(&plan, &cfg).unwrap();
        assert_eq!(bt.x.buf, x_before, "x modified ({})", ctx());
        check_outside("out", &out, &out_before);
        for i in 0..c.b {
            for d in 0..c.d {
                for t in 0..c.l {
                    close("out", out.get(i, d, t), rf.out[(i * c.d + d) * c.l + t], c.dt, &|| format!("[{i},{d},{t}] {}", ctx()));
                }
            }
        }
        if c.fin {
            let (ft, before) = if c.alias {
                (bt.init.as_ref().unwrap(), init_before.as_ref().unwrap())
            } else {
                (fin_t.as_ref().unwrap(), fin_before.as_ref().unwrap())
            };
            check_outside("final_states", ft, before);
            let orig = c.alias.then(|| Tensor { buf: before.clone(), base: ft.base, dtype: ft.dtype, shape: ft.shape, stride: ft.stride });
            for s in 0..c.num_slots {
                for d in 0..c.d {
                    for j in 0..k {
                        let got = ft.get(s, d, j);
                        let ctx2 = || format!("final [{s},{d},{j}] {}", ctx());
                        match rf.fin[(s * c.d + d) * k + j] {
                            Some(v) => close("final", got, v, c.dt, &ctx2),
                            None => match &orig {
                                Some(o) => assert_eq!(got.to_bits(), o.get(s, d, j).to_bits(), "{}", ctx2()),
                                None => assert!(got.is_nan(), "unreferenced final slot written: {}", ctx2()),
                            },
                        }
                    }
                }
            }
        }
        // ---- backward
        let dx = Tensor::new(c.dt, &[c.b, c.d, c.l], c.ol);
        let dwl = if seed % 2 == 0 { CF } else { Lay { order: [0, 1, 2], ..CF_PAD } };
        let dw = Tensor::new(c.dwdt, &[c.d, c.w], dwl);
        let db = c.bias.map(|_| Tensor::new(c.dbdt, &[c.d], Lay { step: 3, ..CF }));
        let dinit = (c.dinit && c.init).then(|| Tensor::new(c.dt, &[c.num_slots, c.d, k], c.sl));
        let befores = (dx.buf.clone(), dw.buf.clone(), db.as_ref().map(|t| t.buf.clone()), dinit.as_ref().map(|t| t.buf.clone()));
        let dout_before = bt.dout.buf.clone();
        // Fresh inputs for bwd (initial_states may have been overwritten by an aliased forward).
        bt = build(c, seed);
        let plan = BwdPlan {
            inp: inputs(c, &bt),
            dout: bt.dout.view(),
            dfinal_states: bt.dfin.as_ref().map(|t| t.view()),
            dx: dx.view(),
            dweight: dw.view(),
            dbias: db.as_ref().map(|t| t.view()),
            dinitial_states: dinit.as_ref().map(|t| t.view()),
            workspace: None,
            deterministic: true,
        };
        bwd::run(&plan, &cfg).unwrap();
        assert_eq!(bt.dout.buf, dout_before, "dout modified ({})", ctx());
        check_outside("dx", &dx, &befores.0);
        check_outside("dweight", &dw, &befores.1);
        for i in 0..c.b {
            for d in 0..c.d {
                for t in 0..c.l {
                    close("dx", dx.get(i, d, t), rf.dx[(i * c.d + d) * c.l + t], c.dt, &|| format!("[{i},{d},{t}] {}", ctx()));
                }
            }
        }
        for d in 0..c.d {
            for kk in 0..c.w {
                close("dweight", dw.get(d, kk, 0), rf.dw[d * c.w + kk], c.dwdt, &|| format!("[{d},{kk}] {}", ctx()));
            }
        }
        if let Some(db) = &db {
            check_outside("dbias", db, befores.2.as_ref().unwrap());
            for d in 0..c.d {
                close("dbias", db.get(d, 0, 0), rf.db[d], c.dbdt, &|| format!("[{d}] {}", ctx()));
            }
        }
        if let Some(di) = &dinit {
            check_outside("dinitial", di, befores.3.as_ref().unwrap());
            for s in 0..c.num_slots {
                for d in 0..c.d {
                    for j in 0..k {
                        let got = di.get(s, d, j);
                        let ctx2 = || format!("dinitial [{s},{d},{j}] {}", ctx());
                        match rf.dinit[(s * c.d + d) * k + j] {
                            Some(v) => close("dinitial", got, v, c.dt, &ctx2),
                            None => assert!(got.is_nan(), "unreferenced dinitial slot written: {}", ctx2()),
                        }
                    }
                }
            }
        }
    }
}

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// seq_idx row of length l: runs of ids, padding (-1) runs, an id that comes back after another.
fn random_seq(rng: &mut Rng, l: usize) -> Vec<i32> {
    let mut v = Vec::with_capacity(l);
    let mut id = rng.below(2) as i32;
    while v.len() < l {
        let run = 1 + rng.below(6);
        let cur = match rng.below(5) {
            0 => -1,
            1 if id > 0 => id - 1, // an earlier id again (equality, not runs)
            _ => {
                id += 1;
                id
            }
        };
        for _ in 0..run.min(l - v.len()) {
            v.push(cur);
        }
    }
    v
}

fn random_case(rng: &mut Rng, w: usize, dt: DType, lay: Lay) -> Case {
    let mut c = Case::new(1 + rng.below(3), 1 + rng.below(19), rng.below(40), w, dt);
    c.xl = lay;
    c.ol = rng.pick(&LAYS);
    c.sl = rng.pick(&LAYS);
    c.wdt = rng.pick(&DTYPES);
    c.bias = if rng.coin() { Some(rng.pick(&DTYPES)) } else { None };
    c.act = if rng.coin() { Act::Silu } else { Act::None };
    c.dwdt = if rng.coin() { DType::F32 } else { c.wdt };
    c.dbdt = if rng.coin() { DType::F32 } else { c.bias.unwrap_or(DType::F32) };
    c.num_slots = c.b;
    c
}

#[test]
fn fwd_bwd_widths_dtypes_layouts() {
    let mut rng = Rng(1);
    for w in 1..=8 {
        for dt in DTYPES {
            for lay in LAYS {
                let c = random_case(&mut rng, w, dt, lay);
                check_case(&c, rng.next());
            }
        }
    }
}

#[test]
fn fwd_bwd_long_rows_and_wide_blocks() {
    // Longer rows than the default chunk and more channels than the default block.
    let mut rng = Rng(2);
    for (w, lay) in [(4, CF), (4, CL), (3, CL_PAD), (8, CF_PAD)] {
        let mut c = Case::new(2, 300, 2100, w, DType::F32);
        c.xl = lay;
        c.ol = lay;
        c.act = Act::Silu;
        c.all_states();
        let seed = rng.next();
        // Only the default config (the small ones would be slow here); threads 1 and 2.
        for cfg in [Cfg::new(1), Cfg::new(2)] {
            let bt = build(&c, seed);
            let rf = reference(&c, &bt);
            let out = Tensor::new(c.dt, &[c.b, c.d, c.l], c.ol);
            let fin = Tensor::new(c.dt, &[c.b, c.d, w - 1], c.sl);
            let plan = FwdPlan { inp: inputs(&c, &bt), out: out.view(), final_states: Some(fin.view()) };
            fwd::run(&plan, &cfg).unwrap();
            for i in 0..c.b {
                for d in 0..c.d {
                    for t in (0..c.l).step_by(7) {
                        close("out", out.get(i, d, t), rf.out[(i * c.d + d) * c.l + t], c.dt, &|| format!("{c:?}"));
                    }
                }
            }
            let dx = Tensor::new(c.dt, &[c.b, c.d, c.l], c.ol);
            let dw = Tensor::new(DType::F32, &[c.d, w], CF);
            let plan = BwdPlan {
                inp: inputs(&c, &bt),
                dout: bt.dout.view(),
                dfinal_states: bt.dfin.as_ref().map(|t| t.view()),
                dx: dx.view(),
                dweight: dw.view(),
                dbias: None,
                dinitial_states: None,
                workspace: None,
                deterministic: true,
            };
            bwd::run(&plan, &cfg).unwrap();
            for i in 0..c.b {
                for d in 0..c.d {
                    for t in (0..c.l).step_by(5) {
                        close("dx", dx.get(i, d, t), rf.dx[(i * c.d + d) * c.l + t], c.dt, &|| format!("{c:?}"));
                    }
                }
            }
            for d in 0..c.d {
                for kk in 0..w {
                    close("dweight", dw.get(d, kk, 0), rf.dw[d * w + kk], DType::F32, &|| format!("{c:?}"));
                }
            }
        }
    }
}

#[test]
fn seq_idx_with_padding() {
    let mut rng = Rng(3);
    for w in 1..=8 {
        for dt in DTYPES {
            for lay in [CF, CL, CF_PAD, CL_STEP2, WEIRD] {
                let mut c = random_case(&mut rng, w, dt, lay);
                c.l = 1 + rng.below(40);
                c.seq = Some((0..c.b).flat_map(|_| random_seq(&mut rng, c.l)).collect());
                c.init = rng.coin();
                c.fin = rng.coin();
                c.dfin = rng.coin();
                c.dinit = rng.coin();
                check_case(&c, rng.next());
            }
        }
    }
}

#[test]
fn states_short_and_empty_rows() {
    let mut rng = Rng(4);
    for w in 1..=8 {
        let k: usize = w - 1;
        let lens = [0, 1, k.saturating_sub(1), k, k + 1, 17];
        for l in lens {
            for alias in [false, true] {
                for &seq in &[false, true] {
                    let dt = rng.pick(&DTYPES);
                    let lay = rng.pick(&LAYS);
                    let mut c = random_case(&mut rng, w, dt, lay);
                    c.l = l;
                    c.all_states();
                    c.alias = alias;
                    c.sl = rng.pick(&LAYS);
                    if seq && l > 0 {
                        c.seq = Some((0..c.b).flat_map(|_| random_seq(&mut rng, l)).collect());
                    }
                    check_case(&c, rng.next());
                }
            }
        }
    }
}

#[test]
fn states_without_initial() {
    // final_states and dfinal_states without initial_states (zeros before the start).
    let mut rng = Rng(5);
    for w in [1, 2, 4, 7] {
        for l in [0, 2, 9] {
            let lay = rng.pick(&LAYS);
            let mut c = random_case(&mut rng, w, DType::F32, lay);
            c.l = l;
            c.fin = true;
            c.dfin = true;
            check_case(&c, rng.next());
        }
    }
}

/// Random distinct slots (with some -1 = skip) for n sequences out of `num_slots`.
fn random_slots(rng: &mut Rng, n: usize, num_slots: usize) -> Vec<i32> {
    let mut all: Vec<i32> = (0..num_slots as i32).collect();
    for i in (1..all.len()).rev() {
        let j = rng.below(i + 1);
        all.swap(i, j);
    }
    (0..n).map(|i| if rng.below(4) == 0 { -1 } else { all[i] }).collect()
}

#[test]
fn varlen_packed() {
    let mut rng = Rng(6);
    for w in 1..=8 {
        for dt in DTYPES {
            for lay in [CF, CL, CL_PAD, CF_MIS] {
                let n = 1 + rng.below(5);
                let mut cu = vec![0i32];
                for _ in 0..n {
                    let len = match rng.below(4) {
                        0 => 0,
                        1 => rng.below(w),
                        _ => rng.below(20),
                    };
                    cu.push(cu.last().unwrap() + len as i32);
                }
                let mut c = random_case(&mut rng, w, dt, lay);
                c.b = 1;
                c.l = *cu.last().unwrap() as usize;
                c.cu = Some(cu);
                c.num_slots = n + rng.below(3);
                c.slots = rng.coin().then(|| random_slots(&mut rng, n, c.num_slots));
                if c.slots.is_none() {
                    c.num_slots = c.num_slots.max(n);
                }
                c.has_init = rng.coin().then(|| {
                    let eb = if rng.coin() { 4 } else { 1 };
                    ((0..n).map(|_| rng.below(2) as i32 * (1 + rng.below(3) as i32)).collect(), eb)
                });
                c.init = rng.below(4) != 0;
                c.fin = rng.below(4) != 0;
                c.alias = c.init && c.fin && rng.coin();
                c.dfin = rng.coin();
                c.dinit = rng.coin();
                check_case(&c, rng.next());
            }
        }
    }
}

#[test]
fn rows_with_state_pool() {
    let mut rng = Rng(7);
    for w in 1..=8 {
        for lay in [CF, CL, WEIRD] {
            let dt = rng.pick(&DTYPES);
            let mut c = random_case(&mut rng, w, dt, lay);
            c.b = 1 + rng.below(4);
            c.num_slots = c.b + rng.below(3);
            c.slots = Some(random_slots(&mut rng, c.b, c.num_slots));
            c.has_init = rng.coin().then(|| ((0..c.b).map(|_| rng.below(2) as i32).collect(), if rng.coin() { 4 } else { 1 }));
            c.all_states();
            c.alias = rng.coin();
            if rng.coin() && c.l > 0 {
                c.seq = Some((0..c.b).flat_map(|_| random_seq(&mut rng, c.l)).collect());
            }
            check_case(&c, rng.next());
        }
    }
}

#[test]
fn empty_shapes() {
    // B = 0 (dweight must still be written: zeros), D = 0, and packed with no sequences.
    let mut c = Case::new(0, 3, 5, 4, DType::F32);
    c.num_slots = 0;
    check_case(&c, 11);
    let c = Case::new(2, 0, 5, 4, DType::F32);
    check_case(&c, 12);
    let mut c = Case::new(1, 3, 0, 3, DType::F32);
    c.cu = Some(vec![0]);
    c.num_slots = 2;
    check_case(&c, 13);
}

/// dweight/dbias bitwise identical for any thread count, both paths, with and without seq_idx.
#[test]
fn dweight_deterministic_across_threads() {
    let mut rng = Rng(8);
    for (lay, seq, packed) in [(CF, false, false), (CL, false, false), (CF, true, false), (CL, true, false), (CL, false, true), (CF, false, true)] {
        let mut c = Case::new(3, 70, 333, 4, DType::BF16);
        c.xl = lay;
        c.act = Act::Silu;
        c.dbdt = DType::F32;
        if seq {
            c.seq = Some((0..c.b).flat_map(|_| random_seq(&mut rng, c.l)).collect());
        }
        if packed {
            c.b = 1;
            c.cu = Some(vec![0, 100, 101, 250, 333]);
            c.num_slots = 4;
        }
        let bt = build(&c, 99);
        let mut results = Vec::new();
        for threads in [1, 2, 3, 4] {
            let dx = Tensor::new(c.dt, &[c.b, c.d, c.l], c.ol);
            let dw = Tensor::new(DType::F32, &[c.d, c.w], CF);
            let db = Tensor::new(DType::F32, &[c.d], CF);
            let plan = BwdPlan {
                inp: inputs(&c, &bt),
                dout: bt.dout.view(),
                dfinal_states: None,
                dx: dx.view(),
                dweight: dw.view(),
                dbias: Some(db.view()),
                dinitial_states: None,
                workspace: None,
                deterministic: true,
            };
            bwd::run(&plan, &Cfg::new(threads)).unwrap();
            results.push((dw.buf.clone(), db.buf.clone(), dx.buf.clone()));
        }
        for r in &results[1..] {
            assert!(r.0 == results[0].0, "dweight differs across thread counts ({lay:?} seq {seq})");
            assert!(r.1 == results[0].1, "dbias differs across thread counts ({lay:?} seq {seq})");
            assert!(r.2 == results[0].2, "dx differs across thread counts ({lay:?} seq {seq})");
        }
    }
}

/// The wider instantiations (AVX2, AVX-512) give bitwise the same out, dx, dweight, dbias and
/// states as the baseline one (same operations in the same order), for every width, both
/// layouts, SiLU, seq_idx and states.
#[test]
fn wide_isa_matches_baseline() {
    if simd::best() == Isa::Baseline {
        let msg = "wide_isa_matches_baseline: this CPU has no AVX2 (or CCV1D_CPU_ISA=baseline): nothing to compare";
        assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{msg}");
        eprintln!("SKIPPED {msg}");
        return;
    }
    let mut rng = Rng(21);
    for w in 1..=8 {
        for (lay, seq) in [(CF, false), (CL, false), (CF, true), (CL, true), (CL_STEP2, false)] {
            let mut c = Case::new(2, 37, 150, w, DType::F32);
            c.xl = lay;
            c.ol = lay;
            c.act = Act::Silu;
            c.all_states();
            if seq {
                c.seq = Some((0..c.b).flat_map(|_| random_seq(&mut rng, c.l)).collect());
            }
            let bt = build(&c, rng.next());
            let k = w - 1;
            let mut results = Vec::new();
            let isas = [Isa::Baseline, Isa::Avx2, Isa::Avx512].into_iter().filter(|&i| i <= simd::best());
            for isa in isas {
                let cfg = Cfg { isa, ..Cfg::new(2) };
                let out = Tensor::new(c.dt, &[c.b, c.d, c.l], c.ol);
                let fin = Tensor::new(c.dt, &[c.num_slots, c.d, k], c.sl);
                let plan = FwdPlan { inp: inputs(&c, &bt), out: out.view(), final_states: Some(fin.view()) };
                fwd::run(&plan, &cfg).unwrap();
                let dx = Tensor::new(c.dt, &[c.b, c.d, c.l], c.ol);
                let dw = Tensor::new(DType::F32, &[c.d, c.w], CF);
                let db = Tensor::new(DType::F32, &[c.d], CF);
                let dinit = Tensor::new(c.dt, &[c.num_slots, c.d, k], c.sl);
                let plan = BwdPlan {
                    inp: inputs(&c, &bt),
                    dout: bt.dout.view(),
                    dfinal_states: bt.dfin.as_ref().map(|t| t.view()),
                    dx: dx.view(),
                    dweight: dw.view(),
                    dbias: Some(db.view()),
                    dinitial_states: Some(dinit.view()),
                    workspace: None,
                    deterministic: true,
                };
                bwd::run(&plan, &cfg).unwrap();
                results.push([out.buf, fin.buf, dx.buf, dw.buf, db.buf, dinit.buf]);
            }
            for (i, r) in results.iter().enumerate().skip(1) {
                for (name, (a, b)) in ["out", "final_states", "dx", "dweight", "dbias", "dinitial_states"].iter().zip(results[0].iter().zip(r)) {
                    assert!(a == b, "{name} differs between the baseline kernels and ISA #{i} (w {w} {lay:?} seq {seq})");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Update

#[derive(Clone, Debug)]
struct UCase {
    b: usize,
    d: usize,
    s: usize,
    w: usize,
    state_len: usize,
    num_slots: usize,
    dt: DType,
    wdt: DType,
    bias: Option<DType>,
    act: Act,
    xl: Lay,
    stl: Lay,
    cache: Option<Vec<i32>>,
    idx: Option<Vec<i32>>,
    inplace: bool,
}

fn check_update(c: &UCase, seed: u64) {
    let k = c.w - 1;
    let sl = c.state_len;
    for cfg in cfgs() {
        let ctx = || format!("{c:?} seed {seed} cfg {cfg:?}");
        let mut rng = Rng(seed);
        let mut x = Tensor::new(c.dt, &[c.b, c.d, c.s], c.xl);
        x.fill_random(&mut rng, 1.0);
        let mut w = Tensor::new(c.wdt, &[c.d, c.w], CF_PAD);
        w.fill_random(&mut rng, 0.6);
        let bias = c.bias.map(|bd| {
            let mut t = Tensor::new(bd, &[c.d], CF);
            t.fill_random(&mut rng, 0.5);
            t
        });
        let mut st = Tensor::new(c.dt, &[c.num_slots, c.d, sl], c.stl);
        st.fill_random(&mut rng, 1.0);
        let cache = c.cache.as_ref().map(|v| Idx::new(v, 0, 4, &mut rng));
        let idx = c.idx.as_ref().map(|v| Idx::new(v, 0, 4, &mut rng));
        let out_t = (!c.inplace).then(|| Tensor::new(c.dt, &[c.b, c.d, c.s], c.xl));

        // Reference.
        let mut rout = vec![0.0; c.b * c.d * c.s];
        let mut rst: Vec<f64> = Vec::new();
        for s in 0..c.num_slots {
            for d in 0..c.d {
                for j in 0..sl {
                    rst.push(st.get(s, d, j));
                }
            }
        }
        for b in 0..c.b {
            let slot = c.idx.as_ref().map_or(b as i64, |v| v[b] as i64);
            if slot < 0 {
                continue;
            }
            let slot = slot as usize;
            for d in 0..c.d {
                let state: Vec<f64> = (0..sl).map(|j| st.get(slot, d, j)).collect();
                let xs: Vec<f64> = (0..c.s).map(|t| x.get(b, d, t)).collect();
                let bv = bias.as_ref().map_or(0.0, |t| t.get(d, 0, 0));
                let wv: Vec<f64> = (0..c.w).map(|kk| w.get(d, kk, 0)).collect();
                let new_state: Vec<f64>;
                match &c.cache {
                    None => {
                        let win: Vec<f64> = state.iter().chain(xs.iter()).copied().collect();
                        for s in 0..c.s {
                            let mut a = bv;
                            for kk in 0..c.w {
                                a += wv[kk] * win[sl + s - k + kk];
                            }
                            rout[(b * c.d + d) * c.s + s] = act_f(c.act, a);
                        }
                        new_state = win[c.s..].to_vec();
                    }
                    Some(cs) => {
                        let cc = cs[b] as i64;
                        let prev: Vec<f64> =
                            (0..k).map(|j| state[(cc - k as i64 + j as i64).rem_euclid(sl as i64) as usize]).collect();
                        let cat: Vec<f64> = prev.iter().chain(xs.iter()).copied().collect();
                        for s in 0..c.s {
                            let mut a = bv;
                            for kk in 0..c.w {
                                a += wv[kk] * cat[s + kk];
                            }
                            rout[(b * c.d + d) * c.s + s] = act_f(c.act, a);
                        }
                        let mut ns = state.clone();
                        if sl > 0 {
                            for s in 0..c.s {
                                ns[(cc + s as i64).rem_euclid(sl as i64) as usize] = xs[s];
                            }
                        }
                        new_state = ns;
                    }
                }
                for j in 0..sl {
                    rst[(slot * c.d + d) * sl + j] = new_state[j];
                }
            }
        }

        let before_out = out_t.as_ref().map(|t| t.buf.clone());
        let before_st = st.buf.clone();
        let plan = UpdatePlan {
            backend: Backend::Cpu,
            stream: 0,
            batch: c.b as i64,
            dim: c.d as i64,
            seqlen: c.s as i64,
            width: c.w as i64,
            state_len: sl as i64,
            num_slots: c.num_slots as i64,
            act: c.act,
            x: x.view(),
            weight: w.view(),
            bias: bias.as_ref().map(|t| t.view()),
            out: out_t.as_ref().map_or(x.view(), |t| t.view()),
            conv_state: st.view(),
            cache_seqlens: cache.as_ref().map(|t| t.view()),
            conv_state_indices: idx.as_ref().map(|t| t.view()),
        };
        update::run(&plan, &cfg).unwrap();
        let out = out_t.as_ref().unwrap_or(&x);
        if let Some(bo) = &before_out {
            check_outside("update out", out, bo);
        }
        check_outside("conv_state", &st, &before_st);
        for b in 0..c.b {
            for d in 0..c.d {
                for s in 0..c.s {
                    close("update out", out.get(b, d, s), rout[(b * c.d + d) * c.s + s], c.dt, &|| format!("[{b},{d},{s}] {}", ctx()));
                }
            }
        }
        for s in 0..c.num_slots {
            for d in 0..c.d {
                for j in 0..sl {
                    // States are copies of inputs: exact.
                    let want = rst[(s * c.d + d) * sl + j];
                    assert_eq!(st.get(s, d, j), want, "conv_state [{s},{d},{j}] {}", ctx());
                }
            }
        }
    }
}

#[test]
fn update_all_variants() {
    let mut rng = Rng(9);
    for w in 1..=8 {
        for dt in DTYPES {
            for variant in 0..6 {
                let k = w - 1;
                let b = 1 + rng.below(4);
                let num_slots = b + rng.below(3);
                let state_len = k + rng.below(4);
                let s = 1 + rng.below(if variant % 2 == 0 { 2 } else { 7 });
                let c = UCase {
                    b,
                    d: 1 + rng.below(12),
                    s,
                    w,
                    state_len,
                    num_slots,
                    dt,
                    wdt: rng.pick(&DTYPES),
                    bias: rng.coin().then(|| rng.pick(&DTYPES)),
                    act: if rng.coin() { Act::Silu } else { Act::None },
                    xl: rng.pick(&LAYS),
                    stl: rng.pick(&LAYS),
                    cache: (variant >= 2).then(|| (0..b).map(|_| rng.below(3 * state_len + 3) as i32 - 2).collect()),
                    idx: (variant % 3 != 0).then(|| random_slots(&mut rng, b, num_slots)),
                    inplace: rng.coin(),
                };
                check_update(&c, rng.next());
            }
        }
    }
}

#[test]
fn fast_exp_accuracy() {
    let mut x = -86.0f32;
    let mut worst = 0f64;
    while x < 88.0 {
        let got = super::math::exp_f32(x) as f64;
        let want = (x as f64).exp();
        worst = worst.max(((got - want) / want).abs());
        x += 0.0137;
    }
    assert!(worst < 4e-7, "fast exp relative error {worst}");
    // Saturation outside the range: finite, and sigmoid / silu behave.
    for z in [-1e30f32, -200.0, -87.0, 87.0, 200.0, 1e30] {
        let s = super::math::sigmoid(z) as f64;
        let want = 1.0 / (1.0 + (-(z as f64)).exp());
        assert!((s - want).abs() < 1e-7, "sigmoid({z}) = {s}, want {want}");
        assert!(super::math::silu(z).is_finite() && super::math::dsilu(z).is_finite());
    }
    // The saturation docs/semantics.md defines, equal to the oracle's (bit for bit at the ends).
    use crate::oracle::{silu as silu64, silu_grad};
    for z in [f32::NEG_INFINITY, -f32::MAX, -1e4, -89.0, -88.5, 88.5, 89.0, 1e4, f32::MAX, f32::INFINITY] {
        let (s, d) = (super::math::silu(z), super::math::dsilu(z));
        let (ws, wd) = (silu64(z as f64) as f32, silu_grad(z as f64) as f32);
        let close = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a - b).abs() <= 1e-6 * b.abs().max(1e-30);
        assert!(close(s, ws), "silu({z}) = {s:e}, oracle {ws:e}");
        assert!(close(d, wd), "dsilu({z}) = {d:e}, oracle {wd:e}");
    }
    assert!(super::math::silu(f32::NAN).is_nan() && super::math::dsilu(f32::NAN).is_nan());
}

// ---------------------------------------------------------------------------------------------
// Throughput (not a pass/fail test): cargo test --release --lib cpu::tests::bench -- --ignored --nocapture

#[test]
#[ignore]
fn bench_throughput() {
    use std::time::Instant;
    // CCV1D_BENCH_SHAPE=B,D,L,W overrides the default 8×2048×1024, width 4.
    let shape: Vec<usize> = std::env::var("CCV1D_BENCH_SHAPE")
        .ok()
        .map(|s| s.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| v.len() == 4)
        .unwrap_or(vec![8, 2048, 1024, 4]);
    let (b, d, l, w) = (shape[0], shape[1], shape[2], shape[3]);
    let n = b * d * l;
    let bytes = n * 4;
    let threads = super::pool::num_threads();
    // CCV1D_BENCH_ONLY=cf|cl[-silu] and CCV1D_BENCH_OP=fwd|bwd narrow the run (for profiling;
    // memcpy is then skipped); CCV1D_BENCH_REPS repetitions (best time kept).
    let only = std::env::var("CCV1D_BENCH_ONLY").unwrap_or_default();
    let op = std::env::var("CCV1D_BENCH_OP").unwrap_or_default();
    let reps: usize = std::env::var("CCV1D_BENCH_REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
    // CPU time of the process (all threads, exited ones included): on a shared machine it leaves
    // out the time the threads waited for a core, which wall-clock time does not.
    let cpu_now = || -> f64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid timespec to write into.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    };
    let cpu_best = std::cell::Cell::new(f64::MAX);
    let best = |f: &mut dyn FnMut()| -> f64 {
        f();
        let mut t = f64::MAX;
        let mut c = f64::MAX;
        for _ in 0..reps {
            let (s, sc) = (Instant::now(), cpu_now());
            f();
            c = c.min(cpu_now() - sc);
            t = t.min(s.elapsed().as_secs_f64());
        }
        cpu_best.set(c);
        t
    };
    let src = vec![1.0f32; n];
    let mut dst = vec![0.0f32; n];
    let best_m = |f: &mut dyn FnMut()| -> f64 { if op.is_empty() { best(f) } else { 1.0 } };
    let t1 = best_m(&mut || {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    });
    let memcpy1 = 2.0 * bytes as f64 / t1 / 1e9;
    let mut dst2 = vec![0.0f32; n];
    let t2 = best_m(&mut || {
        std::thread::scope(|sc| {
            let half = n / 2;
            let (a, bb) = dst2.split_at_mut(half);
            let (sa, sb) = src.split_at(half);
            sc.spawn(|| a.copy_from_slice(std::hint::black_box(sa)));
            bb.copy_from_slice(std::hint::black_box(sb));
        });
        std::hint::black_box(&mut dst2);
    });
    let memcpy2 = 2.0 * bytes as f64 / t2 / 1e9;
    let memcpy = memcpy1.max(memcpy2);
    println!("memcpy {} MiB: 1 thread {memcpy1:.2} GB/s, 2 threads {memcpy2:.2} GB/s (read+write)", bytes >> 20);
    for (name, lay) in [("channel-first", CF), ("channel-last", CL)] {
        for act in [Act::None, Act::Silu] {
            let tag = format!("{}{}", if name == "channel-first" { "cf" } else { "cl" }, if act == Act::Silu { "-silu" } else { "" });
            if !only.is_empty() && only != tag {
                continue;
            }
            let mut rng = Rng(5);
            let mut x = Tensor::new(DType::F32, &[b, d, l], lay);
            let mut dout = Tensor::new(DType::F32, &[b, d, l], lay);
            // fill quickly: raw bytes of small floats
            for (i, ch) in x.buf.chunks_exact_mut(4).enumerate() {
                ch.copy_from_slice(&(((i * 7919) % 1000) as f32 * 1e-3 - 0.5).to_le_bytes());
            }
            dout.buf.copy_from_slice(&x.buf);
            let mut wt = Tensor::new(DType::F32, &[d, w], CF);
            wt.fill_random(&mut rng, 0.5);
            let out = Tensor::new(DType::F32, &[b, d, l], lay);
            let dx = Tensor::new(DType::F32, &[b, d, l], lay);
            let dw = Tensor::new(DType::F32, &[d, w], CF);
            let inp = ConvInputs {
                backend: Backend::Cpu,
                stream: 0,
                batch: b as i64,
                dim: d as i64,
                seqlen: l as i64,
                width: w as i64,
                act,
                x: x.view(),
                weight: wt.view(),
                bias: None,
                seq_idx: None,
                initial_states: None,
                seqs: Seqs::Rows,
                pool: StatePool { state_indices: None, has_initial_state: None, num_slots: b as i64 },
            };
            let fp = FwdPlan { inp, out: out.view(), final_states: None };
            let bp = BwdPlan {
                inp,
                dout: dout.view(),
                dfinal_states: None,
                dx: dx.view(),
                dweight: dw.view(),
                dbias: None,
                dinitial_states: None,
                workspace: None,
                deterministic: true,
            };
            // The production configuration, unless CCV1D_BENCH_TILE / _BLOCK / _CHUNK override it.
            let mut cfg = Cfg::new(threads);
            let env = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<usize>().ok());
            cfg.tile = env("CCV1D_BENCH_TILE").unwrap_or(cfg.tile);
            cfg.block = env("CCV1D_BENCH_BLOCK").unwrap_or(cfg.block);
            cfg.chunk = env("CCV1D_BENCH_CHUNK").unwrap_or(cfg.chunk);
            let tf = if op != "bwd" { best(&mut || fwd::run(&fp, &cfg).unwrap()) } else { f64::NAN };
            let cf = if op != "bwd" { cpu_best.get() } else { f64::NAN };
            let tb = if op != "fwd" { best(&mut || bwd::run(&bp, &cfg).unwrap()) } else { f64::NAN };
            let cb = if op != "fwd" { cpu_best.get() } else { f64::NAN };
            let gf = 2.0 * bytes as f64 / tf / 1e9;
            let gb = 3.0 * bytes as f64 / tb / 1e9;
            println!(
                "{name:14} act {act:?}: fwd {:.2} ms {gf:.2} GB/s ({:.0}% of memcpy) | bwd {:.2} ms {gb:.2} GB/s ({:.0}%)  [threads {threads}] cpu ms: fwd {:.2} bwd {:.2}",
                tf * 1e3,
                100.0 * gf / memcpy,
                tb * 1e3,
                100.0 * gb / memcpy,
                cf * 1e3,
                cb * 1e3
            );
        }
    }
}

#[test]
#[ignore]
fn bench_silu() {
    let mut v: Vec<f32> = (0..2048).map(|i| (i as f32 - 1024.0) * 0.01).collect();
    let s = std::time::Instant::now();
    for _ in 0..8192 {
        super::math::apply_act(Act::Silu, std::hint::black_box(&mut v));
        for x in v.iter_mut() {
            *x = x.min(4.0);
        }
    }
    let ns = s.elapsed().as_secs_f64() * 1e9 / (2048.0 * 8192.0);
    println!("silu: {ns:.3} ns/elem (incl. a min pass)");
}
