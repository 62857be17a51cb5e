//! Status codes (stable numbers, part of the ABI) and the thread-local last-error message.

use std::cell::RefCell;
use std::ffi::CString;

/// Status returned by every `ccv1d_*` call. The numbers never change meaning.
#[allow(non_camel_case_types)]
pub type ccv1d_status = i32;

pub const CCV1D_OK: ccv1d_status = 0;
/// A required pointer (params struct, tensor data, output argument) is NULL.
pub const CCV1D_ERR_NULL_POINTER: ccv1d_status = 1;
/// `struct_size` is not a size this library version knows.
pub const CCV1D_ERR_STRUCT_SIZE: ccv1d_status = 2;
/// Unknown dtype code, or a dtype not allowed for that tensor.
pub const CCV1D_ERR_DTYPE: ccv1d_status = 3;
/// Unknown activation code.
pub const CCV1D_ERR_ACTIVATION: ccv1d_status = 4;
/// Unknown backend code.
pub const CCV1D_ERR_BACKEND: ccv1d_status = 5;
/// Width outside 1..=8.
pub const CCV1D_ERR_WIDTH: ccv1d_status = 6;
/// A negative dimension (or zero where at least one is required).
pub const CCV1D_ERR_DIM: ccv1d_status = 7;
/// Dims or strides whose products overflow int64.
pub const CCV1D_ERR_OVERFLOW: ccv1d_status = 8;
/// Tensors or dims that disagree with each other (or an option that needs another one).
pub const CCV1D_ERR_SHAPE: ccv1d_status = 9;
/// `cu_seqlens` does not start at 0, decreases, or does not end at seqlen.
pub const CCV1D_ERR_CU_SEQLENS: ccv1d_status = 10;
/// An output overlaps an input or another output where the op cannot allow it.
pub const CCV1D_ERR_OVERLAP: ccv1d_status = 11;
/// A host-readable index (state slot) is out of range.
pub const CCV1D_ERR_INDEX: ccv1d_status = 12;
/// The caller's workspace is smaller than `ccv1d_bwd_workspace_size` asked for.
pub const CCV1D_ERR_WORKSPACE: ccv1d_status = 13;
/// No GPU backend compiled in, no driver, or no device.
pub const CCV1D_ERR_NO_DEVICE: ccv1d_status = 20;
/// A pointer is on the host where device memory is needed, or on another device.
pub const CCV1D_ERR_WRONG_DEVICE: ccv1d_status = 21;
/// The GPU driver reported an error (launch failure, fault, bad stream).
pub const CCV1D_ERR_DEVICE: ccv1d_status = 22;
/// A memory allocation failed.
pub const CCV1D_ERR_OUT_OF_MEMORY: ccv1d_status = 23;
/// A bug in the library (a caught panic). Please report it.
pub const CCV1D_ERR_INTERNAL: ccv1d_status = 99;

/// An error inside the library: a status and a message naming what is wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{msg}")]
pub struct Error {
    pub status: ccv1d_status,
    pub msg: String,
}

impl Error {
    pub fn new(status: ccv1d_status, msg: impl Into<String>) -> Self {
        Error { status, msg: msg.into() }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// `return Err(Error::new(status, format!(..)))` in one line.
#[macro_export]
macro_rules! bail {
    ($status:expr, $($fmt:tt)*) => {
        return Err($crate::error::Error::new($status, format!($($fmt)*)))
    };
}

/// Static NUL-terminated name of a status ("OK", "DTYPE", ...).
pub fn status_name(s: ccv1d_status) -> &'static std::ffi::CStr {
    match s {
        CCV1D_OK => c"OK",
        CCV1D_ERR_NULL_POINTER => c"NULL_POINTER",
        CCV1D_ERR_STRUCT_SIZE => c"STRUCT_SIZE",
        CCV1D_ERR_DTYPE => c"DTYPE",
        CCV1D_ERR_ACTIVATION => c"ACTIVATION",
        CCV1D_ERR_BACKEND => c"BACKEND",
        CCV1D_ERR_WIDTH => c"WIDTH",
        CCV1D_ERR_DIM => c"DIM",
        CCV1D_ERR_OVERFLOW => c"OVERFLOW",
        CCV1D_ERR_SHAPE => c"SHAPE",
        CCV1D_ERR_CU_SEQLENS => c"CU_SEQLENS",
        CCV1D_ERR_OVERLAP => c"OVERLAP",
        CCV1D_ERR_INDEX => c"INDEX",
        CCV1D_ERR_WORKSPACE => c"WORKSPACE",
        CCV1D_ERR_NO_DEVICE => c"NO_DEVICE",
        CCV1D_ERR_WRONG_DEVICE => c"WRONG_DEVICE",
        CCV1D_ERR_DEVICE => c"DEVICE",
        CCV1D_ERR_OUT_OF_MEMORY => c"OUT_OF_MEMORY",
        CCV1D_ERR_INTERNAL => c"INTERNAL",
        _ => c"UNKNOWN_STATUS",
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Store `msg` as this thread's last error (interior NULs are replaced).
pub fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

pub fn clear_last_error() {
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::default());
}

/// Pointer to this thread's last message; valid until the next `ccv1d_*` call on this thread.
pub fn last_error_ptr() -> *const std::ffi::c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}
