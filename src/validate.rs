//! The only place that checks anything: public params → a plan backends can trust.
//!
//! Order of checks: params pointer, struct_size, codes (backend, activation), width, dims,
//! each tensor (presence, dtype, strides, int64 offsets), shape agreement between tensors,
//! host-readable index contents (CPU backend only), overlaps. The first failure wins; nothing is
//! written before all of them pass.

use crate::error::*;
use crate::params::*;
use crate::plan::*;

/// Read a params struct after checking its pointer and `struct_size`.
unsafe fn read_params<T: Copy>(p: *const T, what: &str) -> Result<T> {
    if p.is_null() {
        bail!(CCV1D_ERR_NULL_POINTER, "{what} is NULL");
    }
    // struct_size is the first field of every params struct; read it before the rest so a
    // caller with a smaller (older or foreign) struct is never read past its end.
    let size = std::ptr::read_unaligned(p as *const u32);
    let known = std::mem::size_of::<T>();
    if size as usize != known {
        bail!(
            CCV1D_ERR_STRUCT_SIZE,
            "{what}.struct_size is {size}, this library (v{}) knows only {known} (sizeof({what}))",
            env!("CARGO_PKG_VERSION")
        );
    }
    Ok(std::ptr::read_unaligned(p))
}

fn backend_code(code: i32, x_addr: usize) -> Result<Backend> {
    match code {
        CCV1D_BACKEND_CPU => Ok(Backend::Cpu),
        CCV1D_BACKEND_GPU => {
            if crate::gpu::compiled_backends() == 0 {
                bail!(CCV1D_ERR_NO_DEVICE, "backend: GPU requested but this build has no GPU backend (CPU-only build)");
            }
            match crate::gpu::device_count() {
                Ok(n) if n > 0 => Ok(Backend::Gpu),
                Ok(_) => bail!(CCV1D_ERR_NO_DEVICE, "backend: GPU requested but the driver reports no device"),
                Err(e) => bail!(CCV1D_ERR_NO_DEVICE, "backend: GPU requested but {}", e.msg),
            }
        }
        CCV1D_BACKEND_AUTO => Ok(if crate::gpu::is_device_pointer(x_addr) { Backend::Gpu } else { Backend::Cpu }),
        _ => bail!(CCV1D_ERR_BACKEND, "backend: unknown code {code} (expected 0=AUTO, 1=CPU, 2=GPU)"),
    }
}

fn activation_code(code: i32) -> Result<Act> {
    match code {
        CCV1D_ACT_NONE => Ok(Act::None),
        CCV1D_ACT_SILU => Ok(Act::Silu),
        _ => bail!(CCV1D_ERR_ACTIVATION, "activation: unknown code {code} (expected 0=NONE, 1=SILU)"),
    }
}

fn width_value(w: i64) -> Result<i64> {
    if !(1..=8).contains(&w) {
        bail!(CCV1D_ERR_WIDTH, "width is {w}, must be 1..=8");
    }
    Ok(w)
}

fn dim_value(v: i64, name: &str) -> Result<i64> {
    if v < 0 {
        bail!(CCV1D_ERR_DIM, "{name} is negative ({v})");
    }
    Ok(v)
}

fn float_dtype(code: i32, name: &str) -> Result<DType> {
    match code {
        CCV1D_DTYPE_F32 => Ok(DType::F32),
        CCV1D_DTYPE_F16 => Ok(DType::F16),
        CCV1D_DTYPE_BF16 => Ok(DType::BF16),
        _ => bail!(CCV1D_ERR_DTYPE, "{name}.dtype: code {code} is not a float dtype (1=F32, 2=F16, 3=BF16)"),
    }
}

/// The memory a view touches, for overlap checks: address, element size, dims and strides.
#[derive(Clone, Copy)]
struct Span {
    name: &'static str,
    addr: usize,
    elem: usize,
    n: [i64; 3],
    stride: [i64; 3],
    /// Byte range [lo, hi) relative to nothing (absolute), empty when the view has no elements.
    lo: i128,
    hi: i128,
}

impl Span {
    fn empty(&self) -> bool {
        self.hi <= self.lo
    }
    fn same_memory_as(&self, o: &Span) -> bool {
        self.addr == o.addr && self.elem == o.elem && self.n == o.n && self.eff_stride() == o.eff_stride()
    }
    /// Strides with those of size-≤1 dims zeroed (they are never used).
    fn eff_stride(&self) -> [i64; 3] {
        let mut s = self.stride;
        for i in 0..3 {
            if self.n[i] <= 1 {
                s[i] = 0;
            }
        }
        s
    }
}

/// Check one tensor view: presence, strides non-negative, offsets within int64 and the address
/// space. `dims` are its logical dims (1 to 3).
fn span(t: &ccv1d_tensor, name: &'static str, dims: &[i64], elem: usize) -> Result<Span> {
    let mut n = [1i64; 3];
    let mut stride = [0i64; 3];
    let mut max_off: i64 = 0;
    let mut numel: i64 = 1;
    for (i, &d) in dims.iter().enumerate() {
        n[i] = d;
        stride[i] = t.stride[i];
        numel = numel
            .checked_mul(d)
            .ok_or_else(|| Error::new(CCV1D_ERR_OVERFLOW, format!("{name}: element count overflows int64")))?;
        if d > 1 {
            let s = t.stride[i];
            if s < 0 {
                bail!(CCV1D_ERR_SHAPE, "{name}.stride[{i}] is negative ({s}); negative strides are not supported");
            }
            let off = (d - 1)
                .checked_mul(s)
                .and_then(|o| o.checked_add(max_off))
                .ok_or_else(|| Error::new(CCV1D_ERR_OVERFLOW, format!("{name}: offset of the last element overflows int64 (dim {i} = {d}, stride {s})")))?;
            max_off = off;
        }
    }
    let addr = t.data as usize;
    let (lo, hi) = if numel == 0 {
        (0, 0)
    } else {
        let bytes = (max_off as i128 + 1) * elem as i128;
        if bytes > i64::MAX as i128 || addr as i128 + bytes > usize::MAX as i128 {
            bail!(CCV1D_ERR_OVERFLOW, "{name}: byte extent ({bytes}) overflows the address space");
        }
        (addr as i128, addr as i128 + bytes)
    };
    Ok(Span { name, addr, elem, n, stride, lo, hi })
}

/// Can `a` and `b` touch a common byte? Exact when both views share element size and the
/// strides of each other, otherwise conservative (byte ranges intersect).
fn overlaps(a: &Span, b: &Span) -> bool {
    if a.empty() || b.empty() || a.hi <= b.lo || b.hi <= a.lo {
        return false;
    }
    if a.elem != b.elem || a.n != b.n || a.eff_stride() != b.eff_stride() {
        return true;
    }
    let delta = b.addr as i128 - a.addr as i128;
    if delta % a.elem as i128 != 0 {
        return true;
    }
    // Same layout shifted by `delta` elements: overlap iff delta = Σ k_i·s_i with |k_i| < n_i.
    let mut dims: Vec<(i128, i128)> = (0..3)
        .filter(|&i| a.n[i] > 1 && a.eff_stride()[i] > 0)
        .map(|i| (a.eff_stride()[i] as i128, a.n[i] as i128 - 1))
        .collect();
    dims.sort_by(|x, y| y.0.cmp(&x.0));
    representable(delta / a.elem as i128, &dims).unwrap_or(true)
}

/// Is `rem` = Σ k_i·s_i with |k_i| ≤ m_i (dims sorted by stride, largest first)? `None` when the
/// strides are too interleaved for the two-candidate search to be exhaustive.
fn representable(rem: i128, dims: &[(i128, i128)]) -> Option<bool> {
    let Some((&(s, m), lower)) = dims.split_first() else {
        return Some(rem == 0);
    };
    let reach: i128 = lower.iter().map(|&(s, m)| s * m).sum();
    if reach >= s {
        return None;
    }
    // |remainder after this dim| ≤ reach < s, so k is floor or ceil of rem/s.
    let f = rem.div_euclid(s);
    let mut any_unknown = false;
    for k in [f, f + 1] {
        if k.abs() > m || (rem - k * s).abs() > reach {
            continue;
        }
        match representable(rem - k * s, lower) {
            Some(true) => return Some(true),
            None => any_unknown = true,
            Some(false) => {}
        }
    }
    if any_unknown {
        None
    } else {
        Some(false)
    }
}

/// Reject overlaps: every output against every input and every other output, except the
/// exact aliases listed in `allowed` (pairs of names).
fn check_overlaps(outputs: &[Span], inputs: &[Span], allowed: &[(&str, &str)]) -> Result<()> {
    let ok = |a: &Span, b: &Span| {
        allowed.iter().any(|&(x, y)| (a.name == x && b.name == y) || (a.name == y && b.name == x)) && a.same_memory_as(b)
    };
    for (i, o) in outputs.iter().enumerate() {
        for other in inputs.iter().chain(&outputs[i + 1..]) {
            if overlaps(o, other) && !ok(o, other) {
                let how = if allowed.iter().any(|&(x, y)| (o.name == x && other.name == y) || (o.name == y && other.name == x)) {
                    " (only exact aliasing — same pointer and strides — is allowed for these two)"
                } else {
                    ""
                };
                bail!(CCV1D_ERR_OVERLAP, "{} overlaps {} in memory{how}", o.name, other.name);
            }
        }
    }
    Ok(())
}

fn required(t: &ccv1d_tensor, name: &str) -> Result<()> {
    if t.data.is_null() {
        bail!(CCV1D_ERR_NULL_POINTER, "{name}.data is NULL");
    }
    Ok(())
}

fn present(t: &ccv1d_tensor) -> bool {
    !t.data.is_null()
}

/// A float tensor whose dtype must equal `want` (when given).
fn float_tensor(t: &ccv1d_tensor, name: &'static str, dims: &[i64], want: Option<DType>, spans: &mut Vec<Span>) -> Result<View> {
    let dt = float_dtype(t.dtype, name)?;
    if let Some(w) = want {
        if dt != w {
            bail!(CCV1D_ERR_DTYPE, "{name}.dtype is {} but must equal x's dtype ({})", dt.name(), w.name());
        }
    }
    spans.push(span(t, name, dims, dt.size())?);
    Ok(View { addr: t.data as usize, dtype: dt, stride: t.stride })
}

fn opt_float(t: &ccv1d_tensor, name: &'static str, dims: &[i64], want: Option<DType>, spans: &mut Vec<Span>) -> Result<Option<View>> {
    if present(t) {
        float_tensor(t, name, dims, want, spans).map(Some)
    } else {
        Ok(None)
    }
}

/// An int32 index tensor (or, with `allow_bool`, a 1-byte bool tensor).
fn opt_index(t: &ccv1d_tensor, name: &'static str, dims: &[i64], allow_bool: bool, spans: &mut Vec<Span>) -> Result<Option<IdxView>> {
    if !present(t) {
        return Ok(None);
    }
    let elem_bytes = match t.dtype {
        CCV1D_DTYPE_I32 => 4u8,
        CCV1D_DTYPE_BOOL if allow_bool => 1u8,
        c if allow_bool => bail!(CCV1D_ERR_DTYPE, "{name}.dtype: code {c} must be 4=I32 or 5=BOOL"),
        c => bail!(CCV1D_ERR_DTYPE, "{name}.dtype: code {c} must be 4=I32"),
    };
    spans.push(span(t, name, dims, elem_bytes as usize)?);
    Ok(Some(IdxView { addr: t.data as usize, stride: [t.stride[0], t.stride[1]], elem_bytes }))
}

/// Element `i` of a host-readable 1-D int32 view.
unsafe fn read_i32(v: &IdxView, i: i64) -> i32 {
    std::ptr::read_unaligned((v.addr as *const i32).offset((i * v.stride[0]) as isize))
}

fn total(dims: &[i64], what: &str) -> Result<i64> {
    dims.iter()
        .try_fold(1i64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Error::new(CCV1D_ERR_OVERFLOW, format!("{what}: product of dims overflows int64")))
}

/// The fields forward and backward share, as they appear in both params structs.
struct ConvFields<'a> {
    backend: i32,
    activation: i32,
    batch: i64,
    dim: i64,
    seqlen: i64,
    width: i64,
    x: &'a ccv1d_tensor,
    weight: &'a ccv1d_tensor,
    bias: &'a ccv1d_tensor,
    seq_idx: &'a ccv1d_tensor,
    initial_states: &'a ccv1d_tensor,
    cu_seqlens: &'a ccv1d_tensor,
    state_indices: &'a ccv1d_tensor,
    has_initial_state: &'a ccv1d_tensor,
    num_seqs: i64,
    num_state_slots: i64,
}

/// The shared fields of `ccv1d_fwd_params` / `ccv1d_bwd_params` (same names in both).
macro_rules! conv_fields {
    ($p:ident) => {
        ConvFields {
            backend: $p.backend,
            activation: $p.activation,
            batch: $p.batch,
            dim: $p.dim,
            seqlen: $p.seqlen,
            width: $p.width,
            x: &$p.x,
            weight: &$p.weight,
            bias: &$p.bias,
            seq_idx: &$p.seq_idx,
            initial_states: &$p.initial_states,
            cu_seqlens: &$p.cu_seqlens,
            state_indices: &$p.state_indices,
            has_initial_state: &$p.has_initial_state,
            num_seqs: $p.num_seqs,
            num_state_slots: $p.num_state_slots,
        }
    };
}

/// Validate the shared inputs; push their spans (all inputs) into `spans`.
unsafe fn conv_inputs(f: &ConvFields, stream: usize, spans: &mut Vec<Span>) -> Result<ConvInputs> {
    let act = activation_code(f.activation)?;
    let width = width_value(f.width)?;
    let batch = dim_value(f.batch, "batch")?;
    let dim = dim_value(f.dim, "dim")?;
    let seqlen = dim_value(f.seqlen, "seqlen")?;
    total(&[batch, dim, seqlen], "batch*dim*seqlen")?;
    required(f.x, "x")?;
    required(f.weight, "weight")?;
    let backend = backend_code(f.backend, f.x.data as usize)?;

    let x = float_tensor(f.x, "x", &[batch, dim, seqlen], None, spans)?;
    let weight = float_tensor(f.weight, "weight", &[dim, width], None, spans)?;
    let bias = opt_float(f.bias, "bias", &[dim], None, spans)?;

    let packed = present(f.cu_seqlens);
    let seqs_n = if packed {
        if batch != 1 {
            bail!(CCV1D_ERR_SHAPE, "cu_seqlens needs batch == 1 (packed sequences), got batch = {batch}");
        }
        if present(f.seq_idx) {
            bail!(CCV1D_ERR_SHAPE, "seq_idx cannot be combined with cu_seqlens (both describe sequence boundaries)");
        }
        dim_value(f.num_seqs, "num_seqs")?
    } else {
        batch
    };
    let seq_idx = opt_index(f.seq_idx, "seq_idx", &[batch, seqlen], false, spans)?;
    // num_seqs + 1 entries: checked, or INT64_MAX wraps to a 1-element view that the content
    // checks below would then read num_seqs entries past.
    let cu_len = if packed {
        seqs_n
            .checked_add(1)
            .ok_or_else(|| Error::new(CCV1D_ERR_OVERFLOW, format!("cu_seqlens: num_seqs + 1 overflows int64 (num_seqs = {seqs_n})")))?
    } else {
        0 // absent: not checked
    };
    let cu = opt_index(f.cu_seqlens, "cu_seqlens", &[cu_len], false, spans)?;
    let state_indices = opt_index(f.state_indices, "state_indices", &[seqs_n], false, spans)?;
    let has_initial_state = opt_index(f.has_initial_state, "has_initial_state", &[seqs_n], true, spans)?;

    let slots = dim_value(f.num_state_slots, "num_state_slots")?;
    let num_slots = if slots == 0 { seqs_n } else { slots };
    if state_indices.is_none() && num_slots < seqs_n {
        bail!(
            CCV1D_ERR_SHAPE,
            "num_state_slots ({num_slots}) is smaller than the number of sequences ({seqs_n}) and no state_indices map sequences to slots"
        );
    }
    let initial_states = opt_float(f.initial_states, "initial_states", &[num_slots, dim, width - 1], Some(x.dtype), spans)?;

    let seqs = match cu {
        Some(cu_seqlens) => Seqs::Packed { cu_seqlens, num_seqs: seqs_n },
        None => Seqs::Rows,
    };

    if backend == Backend::Cpu {
        // Host-readable: check index contents now (the GPU path gives defined results instead).
        if let Some(cu) = cu.as_ref() {
            let first = read_i32(cu, 0);
            if first != 0 {
                bail!(CCV1D_ERR_CU_SEQLENS, "cu_seqlens[0] is {first}, must be 0");
            }
            for i in 0..seqs_n {
                let (a, b) = (read_i32(cu, i), read_i32(cu, i + 1));
                if b < a {
                    bail!(CCV1D_ERR_CU_SEQLENS, "cu_seqlens decreases at index {} ({a} → {b})", i + 1);
                }
            }
            let last = read_i32(cu, seqs_n) as i64;
            if last != seqlen {
                bail!(CCV1D_ERR_CU_SEQLENS, "cu_seqlens[num_seqs] is {last}, must equal seqlen ({seqlen})");
            }
        }
        if let Some(si) = state_indices.as_ref() {
            for i in 0..seqs_n {
                let s = read_i32(si, i) as i64;
                if s >= num_slots {
                    bail!(CCV1D_ERR_INDEX, "state_indices[{i}] is {s}, out of range for num_state_slots = {num_slots}");
                }
            }
        }
    }

    Ok(ConvInputs {
        backend,
        stream,
        batch,
        dim,
        seqlen,
        width,
        act,
        x,
        weight,
        bias,
        seq_idx,
        initial_states,
        seqs,
        pool: StatePool { state_indices, has_initial_state, num_slots },
    })
}

/// Validate a forward call.
pub unsafe fn fwd(p: *const ccv1d_fwd_params, stream: usize) -> Result<FwdPlan> {
    let p = read_params(p, "ccv1d_fwd_params")?;
    let fields = conv_fields!(p);
    let mut inputs = Vec::new();
    let inp = conv_inputs(&fields, stream, &mut inputs)?;
    let mut outputs = Vec::new();
    required(&p.out, "out")?;
    let xdims = [inp.batch, inp.dim, inp.seqlen];
    let out = float_tensor(&p.out, "out", &xdims, Some(inp.x.dtype), &mut outputs)?;
    let state_dims = [inp.pool.num_slots, inp.dim, inp.width - 1];
    let final_states = opt_float(&p.final_states, "final_states", &state_dims, Some(inp.x.dtype), &mut outputs)?;
    check_overlaps(&outputs, &inputs, &[("final_states", "initial_states")])?;
    Ok(FwdPlan { inp, out, final_states })
}

/// Validate a backward call.
pub unsafe fn bwd(p: *const ccv1d_bwd_params, stream: usize) -> Result<BwdPlan> {
    let p = read_params(p, "ccv1d_bwd_params")?;
    let fields = conv_fields!(p);
    let mut inputs = Vec::new();
    let inp = conv_inputs(&fields, stream, &mut inputs)?;
    let xdims = [inp.batch, inp.dim, inp.seqlen];
    let state_dims = [inp.pool.num_slots, inp.dim, inp.width - 1];
    let xt = Some(inp.x.dtype);
    required(&p.dout, "dout")?;
    let dout = float_tensor(&p.dout, "dout", &xdims, xt, &mut inputs)?;
    let dfinal_states = opt_float(&p.dfinal_states, "dfinal_states", &state_dims, xt, &mut inputs)?;

    let mut outputs = Vec::new();
    required(&p.dx, "dx")?;
    required(&p.dweight, "dweight")?;
    let dx = float_tensor(&p.dx, "dx", &xdims, xt, &mut outputs)?;
    let dweight = float_tensor(&p.dweight, "dweight", &[inp.dim, inp.width], None, &mut outputs)?;
    if present(&p.dbias) && inp.bias.is_none() {
        bail!(CCV1D_ERR_SHAPE, "dbias is given but bias is NULL (no bias, no gradient)");
    }
    let dbias = opt_float(&p.dbias, "dbias", &[inp.dim], None, &mut outputs)?;
    if present(&p.dinitial_states) && inp.initial_states.is_none() {
        bail!(CCV1D_ERR_SHAPE, "dinitial_states is given but initial_states is NULL");
    }
    let dinitial_states = opt_float(&p.dinitial_states, "dinitial_states", &state_dims, xt, &mut outputs)?;
    check_overlaps(&outputs, &inputs, &[])?;
    let workspace = if p.workspace.is_null() { None } else { Some((p.workspace as usize, p.workspace_size)) };
    Ok(BwdPlan {
        inp,
        dout,
        dfinal_states,
        dx,
        dweight,
        dbias,
        dinitial_states,
        workspace,
        deterministic: p.nondeterministic == 0,
    })
}

/// Validate params for `ccv1d_bwd_workspace_size` (the same rules as a backward call).
pub unsafe fn bwd_for_workspace(p: *const ccv1d_bwd_params) -> Result<BwdPlan> {
    bwd(p, 0)
}

/// Validate a decode update call.
pub unsafe fn update(p: *const ccv1d_update_params, stream: usize) -> Result<UpdatePlan> {
    let p = read_params(p, "ccv1d_update_params")?;
    let act = activation_code(p.activation)?;
    let width = width_value(p.width)?;
    let batch = dim_value(p.batch, "batch")?;
    let dim = dim_value(p.dim, "dim")?;
    let seqlen = dim_value(p.seqlen, "seqlen")?;
    if seqlen == 0 {
        bail!(CCV1D_ERR_DIM, "seqlen is 0: an update needs at least one new token");
    }
    let state_len = dim_value(p.state_len, "state_len")?;
    if state_len < width - 1 {
        bail!(CCV1D_ERR_SHAPE, "state_len ({state_len}) must be ≥ width-1 ({})", width - 1);
    }
    let slots = dim_value(p.num_state_slots, "num_state_slots")?;
    let num_slots = if slots == 0 { batch } else { slots };
    total(&[batch, dim, seqlen], "batch*dim*seqlen")?;
    total(&[num_slots, dim, state_len], "num_state_slots*dim*state_len")?;
    required(&p.x, "x")?;
    required(&p.weight, "weight")?;
    required(&p.out, "out")?;
    required(&p.conv_state, "conv_state")?;
    let backend = backend_code(p.backend, p.x.data as usize)?;

    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    let xdims = [batch, dim, seqlen];
    let x = float_tensor(&p.x, "x", &xdims, None, &mut inputs)?;
    let weight = float_tensor(&p.weight, "weight", &[dim, width], None, &mut inputs)?;
    let bias = opt_float(&p.bias, "bias", &[dim], None, &mut inputs)?;
    let cache_seqlens = opt_index(&p.cache_seqlens, "cache_seqlens", &[batch], false, &mut inputs)?;
    let conv_state_indices = opt_index(&p.conv_state_indices, "conv_state_indices", &[batch], false, &mut inputs)?;
    let out = float_tensor(&p.out, "out", &xdims, Some(x.dtype), &mut outputs)?;
    let conv_state = float_tensor(&p.conv_state, "conv_state", &[num_slots, dim, state_len], Some(x.dtype), &mut outputs)?;
    if conv_state_indices.is_none() && num_slots < batch {
        bail!(CCV1D_ERR_SHAPE, "num_state_slots ({num_slots}) < batch ({batch}) and no conv_state_indices map rows to slots");
    }
    check_overlaps(&outputs, &inputs, &[("out", "x")])?;
    if backend == Backend::Cpu {
        if let Some(ci) = conv_state_indices.as_ref() {
            for b in 0..batch {
                let s = read_i32(ci, b) as i64;
                if s >= num_slots {
                    bail!(CCV1D_ERR_INDEX, "conv_state_indices[{b}] is {s}, out of range for num_state_slots = {num_slots}");
                }
            }
        }
    }
    Ok(UpdatePlan {
        backend,
        stream,
        batch,
        dim,
        seqlen,
        width,
        state_len,
        num_slots,
        act,
        x,
        weight,
        bias,
        out,
        conv_state,
        cache_seqlens,
        conv_state_indices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(name: &'static str, addr: usize, n: [i64; 3], stride: [i64; 3]) -> Span {
        let t = ccv1d_tensor { data: addr as *mut _, dtype: CCV1D_DTYPE_F32, stride };
        span(&t, name, &n, 4).unwrap()
    }

    #[test]
    fn interleaved_slices_of_one_buffer_do_not_overlap() {
        // x = xz[:, :D, :], out = xz[:, D:, :] of a [B, 2D, L] buffer.
        let (b, d, l) = (3i64, 5i64, 7i64);
        let st = [2 * d * l, l, 1];
        let x = sp("x", 4096, [b, d, l], st);
        let out = sp("out", 4096 + (d * l * 4) as usize, [b, d, l], st);
        assert!(!overlaps(&x, &out));
        // Shifted by one element: they share elements.
        let out2 = sp("out", 4096 + 4, [b, d, l], st);
        assert!(overlaps(&x, &out2));
        // Channel-last even/odd channel split: [B, L, 2D] with channel stride 2.
        let st = [2 * d * l, 1 * 2, 2 * d];
        let even = sp("x", 8192, [b, d, l], [st[0], 2, 2 * d]);
        let odd = sp("out", 8196, [b, d, l], [st[0], 2, 2 * d]);
        assert!(!overlaps(&even, &odd));
    }

    #[test]
    fn disjoint_and_identical_ranges() {
        let a = sp("a", 1000, [1, 1, 10], [10, 10, 1]);
        let b = sp("b", 1040, [1, 1, 10], [10, 10, 1]);
        assert!(!overlaps(&a, &b));
        let c = sp("c", 1036, [1, 1, 10], [10, 10, 1]);
        assert!(overlaps(&a, &c));
        assert!(overlaps(&a, &a));
    }
}
