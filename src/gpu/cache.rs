//! Per-context state, created on the first call in a context and kept for the process lifetime:
//! the loaded kernel module, the functions looked up in it, the device's facts, and a
//! stream-ordered workspace pool. One global map, context → `Arc<Loaded>`, behind a mutex; each
//! entry's function table has its own mutex, so the lock on the hot path is short and uncontended
//! in practice.
//!
//! Modules and pools are never unloaded: a context reset (`cuDevicePrimaryCtxReset`) or a user
//! context destroyed while this library holds its module is not supported.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};

use super::driver::{CtxKey, Driver, Scope};
use super::launch::{DeviceInfo, Launch};
use crate::error::*;

/// A kernel function of a loaded module, and what was checked or configured for it.
struct Func {
    handle: usize,
    /// Dynamic shared memory the function has been allowed (CUDA opt-in above 48 KiB).
    shared_allowed: u32,
    /// Size of its first parameter as the driver reports it (None: the driver cannot tell).
    param_size: Option<usize>,
}

pub(crate) struct Loaded {
    pub info: DeviceInfo,
    /// Our stream-ordered pool on this device (None: use the default pool).
    pub pool: Option<usize>,
    module: usize,
    funcs: Mutex<HashMap<String, Func>>,
}

/// Key: the context, and the image's address (the embedded image, or a test's).
type Key = (CtxKey, usize);

fn map() -> &'static Mutex<HashMap<Key, Arc<Loaded>>> {
    static MAP: OnceLock<Mutex<HashMap<Key, Arc<Loaded>>>> = OnceLock::new();
    MAP.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Device facts by (vendor, ordinal): they do not depend on the context.
pub(crate) fn device_info(drv: &dyn Driver, device: i32) -> Result<DeviceInfo> {
    static INFO: OnceLock<Mutex<HashMap<(u8, i32), DeviceInfo>>> = OnceLock::new();
    let key = (drv.vendor() as u8, device);
    let infos = INFO.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(i) = infos.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(*i);
    }
    let i = drv.device_info(device)?;
    infos.lock().unwrap_or_else(|e| e.into_inner()).insert(key, i);
    Ok(i)
}

/// The state of the context `scope` made current, loading `image` into it on first use.
/// A failed load is not cached (the next call tries again and reports the same error).
pub(crate) fn loaded(drv: &dyn Driver, scope: &Scope, image: &'static [u8]) -> Result<Arc<Loaded>> {
    let key = (scope.key, image.as_ptr() as usize);
    let mut m = map().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = m.get(&key) {
        return Ok(l.clone());
    }
    // First call in this context: load while holding the lock (once per context and image).
    let info = device_info(drv, scope.device)?;
    let module = drv.module_load(image)?;
    let pool = drv.pool_create(scope.device);
    let l = Arc::new(Loaded { info, pool, module, funcs: Mutex::new(HashMap::new()) });
    m.insert(key, l.clone());
    Ok(l)
}

impl Loaded {
    /// The function for `l.kernel`, configured for `l` (dynamic shared memory) and checked
    /// against it (parameter size). A kernel the module lacks is a library bug: INTERNAL.
    pub fn function(&self, drv: &dyn Driver, l: &Launch) -> Result<usize> {
        let mut funcs = self.funcs.lock().unwrap_or_else(|e| e.into_inner());
        if !funcs.contains_key(l.kernel.as_str()) {
            let Ok(name) = CString::new(l.kernel.as_str()) else {
                bail!(CCV1D_ERR_INTERNAL, "kernel name {:?} contains a NUL byte", l.kernel)
            };
            let Some(handle) = drv.module_function(self.module, &name)? else {
                bail!(
                    CCV1D_ERR_INTERNAL,
                    "kernel {} is not in this build's {} image (kernel selection and build disagree)",
                    l.kernel,
                    drv.api()
                )
            };
            let param_size = drv.param_size(handle);
            funcs.insert(l.kernel.clone(), Func { handle, shared_allowed: 48 * 1024, param_size });
        }
        let f = funcs.get_mut(l.kernel.as_str()).expect("inserted above");
        if let Some(n) = f.param_size {
            // Fewer bytes than the kernel reads would be an over-read; trailing padding is harmless.
            if l.params.len() < n {
                bail!(
                    CCV1D_ERR_INTERNAL,
                    "kernel {} takes a {n}-byte parameter block but the launch passes {} bytes (hip/kparams.h and the Rust side disagree)",
                    l.kernel,
                    l.params.len()
                );
            }
        }
        if l.shared_mem_bytes > f.shared_allowed {
            if l.shared_mem_bytes > self.info.max_shared_mem_per_block {
                bail!(
                    CCV1D_ERR_INTERNAL,
                    "kernel {} asks for {} bytes of shared memory; the device allows {}",
                    l.kernel,
                    l.shared_mem_bytes,
                    self.info.max_shared_mem_per_block
                );
            }
            drv.set_max_dynamic_shared(f.handle, l.shared_mem_bytes)?;
            f.shared_allowed = l.shared_mem_bytes;
        }
        Ok(f.handle)
    }
}
