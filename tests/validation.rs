//! One test per validation rule: the exact status, every buffer (inputs and outputs)
//! byte-for-byte untouched, and `ccv1d_last_error()` naming the offending field. Plus the
//! accepted cases next to each rule (exact aliasing, zero-sized problems) and the small API
//! functions. Host memory and the CPU backend throughout (the rules are the backend's
//! business only where stated: host-readable index checks, NO_DEVICE, GPU workspace).

mod common;

use std::ptr::null_mut;

use causal_conv1d::capi::*;
use causal_conv1d::error::*;
use causal_conv1d::oracle;
use causal_conv1d::params::*;
use common::*;

const B: usize = 2;
const D: usize = 3;
const L: usize = 5;
const W: usize = 4;
const K: usize = W - 1;
const T: usize = 7;
const S: usize = 2;
const SL: usize = 4;

// ---------------------------------------------------------------------------------------------
// Setups: small valid problems (every optional tensor present), host memory
// ---------------------------------------------------------------------------------------------

fn rnd(shape: &[usize], rng: &mut Rng) -> Tensor {
    let t = Tensor::host_dense(Dt::F32, shape);
    t.fill_random(rng, 1.0);
    t
}
fn nan(shape: &[usize]) -> Tensor {
    let t = Tensor::host_dense(Dt::F32, shape);
    t.poison();
    t
}
fn ints(dt: Dt, v: &[i32]) -> Tensor {
    let t = Tensor::host_dense(dt, &[v.len()]);
    t.set_i32(v);
    t
}

/// Rows mode (B=2, D=3, L=5, W=4) with seq_idx and a 2-slot state pool.
struct Rows {
    x: Tensor,
    w: Tensor,
    b: Tensor,
    seq: Tensor,
    init: Tensor,
    out: Tensor,
    fin: Tensor,
    dout: Tensor,
    dfin: Tensor,
    dx: Tensor,
    dw: Tensor,
    db: Tensor,
    dinit: Tensor,
}

fn rows() -> Rows {
    let mut rng = Rng::new(1);
    let seq = Tensor::host_dense(Dt::I32, &[B, L]);
    seq.set_i32(&[0, 0, 1, 1, 1, 0, 0, 0, 0, 0]);
    Rows {
        x: rnd(&[B, D, L], &mut rng),
        w: rnd(&[D, W], &mut rng),
        b: rnd(&[D], &mut rng),
        seq,
        init: rnd(&[B, D, K], &mut rng),
        out: nan(&[B, D, L]),
        fin: nan(&[B, D, K]),
        dout: rnd(&[B, D, L], &mut rng),
        dfin: rnd(&[B, D, K], &mut rng),
        dx: nan(&[B, D, L]),
        dw: nan(&[D, W]),
        db: nan(&[D]),
        dinit: nan(&[B, D, K]),
    }
}

impl Rows {
    fn all(&self) -> Vec<&Tensor> {
        vec![&self.x, &self.w, &self.b, &self.seq, &self.init, &self.out, &self.fin, &self.dout, &self.dfin, &self.dx, &self.dw, &self.db, &self.dinit]
    }
    fn fwd(&self) -> ccv1d_fwd_params {
        ccv1d_fwd_params {
            struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
            backend: CCV1D_BACKEND_CPU,
            activation: CCV1D_ACT_SILU,
            batch: B as i64,
            dim: D as i64,
            seqlen: L as i64,
            width: W as i64,
            x: self.x.view(),
            weight: self.w.view(),
            bias: self.b.view(),
            out: self.out.view(),
            seq_idx: self.seq.view(),
            initial_states: self.init.view(),
            final_states: self.fin.view(),
            cu_seqlens: ccv1d_tensor::default(),
            state_indices: ccv1d_tensor::default(),
            has_initial_state: ccv1d_tensor::default(),
            num_seqs: 0,
            num_state_slots: 0,
        }
    }
    fn bwd(&self) -> ccv1d_bwd_params {
        ccv1d_bwd_params {
            struct_size: std::mem::size_of::<ccv1d_bwd_params>() as u32,
            backend: CCV1D_BACKEND_CPU,
            activation: CCV1D_ACT_SILU,
            batch: B as i64,
            dim: D as i64,
            seqlen: L as i64,
            width: W as i64,
            x: self.x.view(),
            weight: self.w.view(),
            bias: self.b.view(),
            seq_idx: self.seq.view(),
            initial_states: self.init.view(),
            cu_seqlens: ccv1d_tensor::default(),
            state_indices: ccv1d_tensor::default(),
            has_initial_state: ccv1d_tensor::default(),
            num_seqs: 0,
            num_state_slots: 0,
            dout: self.dout.view(),
            dfinal_states: self.dfin.view(),
            dx: self.dx.view(),
            dweight: self.dw.view(),
            dbias: self.db.view(),
            dinitial_states: self.dinit.view(),
            workspace: null_mut(),
            workspace_size: 0,
            nondeterministic: 0,
        }
    }
}

/// Packed mode: x [1, D, 7], cu_seqlens [0,3,3,7], state_indices [1,-1,0] over 3 slots,
/// has_initial_state int32 [1,1,0].
struct Packed {
    r: Rows,
    cu: Tensor,
    si: Tensor,
    hi: Tensor,
}

fn packed() -> Packed {
    let mut rng = Rng::new(2);
    let r = Rows {
        x: rnd(&[1, D, T], &mut rng),
        w: rnd(&[D, W], &mut rng),
        b: rnd(&[D], &mut rng),
        seq: ints(Dt::I32, &[0; T]),
        init: rnd(&[3, D, K], &mut rng),
        out: nan(&[1, D, T]),
        fin: nan(&[3, D, K]),
        dout: rnd(&[1, D, T], &mut rng),
        dfin: rnd(&[3, D, K], &mut rng),
        dx: nan(&[1, D, T]),
        dw: nan(&[D, W]),
        db: nan(&[D]),
        dinit: nan(&[3, D, K]),
    };
    Packed { r, cu: ints(Dt::I32, &[0, 3, 3, 7]), si: ints(Dt::I32, &[1, -1, 0]), hi: ints(Dt::I32, &[1, 1, 0]) }
}

impl Packed {
    fn all(&self) -> Vec<&Tensor> {
        let mut v = self.r.all();
        v.extend([&self.cu, &self.si, &self.hi]);
        v
    }
    fn fwd(&self) -> ccv1d_fwd_params {
        let mut p = self.r.fwd();
        p.batch = 1;
        p.seqlen = T as i64;
        p.seq_idx = ccv1d_tensor::default();
        p.cu_seqlens = self.cu.view();
        p.state_indices = self.si.view();
        p.has_initial_state = self.hi.view();
        p.num_seqs = 3;
        p.num_state_slots = 3;
        p
    }
    fn bwd(&self) -> ccv1d_bwd_params {
        let mut p = self.r.bwd();
        p.batch = 1;
        p.seqlen = T as i64;
        p.seq_idx = ccv1d_tensor::default();
        p.cu_seqlens = self.cu.view();
        p.state_indices = self.si.view();
        p.has_initial_state = self.hi.view();
        p.num_seqs = 3;
        p.num_state_slots = 3;
        p
    }
}

/// Update: x [2, 3, 2], conv_state [3 slots, 3, 4], cache_seqlens [5, 0], indices [2, 0].
struct Upd {
    x: Tensor,
    w: Tensor,
    b: Tensor,
    out: Tensor,
    state: Tensor,
    cs: Tensor,
    ci: Tensor,
}

fn upd() -> Upd {
    let mut rng = Rng::new(3);
    Upd {
        x: rnd(&[B, D, S], &mut rng),
        w: rnd(&[D, W], &mut rng),
        b: rnd(&[D], &mut rng),
        out: nan(&[B, D, S]),
        state: rnd(&[3, D, SL], &mut rng),
        cs: ints(Dt::I32, &[5, 0]),
        ci: ints(Dt::I32, &[2, 0]),
    }
}

impl Upd {
    fn all(&self) -> Vec<&Tensor> {
        vec![&self.x, &self.w, &self.b, &self.out, &self.state, &self.cs, &self.ci]
    }
    fn p(&self) -> ccv1d_update_params {
        ccv1d_update_params {
            struct_size: std::mem::size_of::<ccv1d_update_params>() as u32,
            backend: CCV1D_BACKEND_CPU,
            activation: CCV1D_ACT_SILU,
            batch: B as i64,
            dim: D as i64,
            seqlen: S as i64,
            width: W as i64,
            state_len: SL as i64,
            num_state_slots: 3,
            x: self.x.view(),
            weight: self.w.view(),
            bias: self.b.view(),
            out: self.out.view(),
            conv_state: self.state.view(),
            cache_seqlens: self.cs.view(),
            conv_state_indices: self.ci.view(),
        }
    }
}

fn fwd(p: &ccv1d_fwd_params) -> i32 {
    unsafe { ccv1d_fwd(p, null_mut()) }
}
fn bwd(p: &ccv1d_bwd_params) -> i32 {
    unsafe { ccv1d_bwd(p, null_mut()) }
}
fn update(p: &ccv1d_update_params) -> i32 {
    unsafe { ccv1d_update(p, null_mut()) }
}
/// `ccv1d_bwd_workspace_size`, asserting the out-parameter is untouched on failure.
fn wsize(p: &ccv1d_bwd_params) -> i32 {
    let mut bytes: usize = 0xDEAD;
    let st = unsafe { ccv1d_bwd_workspace_size(p, &mut bytes) };
    if st != CCV1D_OK {
        assert_eq!(bytes, 0xDEAD, "workspace_size wrote *bytes although it failed");
    }
    st
}

/// Does `msg` contain `field` as a whole word (not part of a longer identifier)?
fn names(msg: &str, field: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    msg.match_indices(field).any(|(i, _)| !ident(msg[..i].chars().next_back()) && !ident(msg[i + field.len()..].chars().next()))
}

/// The call fails with `status`, leaves every buffer of `bufs` byte-identical, and its last
/// error names `field`.
#[track_caller]
fn expect(what: &str, bufs: &[&Tensor], status: i32, field: &str, call: impl FnOnce() -> i32) {
    let before: Vec<Vec<u8>> = bufs.iter().map(|t| t.snapshot()).collect();
    let st = call();
    let msg = last_error();
    assert_eq!(st, status, "{what}: returned {} ({st}), expected {} ({status}); last error: {msg:?}", status_str(st), status_str(status));
    for (i, t) in bufs.iter().enumerate() {
        assert!(t.snapshot() == before[i], "{what}: failed with {} but buffer {i} ({t:?}) was modified", status_str(st));
    }
    assert!(names(&msg, field), "{what}: last error {msg:?} does not name `{field}`");
}

/// The call succeeds.
#[track_caller]
fn expect_ok_call(what: &str, call: impl FnOnce() -> i32) {
    let st = call();
    assert_eq!(st, CCV1D_OK, "{what}: returned {} ({st}); last error: {:?}", status_str(st), last_error());
}

// ---------------------------------------------------------------------------------------------
// Pointers and struct_size
// ---------------------------------------------------------------------------------------------

#[test]
fn null_params_pointer() {
    for (what, st) in [
        ("fwd", unsafe { ccv1d_fwd(std::ptr::null(), null_mut()) }),
        ("bwd", unsafe { ccv1d_bwd(std::ptr::null(), null_mut()) }),
        ("update", unsafe { ccv1d_update(std::ptr::null(), null_mut()) }),
    ] {
        assert_eq!(st, CCV1D_ERR_NULL_POINTER, "{what}: {}", status_str(st));
        let msg = last_error();
        assert!(msg.contains("params"), "{what}: last error {msg:?} does not name the params pointer");
    }
    let mut bytes = 7usize;
    let st = unsafe { ccv1d_bwd_workspace_size(std::ptr::null(), &mut bytes) };
    assert_eq!(st, CCV1D_ERR_NULL_POINTER);
    assert_eq!(bytes, 7);
    assert!(last_error().contains("params"), "{:?}", last_error());
    // The out-parameter itself.
    let r = rows();
    let st = unsafe { ccv1d_bwd_workspace_size(&r.bwd(), null_mut()) };
    assert_eq!(st, CCV1D_ERR_NULL_POINTER);
    assert!(names(&last_error(), "bytes"), "{:?}", last_error());
}

#[test]
fn null_required_data() {
    let r = rows();
    let bufs = r.all();
    let z = std::ptr::null_mut();
    for f in ["x", "weight", "out"] {
        let mut p = r.fwd();
        match f {
            "x" => p.x.data = z,
            "weight" => p.weight.data = z,
            _ => p.out.data = z,
        }
        expect(&format!("fwd {f} NULL"), &bufs, CCV1D_ERR_NULL_POINTER, f, || fwd(&p));
    }
    for f in ["x", "weight", "dout", "dx", "dweight"] {
        let mut p = r.bwd();
        match f {
            "x" => p.x.data = z,
            "weight" => p.weight.data = z,
            "dout" => p.dout.data = z,
            "dx" => p.dx.data = z,
            _ => p.dweight.data = z,
        }
        expect(&format!("bwd {f} NULL"), &bufs, CCV1D_ERR_NULL_POINTER, f, || bwd(&p));
        expect(&format!("workspace_size {f} NULL"), &bufs, CCV1D_ERR_NULL_POINTER, f, || wsize(&p));
    }
    let u = upd();
    let bufs = u.all();
    for f in ["x", "weight", "out", "conv_state"] {
        let mut p = u.p();
        match f {
            "x" => p.x.data = z,
            "weight" => p.weight.data = z,
            "out" => p.out.data = z,
            _ => p.conv_state.data = z,
        }
        expect(&format!("update {f} NULL"), &bufs, CCV1D_ERR_NULL_POINTER, f, || update(&p));
    }
}

#[test]
fn struct_size_unknown() {
    let r = rows();
    let u = upd();
    let mut bufs = r.all();
    bufs.extend(u.all());
    let sizes = |n: usize| [0u32, 4, (n - 8) as u32, (n - 1) as u32, (n + 8) as u32, u32::MAX];
    for s in sizes(std::mem::size_of::<ccv1d_fwd_params>()) {
        let mut p = r.fwd();
        p.struct_size = s;
        expect(&format!("fwd struct_size {s}"), &bufs, CCV1D_ERR_STRUCT_SIZE, "struct_size", || fwd(&p));
    }
    for s in sizes(std::mem::size_of::<ccv1d_bwd_params>()) {
        let mut p = r.bwd();
        p.struct_size = s;
        expect(&format!("bwd struct_size {s}"), &bufs, CCV1D_ERR_STRUCT_SIZE, "struct_size", || bwd(&p));
        expect(&format!("workspace_size struct_size {s}"), &bufs, CCV1D_ERR_STRUCT_SIZE, "struct_size", || wsize(&p));
    }
    for s in sizes(std::mem::size_of::<ccv1d_update_params>()) {
        let mut p = u.p();
        p.struct_size = s;
        expect(&format!("update struct_size {s}"), &bufs, CCV1D_ERR_STRUCT_SIZE, "struct_size", || update(&p));
    }
}

// ---------------------------------------------------------------------------------------------
// Codes: dtype, activation, backend, width, dims
// ---------------------------------------------------------------------------------------------

#[test]
fn dtype_unknown_or_not_allowed() {
    let r = rows();
    let bufs = r.all();
    let bad_float = [0, 4, 5, 6, -1, 99];
    for code in bad_float {
        for f in ["x", "weight", "bias"] {
            let mut p = r.fwd();
            match f {
                "x" => p.x.dtype = code,
                "weight" => p.weight.dtype = code,
                _ => p.bias.dtype = code,
            }
            expect(&format!("fwd {f}.dtype {code}"), &bufs, CCV1D_ERR_DTYPE, f, || fwd(&p));
        }
        for f in ["dweight", "dbias"] {
            let mut p = r.bwd();
            if f == "dweight" {
                p.dweight.dtype = code;
            } else {
                p.dbias.dtype = code;
            }
            expect(&format!("bwd {f}.dtype {code}"), &bufs, CCV1D_ERR_DTYPE, f, || bwd(&p));
        }
    }
    // Tensors that must share x's dtype (f32 here): f16 and bf16 are refused.
    for code in [CCV1D_DTYPE_F16, CCV1D_DTYPE_BF16] {
        for f in ["out", "initial_states", "final_states"] {
            let mut p = r.fwd();
            match f {
                "out" => p.out.dtype = code,
                "initial_states" => p.initial_states.dtype = code,
                _ => p.final_states.dtype = code,
            }
            expect(&format!("fwd {f}.dtype {code} != x"), &bufs, CCV1D_ERR_DTYPE, f, || fwd(&p));
        }
        for f in ["dout", "dfinal_states", "dx", "dinitial_states"] {
            let mut p = r.bwd();
            match f {
                "dout" => p.dout.dtype = code,
                "dfinal_states" => p.dfinal_states.dtype = code,
                "dx" => p.dx.dtype = code,
                _ => p.dinitial_states.dtype = code,
            }
            expect(&format!("bwd {f}.dtype {code} != x"), &bufs, CCV1D_ERR_DTYPE, f, || bwd(&p));
        }
    }
    // Index tensors: int32 only; has_initial_state int32 or bool.
    for code in [CCV1D_DTYPE_F32, CCV1D_DTYPE_BOOL, 0] {
        let mut p = r.fwd();
        p.seq_idx.dtype = code;
        expect(&format!("fwd seq_idx.dtype {code}"), &bufs, CCV1D_ERR_DTYPE, "seq_idx", || fwd(&p));
    }
    let pk = packed();
    let bufs = pk.all();
    for code in [CCV1D_DTYPE_F32, CCV1D_DTYPE_BOOL] {
        for f in ["cu_seqlens", "state_indices"] {
            let mut p = pk.fwd();
            if f == "cu_seqlens" {
                p.cu_seqlens.dtype = code;
            } else {
                p.state_indices.dtype = code;
            }
            expect(&format!("fwd {f}.dtype {code}"), &bufs, CCV1D_ERR_DTYPE, f, || fwd(&p));
        }
    }
    for code in [CCV1D_DTYPE_F32, CCV1D_DTYPE_F16, 0, 6] {
        let mut p = pk.fwd();
        p.has_initial_state.dtype = code;
        expect(&format!("fwd has_initial_state.dtype {code}"), &bufs, CCV1D_ERR_DTYPE, "has_initial_state", || fwd(&p));
        let mut p = pk.bwd();
        p.has_initial_state.dtype = code;
        expect(&format!("bwd has_initial_state.dtype {code}"), &bufs, CCV1D_ERR_DTYPE, "has_initial_state", || bwd(&p));
    }
    // Update.
    let u = upd();
    let bufs = u.all();
    for f in ["x", "weight", "bias"] {
        let mut p = u.p();
        match f {
            "x" => p.x.dtype = 0,
            "weight" => p.weight.dtype = CCV1D_DTYPE_I32,
            _ => p.bias.dtype = 9,
        }
        expect(&format!("update {f}.dtype"), &bufs, CCV1D_ERR_DTYPE, f, || update(&p));
    }
    for f in ["out", "conv_state"] {
        let mut p = u.p();
        if f == "out" {
            p.out.dtype = CCV1D_DTYPE_BF16;
        } else {
            p.conv_state.dtype = CCV1D_DTYPE_F16;
        }
        expect(&format!("update {f}.dtype != x"), &bufs, CCV1D_ERR_DTYPE, f, || update(&p));
    }
    for f in ["cache_seqlens", "conv_state_indices"] {
        let mut p = u.p();
        if f == "cache_seqlens" {
            p.cache_seqlens.dtype = CCV1D_DTYPE_F32;
        } else {
            p.conv_state_indices.dtype = CCV1D_DTYPE_BOOL;
        }
        expect(&format!("update {f}.dtype"), &bufs, CCV1D_ERR_DTYPE, f, || update(&p));
    }
}

#[test]
fn activation_unknown() {
    let r = rows();
    let u = upd();
    let mut bufs = r.all();
    bufs.extend(u.all());
    for code in [2, -1, 100] {
        let mut p = r.fwd();
        p.activation = code;
        expect(&format!("fwd activation {code}"), &bufs, CCV1D_ERR_ACTIVATION, "activation", || fwd(&p));
        let mut p = r.bwd();
        p.activation = code;
        expect(&format!("bwd activation {code}"), &bufs, CCV1D_ERR_ACTIVATION, "activation", || bwd(&p));
        let mut p = u.p();
        p.activation = code;
        expect(&format!("update activation {code}"), &bufs, CCV1D_ERR_ACTIVATION, "activation", || update(&p));
    }
}

#[test]
fn backend_unknown() {
    let r = rows();
    let u = upd();
    let mut bufs = r.all();
    bufs.extend(u.all());
    for code in [3, -1, 42] {
        let mut p = r.fwd();
        p.backend = code;
        expect(&format!("fwd backend {code}"), &bufs, CCV1D_ERR_BACKEND, "backend", || fwd(&p));
        let mut p = r.bwd();
        p.backend = code;
        expect(&format!("bwd backend {code}"), &bufs, CCV1D_ERR_BACKEND, "backend", || bwd(&p));
        let mut p = u.p();
        p.backend = code;
        expect(&format!("update backend {code}"), &bufs, CCV1D_ERR_BACKEND, "backend", || update(&p));
    }
}

#[test]
fn width_out_of_range() {
    let r = rows();
    let u = upd();
    let mut bufs = r.all();
    bufs.extend(u.all());
    for wd in [0, 9, -1, 1 << 40] {
        let mut p = r.fwd();
        p.width = wd;
        expect(&format!("fwd width {wd}"), &bufs, CCV1D_ERR_WIDTH, "width", || fwd(&p));
        let mut p = r.bwd();
        p.width = wd;
        expect(&format!("bwd width {wd}"), &bufs, CCV1D_ERR_WIDTH, "width", || bwd(&p));
        let mut p = u.p();
        p.width = wd;
        expect(&format!("update width {wd}"), &bufs, CCV1D_ERR_WIDTH, "width", || update(&p));
    }
}

#[test]
fn negative_dims() {
    let r = rows();
    let u = upd();
    let mut bufs = r.all();
    bufs.extend(u.all());
    for f in ["batch", "dim", "seqlen"] {
        for v in [-1i64, i64::MIN] {
            let mut p = r.fwd();
            let mut q = r.bwd();
            let mut s = u.p();
            match f {
                "batch" => (p.batch, q.batch, s.batch) = (v, v, v),
                "dim" => (p.dim, q.dim, s.dim) = (v, v, v),
                _ => (p.seqlen, q.seqlen, s.seqlen) = (v, v, v),
            }
            expect(&format!("fwd {f} {v}"), &bufs, CCV1D_ERR_DIM, f, || fwd(&p));
            expect(&format!("bwd {f} {v}"), &bufs, CCV1D_ERR_DIM, f, || bwd(&q));
            expect(&format!("update {f} {v}"), &bufs, CCV1D_ERR_DIM, f, || update(&s));
        }
    }
    let mut s = u.p();
    s.state_len = -1;
    expect("update state_len -1", &bufs, CCV1D_ERR_DIM, "state_len", || update(&s));
    let mut s = u.p();
    s.num_state_slots = -2;
    expect("update num_state_slots -2", &bufs, CCV1D_ERR_DIM, "num_state_slots", || update(&s));
    let mut p = r.fwd();
    p.num_state_slots = -1;
    expect("fwd num_state_slots -1", &bufs, CCV1D_ERR_DIM, "num_state_slots", || fwd(&p));
    let pk = packed();
    let mut p = pk.fwd();
    p.num_seqs = -1;
    expect("fwd num_seqs -1 (packed)", &pk.all(), CCV1D_ERR_DIM, "num_seqs", || fwd(&p));
}

/// Update needs at least one new token: seqlen 0 is a DIM error ("zero where at least one is
/// required", error.rs).
#[test]
fn update_seqlen_zero() {
    let u = upd();
    let mut p = u.p();
    p.seqlen = 0;
    expect("update seqlen 0", &u.all(), CCV1D_ERR_DIM, "seqlen", || update(&p));
}

// ---------------------------------------------------------------------------------------------
// int64 overflow of dims and offsets
// ---------------------------------------------------------------------------------------------

#[test]
fn offsets_overflow_int64() {
    let r = rows();
    let bufs = r.all();
    let plain = || {
        let mut p = r.fwd();
        p.seq_idx = ccv1d_tensor::default();
        p.initial_states = ccv1d_tensor::default();
        p.final_states = ccv1d_tensor::default();
        p
    };
    // seqlen 2^40 with an L-stride of 2^40: the last offset is 2^80.
    let mut p = plain();
    (p.batch, p.dim, p.seqlen) = (1, 1, 1 << 40);
    p.x.stride = [0, 0, 1 << 40];
    p.out.stride = [0, 0, 1];
    expect("fwd x stride 2^40 × seqlen 2^40", &bufs, CCV1D_ERR_OVERFLOW, "x", || fwd(&p));
    // Element offsets fit but byte offsets do not (2^62 f32 elements).
    let mut p = plain();
    (p.batch, p.dim, p.seqlen) = (1, 1, 1 << 62);
    p.x.stride = [0, 0, 1];
    p.out.stride = [0, 0, 1];
    expect("fwd x bytes 2^64", &bufs, CCV1D_ERR_OVERFLOW, "x", || fwd(&p));
    // The product of the dims.
    let mut p = plain();
    (p.batch, p.dim, p.seqlen) = (1 << 32, 1 << 32, 2);
    expect("fwd batch*dim*seqlen 2^65", &bufs, CCV1D_ERR_OVERFLOW, "batch", || fwd(&p));
    // A weight stride.
    let mut p = plain();
    p.weight.stride = [1 << 62, 1, 0];
    expect("fwd weight stride 2^62", &bufs, CCV1D_ERR_OVERFLOW, "weight", || fwd(&p));
    // Backward outputs.
    let mut q = r.bwd();
    q.dx.stride = [i64::MAX / 2, 1, 1];
    expect("bwd dx stride", &bufs, CCV1D_ERR_OVERFLOW, "dx", || bwd(&q));
    expect("workspace_size dx stride", &bufs, CCV1D_ERR_OVERFLOW, "dx", || wsize(&q));
    // Update's conv_state.
    let u = upd();
    let mut s = u.p();
    s.conv_state.stride = [1 << 62, SL as i64, 1];
    expect("update conv_state stride 2^62", &u.all(), CCV1D_ERR_OVERFLOW, "conv_state", || update(&s));
}

// ---------------------------------------------------------------------------------------------
// Shapes that disagree
// ---------------------------------------------------------------------------------------------

#[test]
fn cu_seqlens_needs_batch_1() {
    let pk = packed();
    let mut p = pk.fwd();
    p.batch = 2;
    expect("fwd cu_seqlens with batch 2", &pk.all(), CCV1D_ERR_SHAPE, "cu_seqlens", || fwd(&p));
    let mut q = pk.bwd();
    q.batch = 2;
    expect("bwd cu_seqlens with batch 2", &pk.all(), CCV1D_ERR_SHAPE, "cu_seqlens", || bwd(&q));
}

#[test]
fn seq_idx_with_cu_seqlens() {
    let pk = packed();
    let seq = Tensor::host_dense(Dt::I32, &[1, T]);
    seq.set_i32(&[0; T]);
    let mut bufs = pk.all();
    bufs.push(&seq);
    let mut p = pk.fwd();
    p.seq_idx = seq.view();
    expect("fwd seq_idx + cu_seqlens", &bufs, CCV1D_ERR_SHAPE, "seq_idx", || fwd(&p));
    let mut q = pk.bwd();
    q.seq_idx = seq.view();
    expect("bwd seq_idx + cu_seqlens", &bufs, CCV1D_ERR_SHAPE, "seq_idx", || bwd(&q));
}

#[test]
fn dbias_without_bias() {
    let r = rows();
    let mut q = r.bwd();
    q.bias = ccv1d_tensor::default();
    expect("bwd dbias without bias", &r.all(), CCV1D_ERR_SHAPE, "dbias", || bwd(&q));
}

#[test]
fn dinitial_states_without_initial_states() {
    let r = rows();
    let mut q = r.bwd();
    q.initial_states = ccv1d_tensor::default();
    expect("bwd dinitial_states without initial_states", &r.all(), CCV1D_ERR_SHAPE, "dinitial_states", || bwd(&q));
    let pk = packed();
    let mut q = pk.bwd();
    q.initial_states = ccv1d_tensor::default();
    expect("bwd packed dinitial_states without initial_states", &pk.all(), CCV1D_ERR_SHAPE, "dinitial_states", || bwd(&q));
}

#[test]
fn update_state_len_below_width_minus_1() {
    let u = upd();
    for sl in [0, K as i64 - 1] {
        let mut p = u.p();
        p.state_len = sl;
        expect(&format!("update state_len {sl} < {K}"), &u.all(), CCV1D_ERR_SHAPE, "state_len", || update(&p));
    }
}

#[test]
fn fewer_state_slots_than_sequences_without_state_indices() {
    let r = rows();
    let mut p = r.fwd();
    p.num_state_slots = 1; // 2 rows
    expect("fwd rows: 1 slot for 2 rows", &r.all(), CCV1D_ERR_SHAPE, "num_state_slots", || fwd(&p));
    let mut q = r.bwd();
    q.num_state_slots = 1;
    expect("bwd rows: 1 slot for 2 rows", &r.all(), CCV1D_ERR_SHAPE, "num_state_slots", || bwd(&q));
    let pk = packed();
    let mut p = pk.fwd();
    p.state_indices = ccv1d_tensor::default();
    p.num_state_slots = 2; // 3 sequences
    expect("fwd packed: 2 slots for 3 sequences", &pk.all(), CCV1D_ERR_SHAPE, "num_state_slots", || fwd(&p));
    let u = upd();
    let mut s = u.p();
    s.conv_state_indices = ccv1d_tensor::default();
    s.num_state_slots = 1; // batch 2
    expect("update: 1 slot for 2 rows", &u.all(), CCV1D_ERR_SHAPE, "num_state_slots", || update(&s));
}

// ---------------------------------------------------------------------------------------------
// Host-readable index contents (CPU backend)
// ---------------------------------------------------------------------------------------------

#[test]
fn cu_seqlens_contents() {
    for (bad, why) in [([1, 3, 3, 7], "not starting at 0"), ([0, 4, 3, 7], "decreasing"), ([0, 3, 3, 6], "not ending at seqlen"), ([0, 3, 3, 8], "ending past seqlen")] {
        let mut pk = packed();
        pk.cu = ints(Dt::I32, &bad);
        let bufs = pk.all();
        let p = pk.fwd();
        expect(&format!("fwd cu_seqlens {bad:?} ({why})"), &bufs, CCV1D_ERR_CU_SEQLENS, "cu_seqlens", || fwd(&p));
        let q = pk.bwd();
        expect(&format!("bwd cu_seqlens {bad:?} ({why})"), &bufs, CCV1D_ERR_CU_SEQLENS, "cu_seqlens", || bwd(&q));
    }
}

#[test]
fn state_index_out_of_range_on_cpu() {
    let mut pk = packed();
    pk.si = ints(Dt::I32, &[1, -1, 3]); // 3 slots
    let bufs = pk.all();
    let p = pk.fwd();
    expect("fwd packed state_indices 3 of 3 slots", &bufs, CCV1D_ERR_INDEX, "state_indices", || fwd(&p));
    let q = pk.bwd();
    expect("bwd packed state_indices 3 of 3 slots", &bufs, CCV1D_ERR_INDEX, "state_indices", || bwd(&q));
    // Rows mode.
    let r = rows();
    let si = ints(Dt::I32, &[0, 7]);
    let mut bufs = r.all();
    bufs.push(&si);
    let mut p = r.fwd();
    p.state_indices = si.view();
    p.num_state_slots = 2;
    expect("fwd rows state_indices 7 of 2 slots", &bufs, CCV1D_ERR_INDEX, "state_indices", || fwd(&p));
    // Update.
    let mut u = upd();
    u.ci = ints(Dt::I32, &[2, 3]);
    let p = u.p();
    expect("update conv_state_indices 3 of 3 slots", &u.all(), CCV1D_ERR_INDEX, "conv_state_indices", || update(&p));
}

// ---------------------------------------------------------------------------------------------
// Overlaps
// ---------------------------------------------------------------------------------------------

/// `n` f32 elements of one host buffer, dense `shape` views at chosen element offsets.
fn shared(n: usize) -> Tensor {
    let t = Tensor::host_dense(Dt::F32, &[n]);
    t.fill_random(&mut Rng::new(9), 1.0);
    t
}
fn dense_strides(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as i64;
    }
    s
}
fn at(buf: &Tensor, off: usize, shape: &[usize]) -> Tensor {
    buf.alias(Dt::F32, buf.offset + off, shape, &dense_strides(shape))
}

#[test]
fn output_overlapping_input_is_refused() {
    let r = rows();
    let n = B * D * L;
    let buf = shared(3 * n);
    let bufs = {
        let mut v = r.all();
        v.push(&buf);
        v
    };
    // out overlaps x (shifted by one element), and out == x (forward is not in place).
    for shift in [1usize, 0] {
        let x = at(&buf, 0, &[B, D, L]);
        let out = at(&buf, shift, &[B, D, L]);
        let mut p = r.fwd();
        p.x = x.view();
        p.out = out.view();
        expect(&format!("fwd out = x + {shift}"), &bufs, CCV1D_ERR_OVERLAP, "out", || fwd(&p));
    }
    // out overlaps weight.
    let mut p = r.fwd();
    p.out = at(&buf, 0, &[B, D, L]).view();
    p.weight = at(&buf, n - 2, &[D, W]).view();
    expect("fwd out overlaps weight", &bufs, CCV1D_ERR_OVERLAP, "out", || fwd(&p));
    // final_states partially overlapping initial_states.
    let mut p = r.fwd();
    p.initial_states = at(&buf, 0, &[B, D, K]).view();
    p.final_states = at(&buf, 2, &[B, D, K]).view();
    expect("fwd final_states = initial_states + 2", &bufs, CCV1D_ERR_OVERLAP, "final_states", || fwd(&p));
    // Same pointer, different strides: not an exact alias.
    let mut p = r.fwd();
    let init = at(&buf, 0, &[B, D, K]);
    p.initial_states = init.view();
    p.final_states = buf.alias(Dt::F32, buf.offset, &[B, D, K], &[1, B as i64, (B * D) as i64]).view();
    expect("fwd final_states = initial_states transposed", &bufs, CCV1D_ERR_OVERLAP, "final_states", || fwd(&p));
    // final_states overlapping x.
    let mut p = r.fwd();
    p.x = at(&buf, 0, &[B, D, L]).view();
    p.final_states = at(&buf, 4, &[B, D, K]).view();
    expect("fwd final_states overlaps x", &bufs, CCV1D_ERR_OVERLAP, "final_states", || fwd(&p));
    // Backward: dx overlapping dout, x; dweight overlapping weight.
    let mut q = r.bwd();
    q.dout = at(&buf, 0, &[B, D, L]).view();
    q.dx = at(&buf, 3, &[B, D, L]).view();
    expect("bwd dx overlaps dout", &bufs, CCV1D_ERR_OVERLAP, "dx", || bwd(&q));
    let mut q = r.bwd();
    q.dout = at(&buf, 0, &[B, D, L]).view();
    q.dx = at(&buf, 0, &[B, D, L]).view();
    expect("bwd dx == dout", &bufs, CCV1D_ERR_OVERLAP, "dx", || bwd(&q));
    let mut q = r.bwd();
    q.x = at(&buf, 0, &[B, D, L]).view();
    q.dx = at(&buf, n - 1, &[B, D, L]).view();
    expect("bwd dx overlaps x", &bufs, CCV1D_ERR_OVERLAP, "dx", || bwd(&q));
    let mut q = r.bwd();
    q.weight = at(&buf, 0, &[D, W]).view();
    q.dweight = at(&buf, 5, &[D, W]).view();
    expect("bwd dweight overlaps weight", &bufs, CCV1D_ERR_OVERLAP, "dweight", || bwd(&q));
    let mut q = r.bwd();
    q.dfinal_states = at(&buf, 0, &[B, D, K]).view();
    q.dinitial_states = at(&buf, 0, &[B, D, K]).view();
    expect("bwd dinitial_states == dfinal_states", &bufs, CCV1D_ERR_OVERLAP, "dinitial_states", || bwd(&q));
    // Update: out partially overlapping x; conv_state overlapping x.
    let u = upd();
    let ubuf = shared(4 * B * D * S + 3 * D * SL);
    let mut ubufs = u.all();
    ubufs.push(&ubuf);
    let mut s = u.p();
    s.x = at(&ubuf, 0, &[B, D, S]).view();
    s.out = at(&ubuf, 1, &[B, D, S]).view();
    expect("update out = x + 1", &ubufs, CCV1D_ERR_OVERLAP, "out", || update(&s));
    let mut s = u.p();
    s.x = at(&ubuf, 0, &[B, D, S]).view();
    s.conv_state = at(&ubuf, 3, &[3, D, SL]).view();
    expect("update conv_state overlaps x", &ubufs, CCV1D_ERR_OVERLAP, "conv_state", || update(&s));
    let mut s = u.p();
    s.out = at(&ubuf, 0, &[B, D, S]).view();
    s.conv_state = at(&ubuf, 5, &[3, D, SL]).view();
    expect("update conv_state overlaps out", &ubufs, CCV1D_ERR_OVERLAP, "conv_state", || update(&s));
}

#[test]
fn two_outputs_overlapping_each_other_are_refused() {
    let r = rows();
    let buf = shared(4 * B * D * L);
    let mut bufs = r.all();
    bufs.push(&buf);
    let mut q = r.bwd();
    q.dx = at(&buf, 0, &[B, D, L]).view();
    q.dinitial_states = at(&buf, 7, &[B, D, K]).view();
    expect("bwd dx overlaps dinitial_states", &bufs, CCV1D_ERR_OVERLAP, "dinitial_states", || bwd(&q));
    assert!(names(&last_error(), "dx"), "{:?}", last_error());
    let mut q = r.bwd();
    q.dweight = at(&buf, 0, &[D, W]).view();
    q.dbias = at(&buf, W, &[D]).view();
    expect("bwd dbias overlaps dweight", &bufs, CCV1D_ERR_OVERLAP, "dbias", || bwd(&q));
    let mut p = r.fwd();
    p.out = at(&buf, 0, &[B, D, L]).view();
    p.final_states = at(&buf, B * D * L - 1, &[B, D, K]).view();
    expect("fwd final_states overlaps out", &bufs, CCV1D_ERR_OVERLAP, "final_states", || fwd(&p));
}

/// The two allowed exact aliases run: initial_states == final_states (forward, rows and pool)
/// and out == x (update); the results are the oracle's.
#[test]
fn exact_aliases_are_accepted() {
    // Forward, rows: the pool holds initial states before and final states after.
    let r = rows();
    let mut p = r.fwd();
    p.final_states = r.init.view();
    let prob = oracle::ConvProblem {
        batch: B,
        dim: D,
        seqlen: L,
        width: W,
        silu: true,
        x: r.x.to_f64(),
        weight: r.w.to_f64(),
        bias: Some(r.b.to_f64()),
        seq_idx: Some(r.seq.to_i32()),
        initial_states: Some(r.init.to_f64()),
        num_slots: B,
        ..Default::default()
    };
    expect_ok_call("fwd final_states == initial_states", || fwd(&p));
    let want = oracle::forward(&prob);
    oracle::check("out", &r.out.to_f64(), &want.out, &want.out_mag, &oracle::Tol::elementwise(causal_conv1d::plan::DType::F32)).unwrap();
    assert_eq!(r.init.to_f64(), want.final_states, "aliased pool after the call");
    // Forward, packed: slots 0 and 1 written, slot 2 untouched.
    let pk = packed();
    let mut p = pk.fwd();
    p.final_states = pk.r.init.view();
    let before = pk.r.init.to_f64();
    expect_ok_call("fwd packed final_states == initial_states", || fwd(&p));
    let prob = oracle::ConvProblem {
        batch: 1,
        dim: D,
        seqlen: T,
        width: W,
        silu: true,
        x: pk.r.x.to_f64(),
        weight: pk.r.w.to_f64(),
        bias: Some(pk.r.b.to_f64()),
        initial_states: Some(before.clone()),
        cu_seqlens: Some(vec![0, 3, 3, 7]),
        state_indices: Some(vec![1, -1, 0]),
        has_initial_state: Some(vec![true, true, false]),
        num_slots: 3,
        ..Default::default()
    };
    let want = oracle::forward(&prob);
    assert_eq!(pk.r.init.to_f64(), want.final_pool_over(&before, D, K));
    // Update in place.
    let u = upd();
    let mut s = u.p();
    s.out = u.x.view();
    let prob = oracle::UpdateProblem {
        batch: B,
        dim: D,
        seqlen: S,
        width: W,
        state_len: SL,
        silu: true,
        x: u.x.to_f64(),
        weight: u.w.to_f64(),
        bias: Some(u.b.to_f64()),
        conv_state: u.state.to_f64(),
        cache_seqlens: Some(vec![5, 0]),
        conv_state_indices: Some(vec![2, 0]),
        num_slots: 3,
    };
    expect_ok_call("update out == x", || update(&s));
    let want = oracle::update(&prob);
    oracle::check("out (in x)", &u.x.to_f64(), &want.out, &want.out_mag, &oracle::Tol::elementwise(causal_conv1d::plan::DType::F32)).unwrap();
    assert_eq!(u.state.to_f64(), want.conv_state);
}

// ---------------------------------------------------------------------------------------------
// Devices and workspace
// ---------------------------------------------------------------------------------------------

/// Backend GPU with host pointers: NO_DEVICE on a build without a GPU backend (or without a
/// device), WRONG_DEVICE when a GPU is there.
#[test]
fn gpu_backend_without_device() {
    let gpu_compiled = ccv1d_backends_compiled() & (CCV1D_HAVE_CUDA | CCV1D_HAVE_ROCM) != 0;
    let mut n = 0;
    let have_device = gpu_compiled && unsafe { ccv1d_device_count(&mut n) } == CCV1D_OK && n > 0;
    let (want, field) = if have_device { (CCV1D_ERR_WRONG_DEVICE, "x") } else { (CCV1D_ERR_NO_DEVICE, "backend") };
    let r = rows();
    let u = upd();
    let mut bufs = r.all();
    bufs.extend(u.all());
    let mut p = r.fwd();
    p.backend = CCV1D_BACKEND_GPU;
    expect("fwd backend GPU", &bufs, want, field, || fwd(&p));
    let mut q = r.bwd();
    q.backend = CCV1D_BACKEND_GPU;
    expect("bwd backend GPU", &bufs, want, field, || bwd(&q));
    let mut s = u.p();
    s.backend = CCV1D_BACKEND_GPU;
    expect("update backend GPU", &bufs, want, field, || update(&s));
    if !gpu_compiled {
        let mut ptr = null_mut();
        assert_eq!(unsafe { ccv1d_malloc(&mut ptr, 16) }, CCV1D_ERR_NO_DEVICE);
        assert!(ptr.is_null());
        let mut c = -5;
        assert_eq!(unsafe { ccv1d_device_count(&mut c) }, CCV1D_ERR_NO_DEVICE);
        assert_eq!(c, -5, "device_count wrote *count although it failed");
    }
}

/// CPU: backward needs no workspace (size 0) and runs with any caller workspace, even 1 byte.
#[test]
fn cpu_workspace_is_zero_and_any_workspace_runs() {
    let r = rows();
    let mut q = r.bwd();
    let mut bytes: usize = 12345;
    expect_ok_call("workspace_size", || unsafe { ccv1d_bwd_workspace_size(&q, &mut bytes) });
    assert_eq!(bytes, 0, "the CPU backward needs no workspace");
    let mut ws = [0u8; 1];
    q.workspace = ws.as_mut_ptr() as *mut _;
    q.workspace_size = 1;
    expect_ok_call("bwd with a 1-byte workspace", || bwd(&q));
    assert!(r.dx.to_f64().iter().all(|v| v.is_finite()), "dx not written");
}

/// A caller workspace smaller than `ccv1d_bwd_workspace_size` is a GPU rule (the CPU needs
/// none): run on a GPU machine with
/// `CCV1D_TEST_BACKEND=gpu cargo test --test validation -- --ignored`.
#[test]
#[ignore = "GPU only: CCV1D_TEST_BACKEND=gpu cargo test --test validation -- --ignored"]
fn gpu_workspace_too_small() {
    assert!(on_gpu(), "set CCV1D_TEST_BACKEND=gpu: this rule is about the GPU backend");
    let mut rng = Rng::new(5);
    let c = ConvCfg::plain(4, 256, 2048, 4, causal_conv1d::plan::DType::F32, Kind::Cf, &mut rng);
    let t = ConvTensors::build(&c, &mut rng, true);
    t.upload(&c);
    let mut q = t.bwd_params(&c);
    let mut bytes = 0usize;
    expect_ok_call("workspace_size", || unsafe { ccv1d_bwd_workspace_size(&q, &mut bytes) });
    assert!(bytes > 0, "this GPU backward needs a workspace (else the rule cannot be tested here)");
    let mut ws = null_mut();
    assert_eq!(unsafe { ccv1d_malloc(&mut ws, bytes) }, CCV1D_OK);
    q.workspace = ws;
    q.workspace_size = bytes - 1;
    let st = bwd(&q);
    assert_eq!(st, CCV1D_ERR_WORKSPACE, "{}: {}", status_str(st), last_error());
    assert!(names(&last_error(), "workspace") || names(&last_error(), "workspace_size"), "{:?}", last_error());
    q.workspace_size = bytes;
    expect_ok_call("bwd with the exact workspace", || bwd(&q));
    unsafe { ccv1d_free(ws) };
}

// ---------------------------------------------------------------------------------------------
// Zero-sized problems
// ---------------------------------------------------------------------------------------------

#[test]
fn zero_sized_problems_are_ok() {
    // batch 0 / dim 0 / seqlen 0 forward: nothing to write except final = initial at L = 0.
    let r = rows();
    for (b, d, l) in [(0, D, L), (B, 0, L), (0, 0, 0)] {
        let mut p = r.fwd();
        (p.batch, p.dim, p.seqlen) = (b as i64, d as i64, l as i64);
        let before: Vec<Vec<u8>> = r.all().iter().map(|t| t.snapshot()).collect();
        expect_ok_call(&format!("fwd {b}×{d}×{l}"), || fwd(&p));
        for (i, t) in r.all().iter().enumerate() {
            assert!(t.snapshot() == before[i], "fwd {b}×{d}×{l} wrote buffer {i}");
        }
    }
    // seqlen 0 with states: final_states = initial_states.
    let mut p = r.fwd();
    p.seqlen = 0;
    expect_ok_call("fwd seqlen 0", || fwd(&p));
    assert_eq!(r.fin.to_f64(), r.init.to_f64(), "seqlen 0: final_states must equal initial_states");
    // Backward batch 0: dweight and dbias are sums over nothing: 0 (overwritten).
    let r = rows();
    let mut q = r.bwd();
    q.batch = 0;
    expect_ok_call("bwd batch 0", || bwd(&q));
    assert!(r.dw.to_f64().iter().all(|&v| v == 0.0), "bwd batch 0: dweight must be 0, got {:?}", r.dw.to_f64());
    assert!(r.db.to_f64().iter().all(|&v| v == 0.0), "bwd batch 0: dbias must be 0, got {:?}", r.db.to_f64());
    // Backward seqlen 0: dinitial_states = dfinal_states, dweight = dbias = 0.
    let r = rows();
    let mut q = r.bwd();
    q.seqlen = 0;
    expect_ok_call("bwd seqlen 0", || bwd(&q));
    assert_eq!(r.dinit.to_f64(), r.dfin.to_f64(), "seqlen 0: dinitial_states must equal dfinal_states");
    assert!(r.dw.to_f64().iter().all(|&v| v == 0.0), "bwd seqlen 0: dweight must be 0");
    // Packed, every sequence empty (cu_seqlens all 0, T = 0).
    let mut pk = packed();
    pk.cu = ints(Dt::I32, &[0, 0, 0, 0]);
    let mut p = pk.fwd();
    p.seqlen = 0;
    expect_ok_call("fwd packed T = 0", || fwd(&p));
    let fin = pk.r.fin.to_f64();
    let init = pk.r.init.to_f64();
    let per = D * K;
    // slot 1 (seq 0): its initial state; slot 0 (seq 2, has_initial_state 0): zeros; slot 2: untouched (NaN).
    assert_eq!(&fin[per..2 * per], &init[per..2 * per]);
    assert!(fin[..per].iter().all(|&v| v == 0.0), "{:?}", &fin[..per]);
    assert!(fin[2 * per..].iter().all(|v| v.is_nan()), "unused slot written");
    // Update batch 0.
    let u = upd();
    let mut s = u.p();
    s.batch = 0;
    let before: Vec<Vec<u8>> = u.all().iter().map(|t| t.snapshot()).collect();
    expect_ok_call("update batch 0", || update(&s));
    for (i, t) in u.all().iter().enumerate() {
        assert!(t.snapshot() == before[i], "update batch 0 wrote buffer {i}");
    }
}

// ---------------------------------------------------------------------------------------------
// Small API functions
// ---------------------------------------------------------------------------------------------

#[test]
fn status_strings_and_version() {
    let names_ = [
        (CCV1D_OK, "OK"),
        (CCV1D_ERR_NULL_POINTER, "NULL_POINTER"),
        (CCV1D_ERR_STRUCT_SIZE, "STRUCT_SIZE"),
        (CCV1D_ERR_DTYPE, "DTYPE"),
        (CCV1D_ERR_ACTIVATION, "ACTIVATION"),
        (CCV1D_ERR_BACKEND, "BACKEND"),
        (CCV1D_ERR_WIDTH, "WIDTH"),
        (CCV1D_ERR_DIM, "DIM"),
        (CCV1D_ERR_OVERFLOW, "OVERFLOW"),
        (CCV1D_ERR_SHAPE, "SHAPE"),
        (CCV1D_ERR_CU_SEQLENS, "CU_SEQLENS"),
        (CCV1D_ERR_OVERLAP, "OVERLAP"),
        (CCV1D_ERR_INDEX, "INDEX"),
        (CCV1D_ERR_WORKSPACE, "WORKSPACE"),
        (CCV1D_ERR_NO_DEVICE, "NO_DEVICE"),
        (CCV1D_ERR_WRONG_DEVICE, "WRONG_DEVICE"),
        (CCV1D_ERR_DEVICE, "DEVICE"),
        (CCV1D_ERR_OUT_OF_MEMORY, "OUT_OF_MEMORY"),
        (CCV1D_ERR_INTERNAL, "INTERNAL"),
        (-1, "UNKNOWN_STATUS"),
        (14, "UNKNOWN_STATUS"),
    ];
    for (s, n) in names_ {
        assert_eq!(status_str(s), n);
    }
    let v = unsafe { std::ffi::CStr::from_ptr(ccv1d_version()) }.to_str().unwrap();
    assert_eq!(v, env!("CARGO_PKG_VERSION"));
    assert!(ccv1d_backends_compiled() & CCV1D_HAVE_CPU != 0);
}

/// The last error is per thread and cleared by the next successful call.
#[test]
fn last_error_is_cleared_by_success_and_thread_local() {
    let r = rows();
    let mut p = r.fwd();
    p.width = 0;
    assert_eq!(fwd(&p), CCV1D_ERR_WIDTH);
    assert!(!last_error().is_empty());
    std::thread::spawn(|| assert_eq!(last_error(), "", "another thread sees this thread's error")).join().unwrap();
    let mut bytes = 0usize;
    expect_ok_call("workspace_size", || unsafe { ccv1d_bwd_workspace_size(&r.bwd(), &mut bytes) });
    assert_eq!(last_error(), "", "a successful call must clear the last error");
}

/// AUTO with host pointers runs on the CPU.
#[test]
fn auto_backend_on_host_memory_runs() {
    let r = rows();
    let mut p = r.fwd();
    p.backend = CCV1D_BACKEND_AUTO;
    expect_ok_call("fwd AUTO on host memory", || fwd(&p));
    assert!(r.out.to_f64().iter().all(|v| v.is_finite()));
}
