//! The test harness shared by the integration tests (`tests/common` re-exports it) and by the
//! `ccv1d test` command: a tiny RNG, host/device tensors of any dtype and layout (guard zones,
//! NaN poison), and the builders that run one forward / backward / update case through the C ABI
//! and compare every output with the f64 oracle (`crate::oracle`).
//!
//! Not part of the C API and not a stable Rust API: it lives in the library only so that the
//! tests and the `ccv1d` binary use one harness, not two.
//!
//! Backend: every params struct the harness builds carries [`backend_code`]: the value given to
//! [`set_backend`] (what `ccv1d --backend` does), else `CCV1D_TEST_BACKEND=cpu|gpu` from the
//! environment (the tests' knob), else cpu. With the GPU backend every tensor is device memory
//! (`ccv1d_malloc` / `ccv1d_memcpy`) with a host mirror.

mod cases;
mod check;
mod rng;
mod seeds;
mod tensor;

pub use cases::*;
pub use check::*;
pub use rng::*;
pub use seeds::*;
pub use tensor::*;

use std::ffi::CStr;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::capi;
use crate::error::CCV1D_OK;
use crate::params::{CCV1D_BACKEND_CPU, CCV1D_BACKEND_GPU};

/// Backend chosen with `set_backend`; -1 = not set (use the environment).
static BACKEND: AtomicI32 = AtomicI32::new(-1);

/// Use this backend code (`CCV1D_BACKEND_CPU` or `CCV1D_BACKEND_GPU`) for every harness call from
/// now on, whatever the environment says. Set it before creating tensors.
pub fn set_backend(code: i32) {
    assert!(code == CCV1D_BACKEND_CPU || code == CCV1D_BACKEND_GPU, "set_backend: cpu or gpu");
    BACKEND.store(code, Ordering::Relaxed);
}

/// Backend code for every call: [`set_backend`]'s, else `CCV1D_TEST_BACKEND=cpu|gpu`
/// (default cpu).
pub fn backend_code() -> i32 {
    let b = BACKEND.load(Ordering::Relaxed);
    if b >= 0 {
        return b;
    }
    match std::env::var("CCV1D_TEST_BACKEND").as_deref() {
        Err(_) | Ok("") | Ok("cpu") => CCV1D_BACKEND_CPU,
        Ok("gpu") => CCV1D_BACKEND_GPU,
        Ok(o) => panic!("CCV1D_TEST_BACKEND={o:?}: expected cpu or gpu"),
    }
}

pub fn on_gpu() -> bool {
    backend_code() == CCV1D_BACKEND_GPU
}

/// `ccv1d_last_error()` of this thread.
pub fn last_error() -> String {
    unsafe { CStr::from_ptr(capi::ccv1d_last_error()) }.to_string_lossy().into_owned()
}

/// `ccv1d_status_string(s)`.
pub fn status_str(s: i32) -> String {
    unsafe { CStr::from_ptr(capi::ccv1d_status_string(s)) }.to_string_lossy().into_owned()
}

/// OK, or an error naming the status and the library's message. On the GPU also synchronizes.
pub fn expect_ok(st: i32, what: &str) -> Result<(), String> {
    if st != CCV1D_OK {
        return Err(format!("{what} returned {} ({st}): {}", status_str(st), last_error()));
    }
    if on_gpu() {
        let s = unsafe { capi::ccv1d_synchronize(std::ptr::null_mut()) };
        if s != CCV1D_OK {
            return Err(format!("{what}: synchronize returned {}: {}", status_str(s), last_error()));
        }
    }
    Ok(())
}
