//! Case builders: one forward / backward / update configuration, its tensors, the call through the
//! C ABI, and the comparison of every output with the f64 oracle.

use super::check::*;
use super::rng::Rng;
use super::tensor::*;
use super::{backend_code, expect_ok};
use crate::capi;
use crate::oracle::{self, ConvProblem, Tol, UpdateProblem};
use crate::params::*;
use crate::plan::DType;


/// One forward/backward configuration. Everything random about a case lives here (plus the
/// tensor values, drawn from the same RNG), so the seed reproduces it.
#[derive(Clone, Debug)]
pub struct ConvCfg {
    pub batch: usize,
    pub dim: usize,
    pub seqlen: usize,
    pub width: usize,
    pub silu: bool,
    pub xdt: DType,
    pub wdt: DType,
    /// Bias dtype; None = no bias.
    pub bias: Option<DType>,
    pub seq_idx: Option<Vec<i32>>,
    pub cu_seqlens: Option<Vec<i32>>,
    pub state_indices: Option<Vec<i32>>,
    /// Raw has_initial_state values (nonzero = true) and their dtype (I32 or Bool).
    pub has_init: Option<(Vec<i32>, Dt)>,
    /// Pool size (the oracle's) and the `num_state_slots` field (0 = as many as sequences).
    pub slots: usize,
    pub num_state_slots: i64,
    pub initial: bool,
    pub fin: bool,
    /// final_states is the same memory as initial_states.
    pub alias: bool,
    // Backward only.
    pub dfinal: bool,
    pub dinit: bool,
    pub dw_dt: DType,
    /// dbias dtype; None = not requested.
    pub dbias: Option<DType>,
    pub nondet: bool,
    pub lay: ConvLayouts,
}

#[derive(Clone, Debug)]
pub struct ConvLayouts {
    pub x: Layout,
    pub out: Layout,
    pub w: Layout,
    pub b: Layout,
    pub seq: Layout,
    pub idx: Layout,
    pub init: Layout,
    pub fin: Layout,
    pub dout: Layout,
    pub dx: Layout,
    pub dfin: Layout,
    pub dinit: Layout,
    pub dw: Layout,
    pub db: Layout,
}

impl ConvLayouts {
    /// Every tensor in the same kind (x-like tensors) or dense (the small ones).
    pub fn uniform(kind: Kind, rng: &mut Rng) -> ConvLayouts {
        ConvLayouts {
            x: Layout::of(kind, rng, 3),
            out: Layout::of(kind, rng, 3),
            w: Layout::cf(2),
            b: Layout::cf(1),
            seq: Layout::cf(2),
            idx: Layout::cf(1),
            init: Layout::of(kind, rng, 3),
            fin: Layout::of(kind, rng, 3),
            dout: Layout::of(kind, rng, 3),
            dx: Layout::of(kind, rng, 3),
            dfin: Layout::of(kind, rng, 3),
            dinit: Layout::of(kind, rng, 3),
            dw: Layout::cf(2),
            db: Layout::cf(1),
        }
    }
    /// x in `kind`; every other tensor the same kind or, sometimes, any layout.
    pub fn random(kind: Kind, rng: &mut Rng) -> ConvLayouts {
        let pick3 = |rng: &mut Rng| if rng.chance(0.6) { Layout::of(kind, rng, 3) } else { Layout::random(rng, 3) };
        let x = Layout::of(kind, rng, 3);
        let out = pick3(rng);
        let init = pick3(rng);
        let fin = pick3(rng);
        let dout = pick3(rng);
        let dx = pick3(rng);
        let dfin = pick3(rng);
        let dinit = pick3(rng);
        ConvLayouts {
            x,
            out,
            w: Layout::random(rng, 2),
            b: Layout::random(rng, 1),
            seq: Layout::random(rng, 2),
            idx: Layout::random(rng, 1),
            init,
            fin,
            dout,
            dx,
            dfin,
            dinit,
            dw: Layout::random(rng, 2),
            db: Layout::random(rng, 1),
        }
    }
}

impl ConvCfg {
    /// A plain configuration: no optional feature, every tensor dense in `kind`.
    pub fn plain(batch: usize, dim: usize, seqlen: usize, width: usize, xdt: DType, kind: Kind, rng: &mut Rng) -> ConvCfg {
        ConvCfg {
            batch,
            dim,
            seqlen,
            width,
            silu: false,
            xdt,
            wdt: xdt,
            bias: Some(xdt),
            seq_idx: None,
            cu_seqlens: None,
            state_indices: None,
            has_init: None,
            slots: batch,
            num_state_slots: 0,
            initial: false,
            fin: false,
            alias: false,
            dfinal: false,
            dinit: false,
            dw_dt: DType::F32,
            dbias: Some(DType::F32),
            nondet: false,
            lay: ConvLayouts::uniform(kind, rng),
        }
    }
    pub fn num_seqs(&self) -> usize {
        self.cu_seqlens.as_ref().map_or(self.batch, |c| c.len() - 1)
    }
    pub fn k(&self) -> usize {
        self.width - 1
    }
    /// Tokens summed into dweight/dbias.
    pub fn tokens(&self) -> usize {
        self.batch * self.seqlen
    }
}

/// The tensors of a forward/backward case.
pub struct ConvTensors {
    pub x: Tensor,
    pub w: Tensor,
    pub b: Option<Tensor>,
    pub seq: Option<Tensor>,
    pub cu: Option<Tensor>,
    pub si: Option<Tensor>,
    pub hi: Option<Tensor>,
    pub init: Option<Tensor>,
    // Forward outputs.
    pub out: Option<Tensor>,
    pub fin: Option<Tensor>,
    // Backward.
    pub dout: Option<Tensor>,
    pub dfin: Option<Tensor>,
    pub dx: Option<Tensor>,
    pub dw: Option<Tensor>,
    pub db: Option<Tensor>,
    pub dinit: Option<Tensor>,
}

impl ConvTensors {
    pub fn build(c: &ConvCfg, rng: &mut Rng, bwd: bool) -> ConvTensors {
        let (b, d, l, w, k) = (c.batch, c.dim, c.seqlen, c.width, c.k());
        let xs = [b, d, l];
        let ss = [c.slots, d, k];
        let n = c.num_seqs();
        let x = Tensor::new(c.xdt.into(), &xs, &c.lay.x);
        x.fill_random(rng, 1.0);
        let wt = Tensor::new(c.wdt.into(), &[d, w], &c.lay.w);
        wt.fill_random(rng, 1.0);
        let bt = c.bias.map(|bd| {
            let t = Tensor::new(bd.into(), &[d], &c.lay.b);
            t.fill_random(rng, 0.5);
            t
        });
        let seq = c.seq_idx.as_ref().map(|v| {
            let t = Tensor::new(Dt::I32, &[b, l], &c.lay.seq);
            t.set_i32(v);
            t
        });
        let cu = c.cu_seqlens.as_ref().map(|v| {
            let t = Tensor::new(Dt::I32, &[n + 1], &c.lay.idx);
            t.set_i32(v);
            t
        });
        let si = c.state_indices.as_ref().map(|v| {
            let t = Tensor::new(Dt::I32, &[n], &c.lay.idx);
            t.set_i32(v);
            t
        });
        let hi = c.has_init.as_ref().map(|(v, dt)| {
            let t = Tensor::new(*dt, &[n], &c.lay.idx);
            t.set_i32(v);
            t
        });
        let init = c.initial.then(|| {
            let t = Tensor::new(c.xdt.into(), &ss, &c.lay.init);
            t.fill_random(rng, 1.0);
            t
        });
        let mut t = ConvTensors {
            x,
            w: wt,
            b: bt,
            seq,
            cu,
            si,
            hi,
            init,
            out: None,
            fin: None,
            dout: None,
            dfin: None,
            dx: None,
            dw: None,
            db: None,
            dinit: None,
        };
        if !bwd {
            let out = Tensor::new(c.xdt.into(), &xs, &c.lay.out);
            out.poison();
            t.out = Some(out);
            if c.fin {
                t.fin = Some(if c.alias {
                    t.init.as_ref().expect("alias needs initial").clone()
                } else {
                    let f = Tensor::new(c.xdt.into(), &ss, &c.lay.fin);
                    f.poison();
                    f
                });
            }
        } else {
            let dout = Tensor::new(c.xdt.into(), &xs, &c.lay.dout);
            dout.fill_random(rng, 1.0);
            t.dout = Some(dout);
            t.dfin = c.dfinal.then(|| {
                let f = Tensor::new(c.xdt.into(), &ss, &c.lay.dfin);
                f.fill_random(rng, 1.0);
                f
            });
            let dx = Tensor::new(c.xdt.into(), &xs, &c.lay.dx);
            dx.poison();
            t.dx = Some(dx);
            let dw = Tensor::new(c.dw_dt.into(), &[d, w], &c.lay.dw);
            dw.poison();
            t.dw = Some(dw);
            t.db = c.dbias.map(|dt| {
                let x = Tensor::new(dt.into(), &[d], &c.lay.db);
                x.poison();
                x
            });
            t.dinit = c.dinit.then(|| {
                let x = Tensor::new(c.xdt.into(), &ss, &c.lay.dinit);
                x.poison();
                x
            });
        }
        t
    }

    /// Inputs (never written by the call), by name.
    pub fn inputs(&self, c: &ConvCfg) -> Vec<(&'static str, &Tensor)> {
        let mut v = vec![("x", &self.x), ("weight", &self.w)];
        let opt = [
            ("bias", &self.b),
            ("seq_idx", &self.seq),
            ("cu_seqlens", &self.cu),
            ("state_indices", &self.si),
            ("has_initial_state", &self.hi),
            ("dout", &self.dout),
            ("dfinal_states", &self.dfin),
        ];
        for (n, t) in opt {
            if let Some(t) = t {
                v.push((n, t));
            }
        }
        if let Some(t) = &self.init {
            if !(c.alias && self.fin.is_some()) {
                v.push(("initial_states", t));
            }
        }
        v
    }
    pub fn outputs(&self) -> Vec<(&'static str, &Tensor)> {
        let opt = [
            ("out", &self.out),
            ("final_states", &self.fin),
            ("dx", &self.dx),
            ("dweight", &self.dw),
            ("dbias", &self.db),
            ("dinitial_states", &self.dinit),
        ];
        opt.into_iter().filter_map(|(n, t)| t.as_ref().map(|t| (n, t))).collect()
    }
    pub fn all(&self, c: &ConvCfg) -> Vec<(&'static str, &Tensor)> {
        let mut v = self.inputs(c);
        v.extend(self.outputs());
        v
    }
    pub fn upload(&self, c: &ConvCfg) {
        self.all(c).iter().for_each(|(_, t)| t.upload());
    }
    pub fn download(&self, c: &ConvCfg) {
        self.all(c).iter().for_each(|(_, t)| t.download());
    }

    pub fn fwd_params(&self, c: &ConvCfg) -> ccv1d_fwd_params {
        ccv1d_fwd_params {
            struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
            backend: backend_code(),
            activation: if c.silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
            batch: c.batch as i64,
            dim: c.dim as i64,
            seqlen: c.seqlen as i64,
            width: c.width as i64,
            x: self.x.view(),
            weight: self.w.view(),
            bias: opt_view(&self.b),
            out: opt_view(&self.out),
            seq_idx: opt_view(&self.seq),
            initial_states: opt_view(&self.init),
            final_states: opt_view(&self.fin),
            cu_seqlens: opt_view(&self.cu),
            state_indices: opt_view(&self.si),
            has_initial_state: opt_view(&self.hi),
            num_seqs: if c.cu_seqlens.is_some() { c.num_seqs() as i64 } else { 0 },
            num_state_slots: c.num_state_slots,
        }
    }

    pub fn bwd_params(&self, c: &ConvCfg) -> ccv1d_bwd_params {
        ccv1d_bwd_params {
            struct_size: std::mem::size_of::<ccv1d_bwd_params>() as u32,
            backend: backend_code(),
            activation: if c.silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
            batch: c.batch as i64,
            dim: c.dim as i64,
            seqlen: c.seqlen as i64,
            width: c.width as i64,
            x: self.x.view(),
            weight: self.w.view(),
            bias: opt_view(&self.b),
            seq_idx: opt_view(&self.seq),
            initial_states: opt_view(&self.init),
            cu_seqlens: opt_view(&self.cu),
            state_indices: opt_view(&self.si),
            has_initial_state: opt_view(&self.hi),
            num_seqs: if c.cu_seqlens.is_some() { c.num_seqs() as i64 } else { 0 },
            num_state_slots: c.num_state_slots,
            dout: opt_view(&self.dout),
            dfinal_states: opt_view(&self.dfin),
            dx: opt_view(&self.dx),
            dweight: opt_view(&self.dw),
            dbias: opt_view(&self.db),
            dinitial_states: opt_view(&self.dinit),
            workspace: std::ptr::null_mut(),
            workspace_size: 0,
            nondeterministic: c.nondet as i32,
        }
    }

    /// The oracle's problem, from the values as stored (call before the library writes).
    pub fn problem(&self, c: &ConvCfg) -> ConvProblem {
        ConvProblem {
            batch: c.batch,
            dim: c.dim,
            seqlen: c.seqlen,
            width: c.width,
            silu: c.silu,
            x: self.x.to_f64(),
            weight: self.w.to_f64(),
            bias: self.b.as_ref().map(|t| t.to_f64()),
            seq_idx: self.seq.as_ref().map(|t| t.to_i32()),
            initial_states: self.init.as_ref().map(|t| t.to_f64()),
            cu_seqlens: self.cu.as_ref().map(|t| t.to_i32()),
            state_indices: self.si.as_ref().map(|t| t.to_i32()),
            has_initial_state: self.hi.as_ref().map(|t| t.to_i32().into_iter().map(|v| v != 0).collect()),
            num_slots: c.slots,
        }
    }
}

fn snapshots(v: &[(&'static str, &Tensor)]) -> Vec<Vec<u8>> {
    v.iter().map(|(_, t)| t.snapshot()).collect()
}

/// Run one forward case through the C ABI and compare with the oracle.
pub fn run_fwd(c: &ConvCfg, rng: &mut Rng) -> Result<String, String> {
    fwd_case(c, rng).into_result()
}

/// Run one backward case through the C ABI and compare with the oracle.
pub fn run_bwd(c: &ConvCfg, rng: &mut Rng) -> Result<String, String> {
    bwd_case(c, rng).into_result()
}

/// One forward case: build its tensors (outputs poisoned), call `ccv1d_fwd`, compare out and
/// final_states with the oracle, check inputs and the bytes around every output view untouched.
pub fn fwd_case(c: &ConvCfg, rng: &mut Rng) -> CaseReport {
    let mut rep = CaseReport::default();
    let t = ConvTensors::build(c, rng, false);
    let prob = t.problem(c);
    let ins = t.inputs(c);
    let outs = t.outputs();
    let in_before = snapshots(&ins);
    let out_before = snapshots(&outs);
    t.upload(c);
    let p = t.fwd_params(c);
    if !rep.ok(expect_ok(unsafe { capi::ccv1d_fwd(&p, std::ptr::null_mut()) }, "ccv1d_fwd")) {
        return rep;
    }
    t.download(c);
    let r = oracle::forward(&prob);
    let xn = c.xdt.name();
    rep.tensor("out", t.out.as_ref().unwrap(), &r.out, &r.out_mag, Tol::elementwise(c.xdt), &format!("fwd out {xn}"));
    if let Some(fin) = &t.fin {
        let before = &out_before[outs.iter().position(|(n, _)| *n == "final_states").unwrap()];
        rep.pool("final_states", fin, before, &r.final_states, &[], &r.final_written, true, Tol::elementwise(c.xdt), "");
    }
    for (i, (n, tt)) in ins.iter().enumerate() {
        rep.unchanged(n, tt, &in_before[i]);
    }
    for (i, (n, tt)) in outs.iter().enumerate() {
        rep.gaps(n, &[tt], &out_before[i]);
    }
    rep
}

/// One backward case: like [`fwd_case`] for dx, dweight, dbias and dinitial_states.
pub fn bwd_case(c: &ConvCfg, rng: &mut Rng) -> CaseReport {
    let mut rep = CaseReport::default();
    let t = ConvTensors::build(c, rng, true);
    let prob = t.problem(c);
    let dout = t.dout.as_ref().unwrap().to_f64();
    let dfin = t.dfin.as_ref().map(|f| f.to_f64());
    let ins = t.inputs(c);
    let outs = t.outputs();
    let in_before = snapshots(&ins);
    let out_before = snapshots(&outs);
    t.upload(c);
    let p = t.bwd_params(c);
    if !rep.ok(expect_ok(unsafe { capi::ccv1d_bwd(&p, std::ptr::null_mut()) }, "ccv1d_bwd")) {
        return rep;
    }
    t.download(c);
    let r = oracle::backward(&prob, &dout, dfin.as_deref());
    let xn = c.xdt.name();
    let n = c.tokens();
    rep.tensor("dx", t.dx.as_ref().unwrap(), &r.dx, &r.dx_mag, Tol::elementwise(c.xdt), &format!("bwd dx {xn}"));
    rep.tensor(
        "dweight",
        t.dw.as_ref().unwrap(),
        &r.dweight,
        &r.dweight_mag,
        Tol::reduction(c.dw_dt, n),
        &format!("bwd dweight {}", c.dw_dt.name()),
    );
    if let (Some(db), Some(dt)) = (&t.db, c.dbias) {
        rep.tensor("dbias", db, &r.dbias, &r.dbias_mag, Tol::reduction(dt, n), &format!("bwd dbias {}", dt.name()));
    }
    if let Some(di) = &t.dinit {
        let before = &out_before[outs.iter().position(|(n, _)| *n == "dinitial_states").unwrap()];
        rep.pool("dinitial_states", di, before, &r.dinitial_states, &r.dinit_mag, &r.dinit_written, false, Tol::elementwise(c.xdt), &format!("bwd dinit {xn}"));
    }
    for (i, (n, tt)) in ins.iter().enumerate() {
        rep.unchanged(n, tt, &in_before[i]);
    }
    for (i, (n, tt)) in outs.iter().enumerate() {
        rep.gaps(n, &[tt], &out_before[i]);
    }
    rep
}

// =============================================================================================
// Update cases
// =============================================================================================

#[derive(Clone, Debug)]
pub struct UpdCfg {
    pub batch: usize,
    pub dim: usize,
    pub seqlen: usize,
    pub width: usize,
    pub state_len: usize,
    pub silu: bool,
    pub xdt: DType,
    pub wdt: DType,
    pub bias: Option<DType>,
    pub slots: usize,
    pub num_state_slots: i64,
    pub cache_seqlens: Option<Vec<i32>>,
    pub indices: Option<Vec<i32>>,
    /// out is x (same memory).
    pub in_place: bool,
    pub lay_x: Layout,
    pub lay_out: Layout,
    pub lay_w: Layout,
    pub lay_b: Layout,
    pub lay_state: Layout,
    pub lay_idx: Layout,
}

/// Run one update case through the C ABI and compare with the oracle.
pub fn run_update(c: &UpdCfg, rng: &mut Rng) -> Result<String, String> {
    update_case(c, rng).into_result()
}

/// One decode-update case: out poisoned (unless in place), conv_state compared bit-exactly in
/// the written slots and untouched elsewhere, inputs and gaps unchanged.
pub fn update_case(c: &UpdCfg, rng: &mut Rng) -> CaseReport {
    let mut rep = CaseReport::default();
    let (b, d, s, w) = (c.batch, c.dim, c.seqlen, c.width);
    let x = Tensor::new(c.xdt.into(), &[b, d, s], &c.lay_x);
    x.fill_random(rng, 1.0);
    let wt = Tensor::new(c.wdt.into(), &[d, w], &c.lay_w);
    wt.fill_random(rng, 1.0);
    let bt = c.bias.map(|bd| {
        let t = Tensor::new(bd.into(), &[d], &c.lay_b);
        t.fill_random(rng, 0.5);
        t
    });
    let state = Tensor::new(c.xdt.into(), &[c.slots, d, c.state_len], &c.lay_state);
    state.fill_random(rng, 1.0);
    let cs = c.cache_seqlens.as_ref().map(|v| {
        let t = Tensor::new(Dt::I32, &[b], &c.lay_idx);
        t.set_i32(v);
        t
    });
    let ci = c.indices.as_ref().map(|v| {
        let t = Tensor::new(Dt::I32, &[b], &c.lay_idx);
        t.set_i32(v);
        t
    });
    let out = if c.in_place {
        x.clone()
    } else {
        let o = Tensor::new(c.xdt.into(), &[b, d, s], &c.lay_out);
        o.poison();
        o
    };
    let prob = UpdateProblem {
        batch: b,
        dim: d,
        seqlen: s,
        width: w,
        state_len: c.state_len,
        silu: c.silu,
        x: x.to_f64(),
        weight: wt.to_f64(),
        bias: bt.as_ref().map(|t| t.to_f64()),
        conv_state: state.to_f64(),
        cache_seqlens: c.cache_seqlens.clone(),
        conv_state_indices: c.indices.clone(),
        num_slots: c.slots,
    };
    let mut ins: Vec<(&str, &Tensor)> = vec![("weight", &wt)];
    if !c.in_place {
        ins.push(("x", &x));
    }
    for (n, t) in [("bias", &bt), ("cache_seqlens", &cs), ("conv_state_indices", &ci)] {
        if let Some(t) = t {
            ins.push((n, t));
        }
    }
    let in_before: Vec<Vec<u8>> = ins.iter().map(|(_, t)| t.snapshot()).collect();
    let out_before = out.snapshot();
    let state_before = state.snapshot();
    for t in ins.iter().map(|(_, t)| *t).chain([&out, &state]) {
        t.upload();
    }
    let p = ccv1d_update_params {
        struct_size: std::mem::size_of::<ccv1d_update_params>() as u32,
        backend: backend_code(),
        activation: if c.silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
        batch: b as i64,
        dim: d as i64,
        seqlen: s as i64,
        width: w as i64,
        state_len: c.state_len as i64,
        num_state_slots: c.num_state_slots,
        x: x.view(),
        weight: wt.view(),
        bias: opt_view(&bt),
        out: out.view(),
        conv_state: state.view(),
        cache_seqlens: opt_view(&cs),
        conv_state_indices: opt_view(&ci),
    };
    if !rep.ok(expect_ok(unsafe { capi::ccv1d_update(&p, std::ptr::null_mut()) }, "ccv1d_update")) {
        return rep;
    }
    for t in ins.iter().map(|(_, t)| *t).chain([&out, &state]) {
        t.download();
    }
    let r = oracle::update(&prob);
    rep.tensor("out", &out, &r.out, &r.out_mag, Tol::elementwise(c.xdt), &format!("update out {}", c.xdt.name()));
    // Written slots: exact copies; the others (padding rows, unused slots) untouched.
    rep.pool("conv_state", &state, &state_before, &r.conv_state, &[], &r.written, true, Tol::elementwise(c.xdt), "");
    for (i, (n, t)) in ins.iter().enumerate() {
        rep.unchanged(n, t, &in_before[i]);
    }
    rep.gaps("out", &[&out], &out_before);
    rep.gaps("conv_state", &[&state], &state_before);
    rep
}

/// A forward params struct with the dims set and every tensor absent.
pub fn fwd_params_base(batch: usize, dim: usize, seqlen: usize, width: usize, silu: bool) -> ccv1d_fwd_params {
    let z = ccv1d_tensor::default();
    ccv1d_fwd_params {
        struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
        backend: backend_code(),
        activation: if silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
        batch: batch as i64,
        dim: dim as i64,
        seqlen: seqlen as i64,
        width: width as i64,
        x: z,
        weight: z,
        bias: z,
        out: z,
        seq_idx: z,
        initial_states: z,
        final_states: z,
        cu_seqlens: z,
        state_indices: z,
        has_initial_state: z,
        num_seqs: 0,
        num_state_slots: 0,
    }
}
