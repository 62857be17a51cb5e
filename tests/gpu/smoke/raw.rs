//! A few CUDA driver calls of the smoke test's own (dlopen'd separately from the library), to
//! play the part of a framework: make a context current, create a stream, capture a graph, and
//! launch a kernel directly for a baseline.

use std::ffi::{c_void, CString};

macro_rules! raw_api {
    ($($f:ident: fn($($a:ty),*);)*) => {
        #[allow(non_snake_case)]
        pub struct Raw { $(pub $f: unsafe extern "C" fn($($a),*) -> i32,)* }
        impl Raw {
            pub fn load() -> Option<Raw> {
                let lib = CString::new("libcuda.so.1").unwrap();
                // SAFETY: dlopen/dlsym with valid C strings; signatures below are the CUDA driver API's.
                unsafe {
                    let h = libc::dlopen(lib.as_ptr(), libc::RTLD_NOW);
                    if h.is_null() { return None; }
                    Some(Raw { $($f: {
                        let n = CString::new(stringify!($f)).unwrap();
                        let p = libc::dlsym(h, n.as_ptr());
                        if p.is_null() { return None; }
                        std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($a),*) -> i32>(p)
                    },)* })
                }
            }
        }
    };
}

raw_api! {
    cuCtxGetCurrent: fn(*mut usize);
    cuCtxSetCurrent: fn(usize);
    cuDevicePrimaryCtxRetain: fn(*mut usize, i32);
    cuModuleLoadData: fn(*mut usize, *const c_void);
    cuModuleGetFunction: fn(*mut usize, usize, *const i8);
    cuLaunchKernel: fn(usize, u32, u32, u32, u32, u32, u32, u32, usize, *mut *mut c_void, *mut *mut c_void);
    cuCtxSynchronize: fn();
    cuStreamCreate: fn(*mut usize, u32);
    cuStreamDestroy_v2: fn(usize);
    cuStreamBeginCapture_v2: fn(usize, i32);
    cuStreamEndCapture: fn(usize, *mut usize);
    cuGraphInstantiateWithFlags: fn(*mut usize, usize, u64);
    cuGraphLaunch: fn(usize, usize);
    cuGraphExecDestroy: fn(usize);
    cuGraphDestroy: fn(usize);
}

/// Panics with the call and its code when a raw call fails (a test-harness failure).
pub fn ok(r: i32, what: &str) {
    assert_eq!(r, 0, "raw CUDA call {what} failed with {r}");
}

impl Raw {
    pub fn current(&self) -> usize {
        let mut c = 0;
        // SAFETY: valid out-pointer.
        unsafe { (self.cuCtxGetCurrent)(&mut c) };
        c
    }
}
