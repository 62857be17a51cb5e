//! The fuzzer's own reading of docs/semantics.md: which tensors a call declares, their logical
//! dims, the bytes each view covers, and the rules that make a call certainly invalid. Used to
//! decide whether a generated call is safe to make (the library cannot know buffer sizes), which
//! bytes a successful call may write, and when it must fail.

use causal_conv1d::params::*;

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Role {
    /// Read only.
    In,
    /// Written on success (only its elements' bytes).
    Out,
    /// An int32 index tensor the CPU backend reads during validation.
    HostIndex,
}

/// Which dtype codes a tensor accepts.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    /// Any float dtype.
    Float,
    /// x's dtype.
    LikeX,
    Int32,
    Int32OrBool,
}

#[derive(Clone, Copy, Debug)]
pub struct Decl {
    pub name: &'static str,
    pub t: ccv1d_tensor,
    pub dims: [i64; 3],
    pub ndim: usize,
    pub role: Role,
    pub kind: Kind,
}

impl Decl {
    fn new(name: &'static str, t: ccv1d_tensor, dims: &[i64], role: Role, kind: Kind) -> Decl {
        let mut d = [1i64; 3];
        d[..dims.len()].copy_from_slice(dims);
        Decl { name, t, dims: d, ndim: dims.len(), role, kind }
    }
    pub fn present(&self) -> bool {
        !self.t.data.is_null()
    }
}

pub fn elem_size(code: i32) -> Option<usize> {
    match code {
        CCV1D_DTYPE_F32 | CCV1D_DTYPE_I32 => Some(4),
        CCV1D_DTYPE_F16 | CCV1D_DTYPE_BF16 => Some(2),
        CCV1D_DTYPE_BOOL => Some(1),
        _ => None,
    }
}

/// The bytes a view covers: `Ok(None)` for an empty view, `Err(())` when its dims/strides are
/// invalid (negative dim, negative stride on a dim > 1, or int64 overflow: the library must
/// reject the call).
pub fn extent(d: &Decl) -> Result<Option<(usize, usize)>, ()> {
    let elem = elem_size(d.t.dtype).ok_or(())? as i128;
    let mut numel: i64 = 1;
    let mut last: i64 = 0;
    for i in 0..d.ndim {
        let n = d.dims[i];
        if n < 0 {
            return Err(());
        }
        numel = numel.checked_mul(n).ok_or(())?;
        if n > 1 {
            let s = d.t.stride[i];
            if s < 0 {
                return Err(());
            }
            last = (n - 1).checked_mul(s).and_then(|o| o.checked_add(last)).ok_or(())?;
        }
    }
    if numel == 0 {
        return Ok(None);
    }
    let bytes = (last as i128 + 1) * elem;
    let lo = d.t.data as usize as i128;
    if bytes > i64::MAX as i128 || lo + bytes > usize::MAX as i128 {
        return Err(());
    }
    Ok(Some((lo as usize, (lo + bytes) as usize)))
}

pub fn numel(d: &Decl) -> i128 {
    d.dims[..d.ndim].iter().map(|&n| n.max(0) as i128).product()
}

/// Every element's byte range of a view whose extent is valid.
pub fn element_bytes(d: &Decl, mut f: impl FnMut(usize, usize)) {
    let elem = elem_size(d.t.dtype).unwrap();
    let n = d.dims;
    let s = d.t.stride;
    for i in 0..n[0] {
        for j in 0..if d.ndim > 1 { n[1] } else { 1 } {
            for k in 0..if d.ndim > 2 { n[2] } else { 1 } {
                let mut off = i * if n[0] > 1 { s[0] } else { 0 };
                if d.ndim > 1 && n[1] > 1 {
                    off += j * s[1];
                }
                if d.ndim > 2 && n[2] > 1 {
                    off += k * s[2];
                }
                let a = d.t.data as usize + off as usize * elem;
                f(a, a + elem);
            }
        }
    }
}

/// A call's scalar fields and tensors, in one shape for all three ops.
pub struct Described {
    pub decls: Vec<Decl>,
    /// A rule outside the tensors' own extents that certainly rejects the call.
    pub scalar_invalid: bool,
    /// Elements of compute the call asks for (to keep accepted calls small).
    pub work: i128,
}

fn conv_scalars(backend: i32, act: i32, b: i64, d: i64, l: i64, w: i64, slots: i64) -> bool {
    !matches!(backend, CCV1D_BACKEND_AUTO | CCV1D_BACKEND_CPU)
        || !matches!(act, CCV1D_ACT_NONE | CCV1D_ACT_SILU)
        || !(1..=8).contains(&w)
        || b < 0
        || d < 0
        || l < 0
        || slots < 0
        || [b, d, l].iter().try_fold(1i64, |a, &v| a.checked_mul(v)).is_none()
}

/// What forward and backward share (the same field names in both structs): the scalar rules,
/// the input declarations in order, and the work estimate.
struct Conv {
    bad: bool,
    decls: Vec<Decl>,
    x: [i64; 3],
    st: [i64; 3],
    work: i128,
}

macro_rules! conv_common {
    ($p:expr, $ty:ty) => {{
        let p = $p;
        let (b, d, l, w) = (p.batch, p.dim, p.seqlen, p.width);
        let packed = !p.cu_seqlens.data.is_null();
        let n = if packed { p.num_seqs } else { b };
        let slots = if p.num_state_slots == 0 { n } else { p.num_state_slots };
        let x = [b, d, l];
        let st = [slots, d, w - 1];
        let mut bad = p.struct_size as usize != std::mem::size_of::<$ty>()
            || conv_scalars(p.backend, p.activation, b, d, l, w, p.num_state_slots)
            || p.x.data.is_null()
            || p.weight.data.is_null();
        bad |= packed && (b != 1 || n < 0 || !p.seq_idx.data.is_null());
        bad |= p.state_indices.data.is_null() && slots < n;
        use Kind::*;
        use Role::*;
        let decls = vec![
            Decl::new("x", p.x, &x, In, Float),
            Decl::new("weight", p.weight, &[d, w], In, Float),
            Decl::new("bias", p.bias, &[d], In, Float),
            Decl::new("seq_idx", p.seq_idx, &[b, l], In, Int32),
            Decl::new("cu_seqlens", p.cu_seqlens, &[n.saturating_add(1)], HostIndex, Int32),
            Decl::new("state_indices", p.state_indices, &[n], HostIndex, Int32),
            Decl::new("has_initial_state", p.has_initial_state, &[n], In, Int32OrBool),
            Decl::new("initial_states", p.initial_states, &st, In, LikeX),
        ];
        let work = [b, d, l.max(1)].iter().map(|&v| v.max(0) as i128).product::<i128>() + n.max(0) as i128 + slots.max(0) as i128;
        Conv { bad, decls, x, st, work }
    }};
}

pub fn fwd(p: &ccv1d_fwd_params) -> Described {
    let Conv { mut bad, mut decls, x, st, work } = conv_common!(p, ccv1d_fwd_params);
    bad |= p.out.data.is_null();
    use Kind::*;
    use Role::*;
    decls.extend([Decl::new("out", p.out, &x, Out, LikeX), Decl::new("final_states", p.final_states, &st, Out, LikeX)]);
    Described { decls, scalar_invalid: bad, work }
}

pub fn bwd(p: &ccv1d_bwd_params) -> Described {
    let Conv { mut bad, mut decls, x, st, work } = conv_common!(p, ccv1d_bwd_params);
    let (d, w) = (p.dim, p.width);
    bad |= p.dout.data.is_null() || p.dx.data.is_null() || p.dweight.data.is_null();
    bad |= !p.dbias.data.is_null() && p.bias.data.is_null();
    bad |= !p.dinitial_states.data.is_null() && p.initial_states.data.is_null();
    use Kind::*;
    use Role::*;
    decls.extend([
        Decl::new("dout", p.dout, &x, In, LikeX),
        Decl::new("dfinal_states", p.dfinal_states, &st, In, LikeX),
        Decl::new("dx", p.dx, &x, Out, LikeX),
        Decl::new("dweight", p.dweight, &[d, w], Out, Float),
        Decl::new("dbias", p.dbias, &[d], Out, Float),
        Decl::new("dinitial_states", p.dinitial_states, &st, Out, LikeX),
    ]);
    Described { decls, scalar_invalid: bad, work }
}

pub fn update(p: &ccv1d_update_params) -> Described {
    let (b, d, s, w, sl) = (p.batch, p.dim, p.seqlen, p.width, p.state_len);
    let slots = if p.num_state_slots == 0 { b } else { p.num_state_slots };
    let x = [b, d, s];
    let mut bad = p.struct_size as usize != std::mem::size_of::<ccv1d_update_params>()
        || conv_scalars(p.backend, p.activation, b, d, s, w, p.num_state_slots)
        || s == 0
        || sl < 0
        || sl < w - 1
        || [slots, d, sl].iter().try_fold(1i64, |a, &v| a.checked_mul(v)).is_none()
        || p.x.data.is_null()
        || p.weight.data.is_null()
        || p.out.data.is_null()
        || p.conv_state.data.is_null();
    bad |= p.conv_state_indices.data.is_null() && slots < b;
    use Kind::*;
    use Role::*;
    let decls = vec![
        Decl::new("x", p.x, &x, In, Float),
        Decl::new("weight", p.weight, &[d, w], In, Float),
        Decl::new("bias", p.bias, &[d], In, Float),
        Decl::new("cache_seqlens", p.cache_seqlens, &[b], In, Int32),
        Decl::new("conv_state_indices", p.conv_state_indices, &[b], HostIndex, Int32),
        Decl::new("out", p.out, &x, Out, LikeX),
        Decl::new("conv_state", p.conv_state, &[slots, d, sl], Out, LikeX),
    ];
    let work = [b, d, s.max(sl).max(1)].iter().map(|&v| v.max(0) as i128).product::<i128>() + slots.max(0) as i128;
    Described { decls, scalar_invalid: bad, work }
}

/// A present tensor whose dtype code the library must refuse.
pub fn bad_dtype(decls: &[Decl]) -> bool {
    let x = decls[0].t.dtype;
    decls.iter().filter(|d| d.present()).any(|d| match d.kind {
        Kind::Float => !matches!(d.t.dtype, CCV1D_DTYPE_F32 | CCV1D_DTYPE_F16 | CCV1D_DTYPE_BF16),
        Kind::LikeX => d.t.dtype != x || !matches!(x, CCV1D_DTYPE_F32 | CCV1D_DTYPE_F16 | CCV1D_DTYPE_BF16),
        Kind::Int32 => d.t.dtype != CCV1D_DTYPE_I32,
        Kind::Int32OrBool => !matches!(d.t.dtype, CCV1D_DTYPE_I32 | CCV1D_DTYPE_BOOL),
    })
}
