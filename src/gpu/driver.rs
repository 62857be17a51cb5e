//! The vendor-neutral face of the GPU driver: a `Driver` trait implemented by the CUDA driver API
//! table (`cuda.rs`) and the HIP table (`hip.rs`), both opened with `dlopen` at run time, and the
//! per-vendor registry that opens each library once.
//!
//! Nothing here is linked at build time: the cdylib needs only libc. A missing library, a driver
//! that fails to initialise, or a machine without a device all end as `NO_DEVICE` with a message.

use std::ffi::{c_void, CStr, CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

use super::launch::{DeviceInfo, Launch, Vendor};
use crate::error::*;

/// Where a pointer lives, as the driver that owns it reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mem {
    /// Device memory of this device ordinal.
    Device(i32),
    /// Managed (unified) memory; the ordinal it was allocated against, or negative when none.
    Managed(i32),
    /// Host memory known to the driver (pinned / registered).
    Host,
    /// Not known to the driver: ordinary pageable host memory, or no driver at all.
    Unknown,
}

impl Mem {
    pub fn on_device(self) -> bool {
        matches!(self, Mem::Device(_) | Mem::Managed(_))
    }
}

/// Identifies one context: the module cache is keyed by it. CUDA: the context handle plus its
/// unique id (handles of destroyed contexts can be reused); HIP: the device ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CtxKey {
    pub vendor: u8,
    pub handle: usize,
    pub id: u64,
}

/// What to undo when a `Scope` ends.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum Restore {
    #[default]
    Nothing,
    /// CUDA: pop the context we pushed.
    PopContext,
    /// HIP: set the thread's device back to this one.
    SetDevice(i32),
}

/// The right context is current on this thread while a `Scope` lives; dropping it restores the
/// thread's previous state (pops the pushed primary context, or resets the HIP device).
pub(crate) struct Scope {
    drv: &'static dyn Driver,
    pub key: CtxKey,
    /// The device of the context now current (for a caller's stream: the stream's device).
    pub device: i32,
    restore: Restore,
}

impl Scope {
    pub fn new(drv: &'static dyn Driver, key: CtxKey, device: i32, restore: Restore) -> Scope {
        Scope { drv, key, device, restore }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        self.drv.leave(std::mem::take(&mut self.restore));
    }
}

/// The operations the rest of the GPU backend needs, identical in shape for both vendors.
/// Handles (modules, functions, pools, streams) are plain integers. Every method that talks to
/// the device expects the right context to be current (a live `Scope`), except the pointer and
/// attribute queries.
pub(crate) trait Driver: Send + Sync {
    fn vendor(&self) -> Vendor;
    /// "CUDA" or "HIP", for messages.
    fn api(&self) -> &'static str;
    fn device_count(&self) -> i32;
    /// Where `addr` lives. Never faults, never prints: unknown pointers answer `Unknown`.
    fn mem(&self, addr: usize) -> Mem;
    /// The device of the calling thread's current context (HIP: current device), if any.
    fn current_device(&self) -> Option<i32>;
    /// Make the context to run on current. A caller's stream (not 0 / legacy / per-thread) decides
    /// it (its own context); otherwise the current context when it is on `device`, else
    /// `device`'s primary context (`None`: the current context, else device 0's).
    fn enter(&'static self, device: Option<i32>, stream: usize) -> Result<Scope>;
    /// Undo what `enter` did (called by `Scope::drop`).
    fn leave(&self, restore: Restore);
    fn device_info(&self, device: i32) -> Result<DeviceInfo>;
    fn module_load(&self, image: &[u8]) -> Result<usize>;
    /// `Ok(None)` when the module has no such kernel.
    fn module_function(&self, module: usize, name: &CStr) -> Result<Option<usize>>;
    /// Bytes of the function's first parameter, when the driver can tell.
    fn param_size(&self, func: usize) -> Option<usize>;
    /// Allow `bytes` of dynamic shared memory (CUDA needs an opt-in above 48 KiB).
    fn set_max_dynamic_shared(&self, func: usize, bytes: u32) -> Result<()>;
    fn launch(&self, func: usize, l: &Launch, stream: usize) -> Result<()>;
    /// A stream-ordered pool of our own on `device` (release threshold: keep everything), or None
    /// when the device/driver has none (then `alloc_async` uses the device's default pool).
    fn pool_create(&self, device: i32) -> Option<usize>;
    /// Stream-ordered allocation (graph-capture safe); `pool` from `pool_create`.
    fn alloc_async(&self, pool: Option<usize>, bytes: usize, stream: usize) -> Result<usize>;
    fn free_async(&self, ptr: usize, stream: usize) -> Result<()>;
    fn malloc(&self, bytes: usize) -> Result<usize>;
    fn free(&self, ptr: usize) -> Result<()>;
    fn memcpy_async(&self, dst: usize, src: usize, bytes: usize, stream: usize) -> Result<()>;
    fn stream_synchronize(&self, stream: usize) -> Result<()>;
    /// Wait for the default stream `stream` (0, legacy or per-thread) of the current context and
    /// of every device this library has switched a thread to.
    fn synchronize_default(&'static self, stream: usize) -> Result<()>;
    /// True when `stream` is capturing a graph (or the driver cannot tell): no host sync then.
    fn is_capturing(&self, stream: usize) -> bool;

    // Optional entry points, for `ccv1d info` / `ccv1d bench` only (`timing.rs`): the defaults
    // answer "not available", and nothing on the library's call path uses them.

    /// The device's name, when the driver can tell.
    fn device_name(&self, _device: i32) -> Option<String> {
        None
    }
    /// A timing event in the current context.
    fn event_create(&self) -> Result<usize> {
        bail!(CCV1D_ERR_DEVICE, "the {} driver has no event functions", self.api())
    }
    fn event_record(&self, _event: usize, _stream: usize) -> Result<()> {
        bail!(CCV1D_ERR_DEVICE, "the {} driver has no event functions", self.api())
    }
    fn event_synchronize(&self, _event: usize) -> Result<()> {
        bail!(CCV1D_ERR_DEVICE, "the {} driver has no event functions", self.api())
    }
    /// Milliseconds between two recorded, completed events.
    fn event_elapsed_ms(&self, _start: usize, _end: usize) -> Result<f32> {
        bail!(CCV1D_ERR_DEVICE, "the {} driver has no event functions", self.api())
    }
    fn event_destroy(&self, _event: usize) {}
    /// A new non-blocking stream in the current context (graph replay in `ccv1d bench`).
    fn stream_create(&self) -> Result<usize> {
        bail!(CCV1D_ERR_DEVICE, "the {} driver has no stream creation", self.api())
    }
    fn stream_destroy(&self, _stream: usize) {}
    /// Start capturing `stream` into a graph (relaxed mode).
    fn capture_begin(&self, _stream: usize) -> Result<()> {
        bail!(CCV1D_ERR_DEVICE, "the {} driver has no graph capture", self.api())
    }
    /// End the capture of `stream` and instantiate it: an executable graph.
    fn capture_end(&self, _stream: usize) -> Result<usize> {
        bail!(CCV1D_ERR_DEVICE, "the {} driver has no graph capture", self.api())
    }
    fn graph_launch(&self, _exec: usize, _stream: usize) -> Result<()> {
        bail!(CCV1D_ERR_DEVICE, "the {} driver has no graph launch", self.api())
    }
    fn graph_destroy(&self, _exec: usize) {}
}

/// Streams 0 (NULL), 1 (CUDA's CU_STREAM_LEGACY) and 2 (per-thread default; also
/// `hipStreamPerThread`) are the default stream of whatever context is current.
pub(crate) fn is_default_stream(stream: usize) -> bool {
    stream <= 2
}

// ---------------------------------------------------------------------------------------------
// dlopen

/// A library opened with `dlopen`, never closed (the handles and function pointers taken from it
/// live as long as the process).
pub(crate) struct Lib {
    handle: *mut c_void,
    pub path: String,
}

// SAFETY: a dlopen handle is a process-wide token; dlsym is thread-safe.
unsafe impl Send for Lib {}
unsafe impl Sync for Lib {}

fn dlerror_string() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated, thread-local string.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dlopen error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// The directory named by `CCV1D_DRIVER_DIR`, if set and non-empty: driver libraries are then
/// loaded from there only (tests use a directory without them to simulate a missing driver).
pub(crate) fn driver_dir_from_env() -> Option<OsString> {
    std::env::var_os("CCV1D_DRIVER_DIR").filter(|d| !d.is_empty())
}

impl Lib {
    /// Open the first of `names` that loads: by bare name (the dynamic loader's search path, which
    /// also finds a copy the process already has), or from `dir` only when given.
    pub fn open(what: &str, names: &[&str], dir: Option<&OsStr>) -> std::result::Result<Lib, String> {
        let mut tried = Vec::new();
        for name in names {
            let path: OsString = match dir {
                Some(d) => Path::new(d).join(name).into_os_string(),
                None => OsString::from(name),
            };
            let Ok(c) = CString::new(path.as_bytes()) else { continue };
            // SAFETY: a valid C string; RTLD_LOCAL keeps the driver's symbols out of the global scope.
            let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if !h.is_null() {
                return Ok(Lib { handle: h, path: path.to_string_lossy().into_owned() });
            }
            tried.push(dlerror_string());
        }
        let place = match dir {
            Some(d) => format!(" in CCV1D_DRIVER_DIR={}", Path::new(d).display()),
            None => String::new(),
        };
        Err(format!("{what} driver library not found{place} (tried {}): {}", names.join(", "), tried.join("; ")))
    }

    /// The address of `name`, or null.
    pub fn sym(&self, name: &str) -> *mut c_void {
        let Ok(c) = CString::new(name) else { return std::ptr::null_mut() };
        // SAFETY: handle from dlopen, valid C string.
        unsafe { libc::dlsym(self.handle, c.as_ptr()) }
    }
}

/// Declares a table of driver entry points resolved by name from a `Lib`. Field names are the
/// exported symbol names (`cuCtxPushCurrent_v2`, ...). A missing required symbol fails the load;
/// optional ones become `None`.
macro_rules! fn_table {
    ($(#[$meta:meta])* $name:ident {
        required { $($f:ident: fn($($a:ty),*) -> $r:ty;)* }
        optional { $($of:ident: fn($($oa:ty),*) -> $or:ty;)* }
    }) => {
        $(#[$meta])*
        #[allow(non_snake_case)]
        pub(crate) struct $name {
            $(pub $f: unsafe extern "C" fn($($a),*) -> $r,)*
            $(pub $of: Option<unsafe extern "C" fn($($oa),*) -> $or>,)*
        }
        impl $name {
            /// # Safety
            /// The declared signatures must match the library's.
            #[allow(non_snake_case)]
            pub unsafe fn resolve(lib: &$crate::gpu::driver::Lib) -> std::result::Result<Self, String> {
                Ok($name {
                    $($f: {
                        let p = lib.sym(stringify!($f));
                        if p.is_null() {
                            return Err(format!("{} lacks {} (driver too old?)", lib.path, stringify!($f)));
                        }
                        std::mem::transmute::<*mut std::ffi::c_void, unsafe extern "C" fn($($a),*) -> $r>(p)
                    },)*
                    $($of: {
                        let p = lib.sym(stringify!($of));
                        if p.is_null() {
                            None
                        } else {
                            Some(std::mem::transmute::<*mut std::ffi::c_void, unsafe extern "C" fn($($oa),*) -> $or>(p))
                        }
                    },)*
                })
            }
        }
    };
}
pub(crate) use fn_table;

// ---------------------------------------------------------------------------------------------
// Registry: each vendor's driver is opened once, on first use, and kept (or its error kept).

static CUDA: OnceLock<std::result::Result<super::cuda::Cuda, String>> = OnceLock::new();
static HIP: OnceLock<std::result::Result<super::hip::Hip, String>> = OnceLock::new();

/// The vendor's driver, opening it on first use. `Err` holds why it is unusable.
pub(crate) fn driver(vendor: Vendor) -> std::result::Result<&'static dyn Driver, &'static str> {
    let dir = || driver_dir_from_env();
    match vendor {
        Vendor::Nvidia => match CUDA.get_or_init(|| super::cuda::Cuda::load(dir().as_deref())) {
            Ok(d) => Ok(d),
            Err(e) => Err(e.as_str()),
        },
        Vendor::Amd => match HIP.get_or_init(|| super::hip::Hip::load(dir().as_deref())) {
            Ok(d) => Ok(d),
            Err(e) => Err(e.as_str()),
        },
    }
}

/// Names an error status from a driver call: out-of-memory keeps its own status.
pub(crate) fn driver_error(api: &str, what: &str, code: i32, oom_code: i32, name: &str, text: &str) -> Error {
    let status = if code == oom_code { CCV1D_ERR_OUT_OF_MEMORY } else { CCV1D_ERR_DEVICE };
    Error::new(status, format!("{api} error in {what}: {name} ({code}): {text}"))
}

/// Parses an AMD `gcnArchName` ("gfx942:sramecc+:xnack-", "gfx90a", "gfx1100") into the number
/// `DeviceInfo::arch` carries: major·100 + minor·10 + stepping (hex digits), so gfx942 → 942,
/// gfx90a → 910, gfx1100 → 1100.
pub(crate) fn parse_gfx(name: &str) -> Option<u32> {
    let s = name.strip_prefix("gfx")?;
    let id: String = s.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    if id.len() < 3 {
        return None;
    }
    let (major, rest) = id.split_at(id.len() - 2);
    let major: u32 = major.parse().ok()?;
    let mut it = rest.chars();
    let minor = it.next()?.to_digit(16)?;
    let step = it.next()?.to_digit(16)?;
    Some(major * 100 + minor * 10 + step)
}

/// Finds the first "gfx…" C string in a byte buffer (a `hipDeviceProp_t` of any layout version).
pub(crate) fn find_gfx(bytes: &[u8]) -> Option<u32> {
    let mut i = 0;
    while i + 3 <= bytes.len() {
        if &bytes[i..i + 3] == b"gfx" && (i == 0 || bytes[i - 1] == 0) {
            let end = bytes[i..].iter().position(|&b| b == 0).map_or(bytes.len(), |n| i + n);
            if let Ok(s) = std::str::from_utf8(&bytes[i..end]) {
                if let Some(v) = parse_gfx(s) {
                    return Some(v);
                }
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_names() {
        assert_eq!(parse_gfx("gfx942:sramecc+:xnack-"), Some(942));
        assert_eq!(parse_gfx("gfx90a"), Some(910));
        assert_eq!(parse_gfx("gfx908"), Some(908));
        assert_eq!(parse_gfx("gfx1100"), Some(1100));
        assert_eq!(parse_gfx("gfx1151"), Some(1151));
        assert_eq!(parse_gfx("gfx9"), None);
        assert_eq!(parse_gfx("sm_90"), None);
        let mut buf = vec![0u8; 600];
        buf[10..30].copy_from_slice(b"AMD Instinct MI300X\0");
        buf[300..322].copy_from_slice(b"gfx942:sramecc+:xnack-");
        assert_eq!(find_gfx(&buf), Some(942));
        assert_eq!(find_gfx(&[0u8; 64]), None);
    }

    #[test]
    fn missing_library_is_an_error_with_the_directory() {
        let e = Lib::open("CUDA", &["libcuda.so.1"], Some(OsStr::new("/nonexistent"))).err().unwrap();
        assert!(e.contains("/nonexistent"), "{e}");
        assert!(e.contains("libcuda.so.1"), "{e}");
    }

    #[test]
    fn default_streams() {
        assert!(is_default_stream(0) && is_default_stream(1) && is_default_stream(2));
        assert!(!is_default_stream(0x5555_0000));
    }
}
