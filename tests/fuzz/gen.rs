//! Random calls: a valid base (tiny shapes, every optional tensor sometimes, all of them inside
//! the arena) and mutations of any field, some of which fix the status the library must return.

use causal_conv1d::error::*;
use causal_conv1d::harness::Rng;
use causal_conv1d::params::*;

use crate::arena::Arena;
use crate::model::elem_size;

#[derive(Clone, Copy)]
pub enum Call {
    Fwd(ccv1d_fwd_params),
    Bwd(ccv1d_bwd_params),
    /// `ccv1d_bwd_workspace_size(params, bytes)`.
    WsSize(ccv1d_bwd_params, usize),
    Update(ccv1d_update_params),
}

/// What a case expects beyond the invariants.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Expect {
    /// This exact status.
    Status(ccv1d_status),
    /// Decided by the model (index contents) after mutation.
    Model,
    /// Any status the invariants allow.
    Any,
}

fn floats(rng: &mut Rng) -> i32 {
    rng.pick(&[CCV1D_DTYPE_F32, CCV1D_DTYPE_F16, CCV1D_DTYPE_BF16])
}

/// Strides for logical `dims`: a random memory order, sometimes padded.
fn strides(rng: &mut Rng, dims: &[i64]) -> [i64; 3] {
    let mut order: Vec<usize> = (0..dims.len()).collect();
    rng.shuffle(&mut order);
    let mut s = [0i64; 3];
    let mut step = if rng.chance(0.15) { 2 } else { 1 };
    for &i in order.iter().rev() {
        s[i] = step;
        step *= dims[i].max(1) + if rng.chance(0.15) { 1 } else { 0 };
    }
    for v in s.iter_mut().skip(dims.len()) {
        *v = rng.pick(&[0, 1, -7, i64::MAX]); // unused entries: anything
    }
    s
}

/// A tensor of `dims` placed in the arena (None when the arena is full).
fn place(rng: &mut Rng, a: &mut Arena, dims: &[i64], dtype: i32) -> Option<ccv1d_tensor> {
    let stride = strides(rng, dims);
    let elem = elem_size(dtype).unwrap();
    let numel: i64 = dims.iter().product();
    let last: i64 = dims.iter().zip(&stride).map(|(&n, &s)| (n - 1).max(0) * s).sum();
    let bytes = if numel == 0 { rng.below(2) * elem } else { (last as usize + 1) * elem };
    let misalign = if elem > 1 && rng.chance(0.05) { 1 } else { 0 };
    let addr = a.alloc(rng, bytes, elem, misalign)?;
    Some(ccv1d_tensor { data: addr as *mut _, dtype, stride })
}

/// Write int32 (or, for dtype BOOL, one-byte) values into a placed 1-D/2-D index tensor.
pub fn fill_index(a: &mut Arena, t: &ccv1d_tensor, dims: &[i64], vals: &[i32]) {
    let mut k = 0;
    let (n0, n1) = (dims[0], if dims.len() > 1 { dims[1] } else { 1 });
    let elem = elem_size(t.dtype).unwrap();
    for i in 0..n0 {
        for j in 0..n1 {
            let off = i * if n0 > 1 { t.stride[0] } else { 0 } + j * if n1 > 1 { t.stride[1] } else { 0 };
            let addr = t.data as usize + off as usize * elem;
            let v = vals[k % vals.len().max(1)];
            if elem == 1 {
                a.write(addr, &[v as u8]);
            } else {
                a.write(addr, &v.to_ne_bytes());
            }
            k += 1;
        }
    }
}

fn some_dim(rng: &mut Rng, hi: i64) -> i64 {
    if rng.chance(0.1) {
        0
    } else {
        1 + rng.below(hi as usize) as i64
    }
}

/// Cumulative lengths of `n` sequences summing to `total`.
fn cu_values(rng: &mut Rng, n: i64, total: i64) -> Vec<i32> {
    let mut cuts: Vec<i32> = (0..n - 1).map(|_| rng.below(total as usize + 1) as i32).collect();
    cuts.sort();
    let mut v = vec![0];
    v.extend(cuts);
    if n > 0 {
        v.push(total as i32);
    }
    v
}

/// The fields forward and backward share, placed; None when the arena is full.
struct Conv {
    backend: i32,
    act: i32,
    b: i64,
    d: i64,
    l: i64,
    w: i64,
    xdt: i32,
    x: ccv1d_tensor,
    weight: ccv1d_tensor,
    bias: ccv1d_tensor,
    seq_idx: ccv1d_tensor,
    cu: ccv1d_tensor,
    si: ccv1d_tensor,
    hi: ccv1d_tensor,
    init: ccv1d_tensor,
    num_seqs: i64,
    slots: i64,
    /// Slot count the states are laid out for.
    nslots: i64,
}

fn conv(rng: &mut Rng, a: &mut Arena, want_init: bool) -> Option<Conv> {
    let none = ccv1d_tensor::default();
    let packed = rng.chance(0.4);
    let (b, d, w) = (if packed { 1 } else { some_dim(rng, 3) }, some_dim(rng, 5), 1 + rng.below(8) as i64);
    let n = if packed { rng.below(5) as i64 } else { b };
    // Packed: cu_seqlens[num_seqs] = seqlen, so no sequences means no tokens.
    let l = if rng.chance(0.1) || n == 0 { 0 } else { rng.below(12) as i64 };
    let xdt = floats(rng);
    let x = place(rng, a, &[b, d, l], xdt)?;
    let weight = { let dt = floats(rng); place(rng, a, &[d, w], dt)? };
    let bias = if rng.chance(0.5) { { let dt = floats(rng); place(rng, a, &[d], dt)? } } else { none };
    let mut c = Conv {
        backend: if rng.chance(0.7) { CCV1D_BACKEND_CPU } else { CCV1D_BACKEND_AUTO },
        act: rng.pick(&[CCV1D_ACT_NONE, CCV1D_ACT_SILU]),
        b,
        d,
        l,
        w,
        xdt,
        x,
        weight,
        bias,
        seq_idx: none,
        cu: none,
        si: none,
        hi: none,
        init: none,
        num_seqs: rng.pick(&[0, -5, i64::MAX]), // ignored without cu_seqlens
        slots: 0,
        nslots: 0,
    };
    if packed {
        c.num_seqs = n;
        c.cu = place(rng, a, &[n + 1], CCV1D_DTYPE_I32)?;
        fill_index(a, &c.cu, &[n + 1], &cu_values(rng, n, l));
    } else if rng.chance(0.3) {
        c.seq_idx = place(rng, a, &[b, l], CCV1D_DTYPE_I32)?;
        let ids: Vec<i32> = (0..(b * l).max(1)).map(|_| rng.range(0, 3) as i32 - 1).collect();
        fill_index(a, &c.seq_idx, &[b, l], &ids);
    }
    c.nslots = n;
    if rng.chance(0.4) {
        c.slots = 1 + rng.below(5) as i64;
        c.nslots = c.slots;
        c.si = place(rng, a, &[n], CCV1D_DTYPE_I32)?;
        let v: Vec<i32> = (0..n.max(1)).map(|_| rng.below(c.slots as usize + 1) as i32 - 1).collect();
        fill_index(a, &c.si, &[n], &v);
    } else if rng.chance(0.3) {
        c.slots = n + rng.below(3) as i64;
        c.nslots = if c.slots == 0 { n } else { c.slots };
    }
    if rng.chance(0.3) {
        let dt = rng.pick(&[CCV1D_DTYPE_I32, CCV1D_DTYPE_BOOL]);
        c.hi = place(rng, a, &[n], dt)?;
        let v: Vec<i32> = (0..n.max(1)).map(|_| rng.pick(&[0, 1, 7, -1])).collect();
        fill_index(a, &c.hi, &[n], &v);
    }
    if want_init {
        c.init = place(rng, a, &[c.nslots, d, w - 1], xdt)?;
    }
    Some(c)
}

pub fn fwd(rng: &mut Rng, a: &mut Arena) -> Option<ccv1d_fwd_params> {
    let want_init = rng.chance(0.4);
    let c = conv(rng, a, want_init)?;
    let out = place(rng, a, &[c.b, c.d, c.l], c.xdt)?;
    let none = ccv1d_tensor::default();
    let final_states = if !c.init.data.is_null() && rng.chance(0.3) {
        c.init
    } else if rng.chance(0.4) {
        place(rng, a, &[c.nslots, c.d, c.w - 1], c.xdt)?
    } else {
        none
    };
    Some(ccv1d_fwd_params {
        struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
        backend: c.backend,
        activation: c.act,
        batch: c.b,
        dim: c.d,
        seqlen: c.l,
        width: c.w,
        x: c.x,
        weight: c.weight,
        bias: c.bias,
        out,
        seq_idx: c.seq_idx,
        initial_states: c.init,
        final_states,
        cu_seqlens: c.cu,
        state_indices: c.si,
        has_initial_state: c.hi,
        num_seqs: c.num_seqs,
        num_state_slots: c.slots,
    })
}

pub fn bwd(rng: &mut Rng, a: &mut Arena) -> Option<ccv1d_bwd_params> {
    let want_init = rng.chance(0.4);
    let c = conv(rng, a, want_init)?;
    let none = ccv1d_tensor::default();
    let st = [c.nslots, c.d, c.w - 1];
    let dout = place(rng, a, &[c.b, c.d, c.l], c.xdt)?;
    let dfinal_states = if rng.chance(0.4) { place(rng, a, &st, c.xdt)? } else { none };
    let dx = place(rng, a, &[c.b, c.d, c.l], c.xdt)?;
    let dweight = { let dt = floats(rng); place(rng, a, &[c.d, c.w], dt)? };
    let dbias = if !c.bias.data.is_null() && rng.chance(0.6) { { let dt = floats(rng); place(rng, a, &[c.d], dt)? } } else { none };
    let dinitial_states = if !c.init.data.is_null() && rng.chance(0.6) { place(rng, a, &st, c.xdt)? } else { none };
    let (workspace, workspace_size) = match rng.below(3) {
        0 => (std::ptr::null_mut(), 0),
        1 => (a.alloc(rng, 64, 16, 0)? as *mut _, rng.below(65)),
        _ => (std::ptr::null_mut(), rng.next_u64() as usize),
    };
    Some(ccv1d_bwd_params {
        struct_size: std::mem::size_of::<ccv1d_bwd_params>() as u32,
        backend: c.backend,
        activation: c.act,
        batch: c.b,
        dim: c.d,
        seqlen: c.l,
        width: c.w,
        x: c.x,
        weight: c.weight,
        bias: c.bias,
        seq_idx: c.seq_idx,
        initial_states: c.init,
        cu_seqlens: c.cu,
        state_indices: c.si,
        has_initial_state: c.hi,
        num_seqs: c.num_seqs,
        num_state_slots: c.slots,
        dout,
        dfinal_states,
        dx,
        dweight,
        dbias,
        dinitial_states,
        workspace,
        workspace_size,
        nondeterministic: rng.pick(&[0, 1, -3]),
    })
}

pub fn update(rng: &mut Rng, a: &mut Arena) -> Option<ccv1d_update_params> {
    let none = ccv1d_tensor::default();
    let (b, d, s, w) = (some_dim(rng, 3), some_dim(rng, 5), 1 + rng.below(4) as i64, 1 + rng.below(8) as i64);
    let state_len = w - 1 + rng.below(4) as i64;
    let xdt = floats(rng);
    let x = place(rng, a, &[b, d, s], xdt)?;
    let weight = { let dt = floats(rng); place(rng, a, &[d, w], dt)? };
    let bias = if rng.chance(0.5) { { let dt = floats(rng); place(rng, a, &[d], dt)? } } else { none };
    let out = if rng.chance(0.2) { x } else { place(rng, a, &[b, d, s], xdt)? };
    let (mut slots, mut csi) = (0, none);
    if rng.chance(0.4) {
        slots = 1 + rng.below(4) as i64;
        csi = place(rng, a, &[b], CCV1D_DTYPE_I32)?;
        let v: Vec<i32> = (0..b.max(1)).map(|_| rng.below(slots as usize + 1) as i32 - 1).collect();
        fill_index(a, &csi, &[b], &v);
    } else if rng.chance(0.3) {
        slots = b + rng.below(3) as i64;
    }
    let nslots = if slots == 0 { b } else { slots };
    let conv_state = place(rng, a, &[nslots, d, state_len], xdt)?;
    let cache_seqlens = if rng.chance(0.3) {
        let t = place(rng, a, &[b], CCV1D_DTYPE_I32)?;
        let v: Vec<i32> = (0..b.max(1)).map(|_| rng.range(0, 40) as i32 - 20).collect();
        fill_index(a, &t, &[b], &v);
        t
    } else {
        none
    };
    Some(ccv1d_update_params {
        struct_size: std::mem::size_of::<ccv1d_update_params>() as u32,
        backend: if rng.chance(0.7) { CCV1D_BACKEND_CPU } else { CCV1D_BACKEND_AUTO },
        activation: rng.pick(&[CCV1D_ACT_NONE, CCV1D_ACT_SILU]),
        batch: b,
        dim: d,
        seqlen: s,
        width: w,
        state_len,
        num_state_slots: slots,
        x,
        weight,
        bias,
        out,
        conv_state,
        cache_seqlens,
        conv_state_indices: csi,
    })
}

/// The scalar fields common to every call: (struct_size, backend, activation).
pub fn header(c: &mut Call) -> (&mut u32, &mut i32, &mut i32) {
    match c {
        Call::Fwd(p) => (&mut p.struct_size, &mut p.backend, &mut p.activation),
        Call::Bwd(p) | Call::WsSize(p, _) => (&mut p.struct_size, &mut p.backend, &mut p.activation),
        Call::Update(p) => (&mut p.struct_size, &mut p.backend, &mut p.activation),
    }
}

/// Dim fields by name.
pub fn dims(c: &mut Call) -> Vec<(&'static str, &mut i64)> {
    match c {
        Call::Fwd(p) => vec![
            ("batch", &mut p.batch),
            ("dim", &mut p.dim),
            ("seqlen", &mut p.seqlen),
            ("width", &mut p.width),
            ("num_seqs", &mut p.num_seqs),
            ("num_state_slots", &mut p.num_state_slots),
        ],
        Call::Bwd(p) | Call::WsSize(p, _) => vec![
            ("batch", &mut p.batch),
            ("dim", &mut p.dim),
            ("seqlen", &mut p.seqlen),
            ("width", &mut p.width),
            ("num_seqs", &mut p.num_seqs),
            ("num_state_slots", &mut p.num_state_slots),
        ],
        Call::Update(p) => vec![
            ("batch", &mut p.batch),
            ("dim", &mut p.dim),
            ("seqlen", &mut p.seqlen),
            ("width", &mut p.width),
            ("state_len", &mut p.state_len),
            ("num_state_slots", &mut p.num_state_slots),
        ],
    }
}

/// Tensor fields by name, and whether each one is required.
pub fn tensors(c: &mut Call) -> Vec<(&'static str, &mut ccv1d_tensor, bool)> {
    match c {
        Call::Fwd(p) => vec![
            ("x", &mut p.x, true),
            ("weight", &mut p.weight, true),
            ("bias", &mut p.bias, false),
            ("out", &mut p.out, true),
            ("seq_idx", &mut p.seq_idx, false),
            ("initial_states", &mut p.initial_states, false),
            ("final_states", &mut p.final_states, false),
            ("cu_seqlens", &mut p.cu_seqlens, false),
            ("state_indices", &mut p.state_indices, false),
            ("has_initial_state", &mut p.has_initial_state, false),
        ],
        Call::Bwd(p) | Call::WsSize(p, _) => vec![
            ("x", &mut p.x, true),
            ("weight", &mut p.weight, true),
            ("bias", &mut p.bias, false),
            ("seq_idx", &mut p.seq_idx, false),
            ("initial_states", &mut p.initial_states, false),
            ("cu_seqlens", &mut p.cu_seqlens, false),
            ("state_indices", &mut p.state_indices, false),
            ("has_initial_state", &mut p.has_initial_state, false),
            ("dout", &mut p.dout, true),
            ("dfinal_states", &mut p.dfinal_states, false),
            ("dx", &mut p.dx, true),
            ("dweight", &mut p.dweight, true),
            ("dbias", &mut p.dbias, false),
            ("dinitial_states", &mut p.dinitial_states, false),
        ],
        Call::Update(p) => vec![
            ("x", &mut p.x, true),
            ("weight", &mut p.weight, true),
            ("bias", &mut p.bias, false),
            ("out", &mut p.out, true),
            ("conv_state", &mut p.conv_state, true),
            ("cache_seqlens", &mut p.cache_seqlens, false),
            ("conv_state_indices", &mut p.conv_state_indices, false),
        ],
    }
}

const EXTREME: [i64; 12] = [0, 1, 2, -1, -2, i64::MIN, i64::MAX, i64::MAX / 2 + 1, 1 << 31, 1 << 32, 1 << 62, 3];

/// Apply one random mutation; returns what it alone implies for the status of a valid call.
pub fn mutate(rng: &mut Rng, a: &mut Arena, c: &mut Call, nodev: bool) -> Expect {
    match rng.below(10) {
        0 => {
            let (size, _, _) = header(c);
            let old = *size;
            let r = rng.next_u64() as u32;
            *size = rng.pick(&[0, 1, 4, old - 8, old - 1, old + 1, old + 8, u32::MAX, r]);
            if *size == old { Expect::Status(CCV1D_OK) } else { Expect::Status(CCV1D_ERR_STRUCT_SIZE) }
        }
        1 => {
            let (_, backend, _) = header(c);
            *backend = rng.pick(&[-1, 3, 2, 1, 0, i32::MIN, i32::MAX, 100]);
            match *backend {
                0 | 1 => Expect::Status(CCV1D_OK),
                2 if nodev => Expect::Status(CCV1D_ERR_NO_DEVICE),
                2 => Expect::Any,
                _ => Expect::Status(CCV1D_ERR_BACKEND),
            }
        }
        2 => {
            let (_, _, act) = header(c);
            *act = rng.pick(&[-1, 2, 0, 1, i32::MIN, i32::MAX]);
            if matches!(*act, 0 | 1) { Expect::Status(CCV1D_OK) } else { Expect::Status(CCV1D_ERR_ACTIVATION) }
        }
        3 => {
            let mut ds = dims(c);
            let i = rng.below(ds.len());
            let (name, v) = &mut ds[i];
            let new = if rng.chance(0.5) { rng.pick(&EXTREME) } else { rng.below(10) as i64 };
            **v = new;
            match *name {
                "width" if !(1..=8).contains(&new) => Expect::Status(CCV1D_ERR_WIDTH),
                "batch" | "dim" | "seqlen" | "state_len" | "num_state_slots" if new < 0 => Expect::Status(CCV1D_ERR_DIM),
                _ => Expect::Any,
            }
        }
        4 => {
            // A pointer: NULL, another tensor's, a random place in the arena, or one byte off.
            let addrs: Vec<usize> = tensors(c).iter().map(|t| t.1.data as usize).filter(|&p| p != 0).collect();
            let mut ts = tensors(c);
            let i = rng.below(ts.len());
            let (_, t, req) = &mut ts[i];
            let (lo, hi) = a.inner();
            match rng.below(4) {
                0 => {
                    let was_present = !t.data.is_null();
                    t.data = std::ptr::null_mut();
                    return if *req { Expect::Status(CCV1D_ERR_NULL_POINTER) } else if was_present { Expect::Any } else { Expect::Status(CCV1D_OK) };
                }
                1 if !addrs.is_empty() => t.data = rng.pick(&addrs) as *mut _,
                2 => t.data = (lo + rng.below(hi - lo)) as *mut _,
                _ if !t.data.is_null() => t.data = (t.data as usize + 1) as *mut _,
                _ => {}
            }
            Expect::Any
        }
        5 => {
            let mut ts = tensors(c);
            let i = rng.below(ts.len());
            let (_, t, _) = &mut ts[i];
            t.dtype = rng.pick(&[-1, 0, 1, 2, 3, 4, 5, 6, 1000, i32::MIN]);
            if t.data.is_null() { Expect::Status(CCV1D_OK) } else { Expect::Any }
        }
        6 => {
            let mut ts = tensors(c);
            let i = rng.below(ts.len());
            let (_, t, _) = &mut ts[i];
            let j = rng.below(3);
            t.stride[j] = if rng.chance(0.5) { rng.pick(&EXTREME) } else { rng.below(64) as i64 };
            Expect::Any
        }
        7 => {
            // Random index contents (valid or not): the model decides.
            let names = ["cu_seqlens", "state_indices", "conv_state_indices", "seq_idx", "has_initial_state", "cache_seqlens"];
            let picked = tensors(c).into_iter().filter(|t| names.contains(&t.0) && !t.1.data.is_null()).map(|t| (t.0, *t.1)).collect::<Vec<_>>();
            if picked.is_empty() {
                return Expect::Status(CCV1D_OK);
            }
            let (name, t) = rng.pick(&picked);
            let described = crate::describe(c);
            let decl = described.decls.iter().find(|d| d.name == name).unwrap();
            let n = &decl.dims[..decl.ndim];
            let (lo, hi) = a.inner();
            match crate::model::extent(decl) {
                Ok(Some((b, e))) if b >= lo && e <= hi && crate::model::numel(decl) <= 4096 => {}
                _ => return Expect::Any, // earlier mutations made it too big to fill
            }
            let pool = [0, 1, 2, 3, 4, 5, 11, -1, -2, i32::MAX, i32::MIN];
            let vals: Vec<i32> = (0..n.iter().product::<i64>().max(1)).map(|_| rng.pick(&pool)).collect();
            fill_index(a, &t, n, &vals);
            Expect::Model
        }
        8 => {
            if let Call::Bwd(p) | Call::WsSize(p, _) = c {
                let (lo, hi) = a.inner();
                let (inside, r) = (lo + rng.below(hi - lo), rng.next_u64() as usize);
                p.workspace = rng.pick(&[0, inside, 16, usize::MAX]) as *mut _;
                p.workspace_size = rng.pick(&[0, 1, usize::MAX, r]);
                p.nondeterministic = rng.next_u64() as i32;
                // The CPU backend needs no workspace and never touches it.
                return Expect::Status(CCV1D_OK);
            }
            Expect::Status(CCV1D_OK)
        }
        _ => {
            // Negative stride on a dim that is used.
            let described = crate::describe(c);
            let cands: Vec<(usize, usize)> = described
                .decls
                .iter()
                .enumerate()
                .flat_map(|(k, d)| (0..d.ndim).filter(move |&j| d.present() && d.dims[j] > 1).map(move |j| (k, j)))
                .collect();
            if cands.is_empty() {
                return Expect::Status(CCV1D_OK);
            }
            let (k, j) = rng.pick(&cands);
            let name = described.decls[k].name;
            let mut ts = tensors(c);
            let t = ts.iter_mut().find(|t| t.0 == name).unwrap();
            t.1.stride[j] = rng.pick(&[-1, -2, i64::MIN, -(1 << 40)]);
            Expect::Status(CCV1D_ERR_SHAPE)
        }
    }
}
