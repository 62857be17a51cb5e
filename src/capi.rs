//! Every `extern "C"` function, written out. Each body is: null checks, then one panic boundary
//! around validate → dispatch. Outputs (including out-parameters) are written only on success.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::*;
use crate::params::*;
use crate::plan::Backend;
use crate::{cpu, gpu, validate};

/// Run `f` inside the panic boundary; record the message of a failure as the thread's last error.
fn boundary(f: impl FnOnce() -> Result<()>) -> ccv1d_status {
    clear_last_error();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => CCV1D_OK,
        Ok(Err(e)) => {
            set_last_error(&e.msg);
            e.status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("internal error (please report): {what}"));
            CCV1D_ERR_INTERNAL
        }
    }
}

fn non_null<T>(p: *const T, what: &str) -> Result<()> {
    if p.is_null() {
        bail!(CCV1D_ERR_NULL_POINTER, "{what} is NULL");
    }
    Ok(())
}

/// Forward convolution. `stream` is a `cudaStream_t`/`hipStream_t` (NULL = default stream);
/// ignored by the CPU backend.
#[no_mangle]
pub unsafe extern "C" fn ccv1d_fwd(params: *const ccv1d_fwd_params, stream: *mut c_void) -> ccv1d_status {
    boundary(|| {
        let plan = validate::fwd(params, stream as usize)?;
        match plan.inp.backend {
            Backend::Cpu => cpu::fwd(&plan),
            Backend::Gpu => gpu::fwd(&plan),
        }
    })
}

/// Backward: dx, dweight, dbias, dinitial_states.
#[no_mangle]
pub unsafe extern "C" fn ccv1d_bwd(params: *const ccv1d_bwd_params, stream: *mut c_void) -> ccv1d_status {
    boundary(|| {
        let plan = validate::bwd(params, stream as usize)?;
        match plan.inp.backend {
            Backend::Cpu => cpu::bwd(&plan),
            Backend::Gpu => gpu::bwd(&plan),
        }
    })
}

/// Bytes of workspace `ccv1d_bwd` needs for these params (0 on the CPU backend). Passing at least
/// this much in `workspace` avoids the library's pool. Written to `*bytes` on success.
#[no_mangle]
pub unsafe extern "C" fn ccv1d_bwd_workspace_size(params: *const ccv1d_bwd_params, bytes: *mut usize) -> ccv1d_status {
    boundary(|| {
        non_null(bytes, "bytes")?;
        let plan = validate::bwd_for_workspace(params)?;
        let n = match plan.inp.backend {
            Backend::Cpu => 0,
            Backend::Gpu => gpu::bwd_workspace_size(&plan)?,
        };
        *bytes = n;
        Ok(())
    })
}

/// Decode-time update of `conv_state` in place, writing `out`.
#[no_mangle]
pub unsafe extern "C" fn ccv1d_update(params: *const ccv1d_update_params, stream: *mut c_void) -> ccv1d_status {
    boundary(|| {
        let plan = validate::update(params, stream as usize)?;
        match plan.backend {
            Backend::Cpu => cpu::update(&plan),
            Backend::Gpu => gpu::update(&plan),
        }
    })
}

/// This thread's message for the last failed call (empty after a success). UTF-8, never NULL,
/// valid until the next `ccv1d_*` call on this thread.
#[no_mangle]
pub extern "C" fn ccv1d_last_error() -> *const c_char {
    last_error_ptr()
}

/// A static name for a status code ("OK", "DTYPE", ...; "UNKNOWN_STATUS" for others).
#[no_mangle]
pub extern "C" fn ccv1d_status_string(status: ccv1d_status) -> *const c_char {
    status_name(status).as_ptr()
}

/// The library version, e.g. "0.1.0".
#[no_mangle]
pub extern "C" fn ccv1d_version() -> *const c_char {
    const V: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(s) => s,
        Err(_) => panic!("version string"),
    };
    V.as_ptr()
}

/// Bit set of the backends compiled into this build (`CCV1D_HAVE_*`).
#[no_mangle]
pub extern "C" fn ccv1d_backends_compiled() -> u32 {
    CCV1D_HAVE_CPU | gpu::compiled_backends()
}

/// Number of GPUs the compiled-in GPU backend sees. NO_DEVICE when there is no GPU backend or
/// driver; `*count` is then untouched.
#[no_mangle]
pub unsafe extern "C" fn ccv1d_device_count(count: *mut c_int) -> ccv1d_status {
    boundary(|| {
        non_null(count, "count")?;
        let n = gpu::device_count()?;
        *count = n;
        Ok(())
    })
}

/// Allocate `bytes` of device memory on the current device (the calling thread's context, else
/// device 0). `*ptr` is written only on success.
#[no_mangle]
pub unsafe extern "C" fn ccv1d_malloc(ptr: *mut *mut c_void, bytes: usize) -> ccv1d_status {
    boundary(|| {
        non_null(ptr, "ptr")?;
        let p = gpu::malloc(bytes)?;
        *ptr = p as *mut c_void;
        Ok(())
    })
}

/// Free memory from `ccv1d_malloc`. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn ccv1d_free(ptr: *mut c_void) -> ccv1d_status {
    boundary(|| if ptr.is_null() { Ok(()) } else { gpu::free(ptr as usize) })
}

/// Copy `bytes` between any host/device pointers (unified addressing), ordered on `stream`.
#[no_mangle]
pub unsafe extern "C" fn ccv1d_memcpy(dst: *mut c_void, src: *const c_void, bytes: usize, stream: *mut c_void) -> ccv1d_status {
    boundary(|| {
        if bytes == 0 {
            return Ok(());
        }
        non_null(dst, "dst")?;
        non_null(src, "src")?;
        gpu::memcpy(dst as usize, src as usize, bytes, stream as usize)
    })
}

/// Wait until all work on `stream` (NULL = default stream) is done.
#[no_mangle]
pub unsafe extern "C" fn ccv1d_synchronize(stream: *mut c_void) -> ccv1d_status {
    boundary(|| gpu::synchronize(stream as usize))
}
