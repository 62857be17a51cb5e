//! AMD: the HIP runtime (`libamdhip64.so`) through a table of function pointers, the twin of
//! `cuda.rs`. HIP has no contexts to push: a call switches the thread's current device
//! (`hipSetDevice`) when it must and switches it back afterwards; modules are per device.
//!
//! Enum values differ between ROCm releases in two places, handled here: `hipMemoryType` (ROCm 6
//! renumbered it) and the arch name (read from `hipDeviceProp_t` of whatever layout). The device
//! attribute numbers used below are the same in ROCm 5.2 and 7.x (checked against both headers).

use std::collections::BTreeSet;
use std::ffi::{c_char, c_void, CStr, OsStr};
use std::sync::Mutex;

use super::driver::{self, fn_table, is_default_stream, CtxKey, Driver, Lib, Mem, Restore, Scope};
use super::launch::{peak_mem_gbps, DeviceInfo, Launch, Vendor};
use crate::error::*;

type HipError = i32;
const HIP_SUCCESS: HipError = 0;
const HIP_ERROR_OUT_OF_MEMORY: HipError = 2;
const HIP_ERROR_NO_BINARY_FOR_GPU: HipError = 209;
const HIP_ERROR_NOT_FOUND: HipError = 500;

const HIP_ATTR_COMPUTE_CAPABILITY_MAJOR: i32 = 23;
const HIP_ATTR_MAX_THREADS_PER_BLOCK: i32 = 56;
const HIP_ATTR_MEMORY_BUS_WIDTH: i32 = 59;
const HIP_ATTR_MEMORY_CLOCK_RATE: i32 = 60;
const HIP_ATTR_COMPUTE_CAPABILITY_MINOR: i32 = 61;
const HIP_ATTR_MULTIPROCESSOR_COUNT: i32 = 63;
const HIP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK: i32 = 74;
const HIP_ATTR_SHARED_MEM_PER_BLOCK_OPTIN: i32 = 75;
const HIP_ATTR_WARP_SIZE: i32 = 87;
const HIP_ATTR_MEMORY_POOLS_SUPPORTED: i32 = 88;

const HIP_MEMCPY_DEFAULT: i32 = 4;
const HIP_MEMPOOL_ATTR_RELEASE_THRESHOLD: i32 = 4;
const HIP_MEM_ALLOCATION_TYPE_PINNED: i32 = 1;
const HIP_MEM_LOCATION_TYPE_DEVICE: i32 = 1;
const HIP_LAUNCH_PARAM_BUFFER_POINTER: usize = 1;
const HIP_LAUNCH_PARAM_BUFFER_SIZE: usize = 2;
const HIP_LAUNCH_PARAM_END: usize = 3;
const HIP_STREAM_NON_BLOCKING: u32 = 1;
const HIP_STREAM_CAPTURE_MODE_RELAXED: i32 = 2;

fn_table! {
    /// The HIP runtime entry points this library uses.
    HipApi {
        required {
            hipInit: fn(u32) -> HipError;
            hipRuntimeGetVersion: fn(*mut i32) -> HipError;
            hipGetErrorName: fn(HipError) -> *const c_char;
            hipGetErrorString: fn(HipError) -> *const c_char;
            hipGetDeviceCount: fn(*mut i32) -> HipError;
            hipGetDevice: fn(*mut i32) -> HipError;
            hipSetDevice: fn(i32) -> HipError;
            hipDeviceGetAttribute: fn(*mut i32, i32, i32) -> HipError;
            hipPointerGetAttributes: fn(*mut c_void, *const c_void) -> HipError;
            hipModuleLoadData: fn(*mut usize, *const c_void) -> HipError;
            hipModuleGetFunction: fn(*mut usize, usize, *const c_char) -> HipError;
            hipModuleLaunchKernel: fn(usize, u32, u32, u32, u32, u32, u32, u32, usize, *mut *mut c_void, *mut *mut c_void) -> HipError;
            hipMalloc: fn(*mut usize, usize) -> HipError;
            hipFree: fn(usize) -> HipError;
            hipMemcpyAsync: fn(usize, usize, usize, i32, usize) -> HipError;
            hipStreamSynchronize: fn(usize) -> HipError;
        }
        optional {
            hipGetDevicePropertiesR0600: fn(*mut c_void, i32) -> HipError;
            hipGetDeviceProperties: fn(*mut c_void, i32) -> HipError;
            hipStreamGetDevice: fn(usize, *mut i32) -> HipError;
            hipStreamIsCapturing: fn(usize, *mut i32) -> HipError;
            hipMallocAsync: fn(*mut usize, usize, usize) -> HipError;
            hipFreeAsync: fn(usize, usize) -> HipError;
            hipMemPoolCreate: fn(*mut usize, *const c_void) -> HipError;
            hipMemPoolSetAttribute: fn(usize, i32, *mut c_void) -> HipError;
            hipMallocFromPoolAsync: fn(*mut usize, usize, usize, usize) -> HipError;
            // For `ccv1d info` / `ccv1d bench` only (src/gpu/timing.rs).
            hipDeviceGetName: fn(*mut c_char, i32, i32) -> HipError;
            hipEventCreate: fn(*mut usize) -> HipError;
            hipEventRecord: fn(usize, usize) -> HipError;
            hipEventSynchronize: fn(usize) -> HipError;
            hipEventElapsedTime: fn(*mut f32, usize, usize) -> HipError;
            hipEventDestroy: fn(usize) -> HipError;
            hipStreamCreateWithFlags: fn(*mut usize, u32) -> HipError;
            hipStreamDestroy: fn(usize) -> HipError;
            hipStreamBeginCapture: fn(usize, i32) -> HipError;
            hipStreamEndCapture: fn(usize, *mut usize) -> HipError;
            hipGraphInstantiate: fn(*mut usize, usize, *mut usize, *mut c_char, usize) -> HipError;
            hipGraphLaunch: fn(usize, usize) -> HipError;
            hipGraphDestroy: fn(usize) -> HipError;
            hipGraphExecDestroy: fn(usize) -> HipError;
        }
    }
}

pub(crate) struct Hip {
    lib: Lib,
    api: HipApi,
    devices: i32,
    /// HIP_VERSION of the runtime (major·10⁷ + minor·10⁵ + patch).
    pub version: i32,
    /// Devices this library switched a thread to (for `ccv1d_synchronize(NULL)`).
    used: Mutex<BTreeSet<i32>>,
}

impl Hip {
    pub fn load(dir: Option<&OsStr>) -> std::result::Result<Hip, String> {
        let lib = Lib::open("HIP", &["libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"], dir)?;
        // SAFETY: the signatures in the table are the HIP runtime's.
        let api = unsafe { HipApi::resolve(&lib)? };
        let mut hip = Hip { lib, api, devices: 0, version: 0, used: Mutex::new(BTreeSet::new()) };
        // SAFETY: plain runtime calls with valid out-pointers.
        unsafe {
            (hip.api.hipRuntimeGetVersion)(&mut hip.version);
            let r = (hip.api.hipInit)(0);
            if r != HIP_SUCCESS {
                return Err(format!("HIP runtime {} found but hipInit failed (no AMD GPU?): {}", hip.lib.path, hip.describe(r)));
            }
            let mut n = 0;
            let r = (hip.api.hipGetDeviceCount)(&mut n);
            if r != HIP_SUCCESS || n <= 0 {
                return Err(format!("HIP runtime {} found but no AMD GPU is visible: {}", hip.lib.path, hip.describe(r)));
            }
            hip.devices = n;
        }
        Ok(hip)
    }

    fn describe(&self, r: HipError) -> String {
        let (name, text) = self.names(r);
        format!("{name} ({r}): {text}")
    }

    fn names(&self, r: HipError) -> (String, String) {
        // SAFETY: the runtime returns static strings (or NULL).
        unsafe {
            let s =
                |p: *const c_char| if p.is_null() { "?".to_string() } else { CStr::from_ptr(p).to_string_lossy().into_owned() };
            (s((self.api.hipGetErrorName)(r)), s((self.api.hipGetErrorString)(r)))
        }
    }

    fn check(&self, r: HipError, what: &str) -> Result<()> {
        if r == HIP_SUCCESS {
            return Ok(());
        }
        let (name, text) = self.names(r);
        Err(driver::driver_error("HIP", what, r, HIP_ERROR_OUT_OF_MEMORY, &name, &text))
    }

    fn attr(&self, attr: i32, dev: i32) -> Result<i32> {
        let mut v = 0;
        // SAFETY: valid out-pointer.
        self.check(unsafe { (self.api.hipDeviceGetAttribute)(&mut v, attr, dev) }, "hipDeviceGetAttribute")?;
        Ok(v)
    }

    fn get_device(&self) -> i32 {
        let mut d = 0;
        // SAFETY: valid out-pointer.
        unsafe { (self.api.hipGetDevice)(&mut d) };
        d
    }

    fn set_device(&self, d: i32) -> Result<()> {
        // SAFETY: plain call.
        self.check(unsafe { (self.api.hipSetDevice)(d) }, "hipSetDevice")
    }

    /// The gfx number from `hipDeviceProp_t::gcnArchName` (found by content, so any struct
    /// layout version works), else the compute-capability pair.
    fn arch(&self, dev: i32) -> u32 {
        let mut buf = vec![0u64; 2048]; // 16 KiB, far more than any hipDeviceProp_t
                                        // SAFETY: a zeroed buffer larger than the struct; valid device.
        let ok = unsafe {
            match (self.api.hipGetDevicePropertiesR0600, self.api.hipGetDeviceProperties) {
                (Some(f), _) | (None, Some(f)) => f(buf.as_mut_ptr() as *mut c_void, dev) == HIP_SUCCESS,
                _ => false,
            }
        };
        // SAFETY: viewing the u64 buffer as bytes.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, buf.len() * 8) };
        if ok {
            if let Some(a) = driver::find_gfx(bytes) {
                return a;
            }
        }
        let major = self.attr(HIP_ATTR_COMPUTE_CAPABILITY_MAJOR, dev).unwrap_or(0);
        let minor = self.attr(HIP_ATTR_COMPUTE_CAPABILITY_MINOR, dev).unwrap_or(0);
        (major * 100 + minor * 10) as u32
    }

    fn major(&self) -> i32 {
        self.version / 10_000_000
    }
}

impl Driver for Hip {
    fn vendor(&self) -> Vendor {
        Vendor::Amd
    }
    fn api(&self) -> &'static str {
        "HIP"
    }
    fn device_count(&self) -> i32 {
        self.devices
    }

    fn mem(&self, addr: usize) -> Mem {
        if addr == 0 {
            return Mem::Unknown;
        }
        // hipPointerAttribute_t: {type u32, device i32, devicePointer, hostPointer, isManaged i32,
        // allocationFlags u32}: 32 bytes in ROCm 5 and 6+.
        let mut a = [0u64; 8];
        // SAFETY: a buffer larger than the struct; the runtime only looks the address up.
        let r = unsafe { (self.api.hipPointerGetAttributes)(a.as_mut_ptr() as *mut c_void, addr as *const c_void) };
        if r != HIP_SUCCESS {
            return Mem::Unknown; // ROCm 5: unregistered host memory is an error
        }
        let ty = a[0] as u32;
        let device = (a[0] >> 32) as u32 as i32;
        let managed = a[3] as u32 != 0;
        if managed {
            return Mem::Managed(device);
        }
        if self.major() >= 6 {
            // 0 unregistered, 1 host, 2 device, 3 managed, 10 array, 11 unified
            match ty {
                2 => Mem::Device(device),
                3 | 11 => Mem::Managed(device),
                1 => Mem::Host,
                _ => Mem::Unknown,
            }
        } else {
            // 0 host, 1 device, 2 array, 3 unified
            match ty {
                1 => Mem::Device(device),
                3 => Mem::Managed(device),
                0 => Mem::Host,
                _ => Mem::Unknown,
            }
        }
    }

    fn current_device(&self) -> Option<i32> {
        Some(self.get_device())
    }

    fn enter(&'static self, device: Option<i32>, stream: usize) -> Result<Scope> {
        let cur = self.get_device();
        let mut stream_dev = None;
        if !is_default_stream(stream) {
            if let Some(f) = self.api.hipStreamGetDevice {
                let mut d = -1;
                // SAFETY: the caller's stream, valid out-pointer.
                self.check(unsafe { f(stream, &mut d) }, "hipStreamGetDevice (is `stream` a live HIP stream?)")?;
                stream_dev = Some(d);
            }
        }
        let target = stream_dev.or(device).unwrap_or(cur);
        if target < 0 || target >= self.devices {
            bail!(CCV1D_ERR_WRONG_DEVICE, "HIP device {target} does not exist ({} visible)", self.devices);
        }
        let restore = if target != cur {
            self.set_device(target)?;
            self.used.lock().unwrap_or_else(|e| e.into_inner()).insert(target);
            Restore::SetDevice(cur)
        } else {
            Restore::Nothing
        };
        Ok(Scope::new(self, CtxKey { vendor: 1, handle: target as usize, id: 0 }, target, restore))
    }

    fn leave(&self, restore: Restore) {
        if let Restore::SetDevice(d) = restore {
            // SAFETY: plain call.
            unsafe { (self.api.hipSetDevice)(d) };
        }
    }

    fn device_info(&self, dev: i32) -> Result<DeviceInfo> {
        let smem = self.attr(HIP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, dev)?;
        let optin = self.attr(HIP_ATTR_SHARED_MEM_PER_BLOCK_OPTIN, dev).unwrap_or(0);
        Ok(DeviceInfo {
            vendor: Vendor::Amd,
            warp_size: self.attr(HIP_ATTR_WARP_SIZE, dev)? as u32,
            multiprocessors: self.attr(HIP_ATTR_MULTIPROCESSOR_COUNT, dev)? as u32,
            max_threads_per_block: self.attr(HIP_ATTR_MAX_THREADS_PER_BLOCK, dev)? as u32,
            max_shared_mem_per_block: smem.max(optin) as u32,
            arch: self.arch(dev),
            mem_gbps: peak_mem_gbps(
                self.attr(HIP_ATTR_MEMORY_CLOCK_RATE, dev).unwrap_or(0),
                self.attr(HIP_ATTR_MEMORY_BUS_WIDTH, dev).unwrap_or(0),
            ),
        })
    }

    fn module_load(&self, image: &[u8]) -> Result<usize> {
        let mut m = 0usize;
        // SAFETY: image is a complete code-object bundle.
        let r = unsafe { (self.api.hipModuleLoadData)(&mut m, image.as_ptr() as *const c_void) };
        if r == HIP_ERROR_NO_BINARY_FOR_GPU {
            let arch = self.arch(self.get_device());
            bail!(
                CCV1D_ERR_DEVICE,
                "the HIP kernels in this build have no code for this GPU (gfx{arch}); rebuild with that architecture: {}",
                self.describe(r)
            );
        }
        self.check(r, "hipModuleLoadData")?;
        Ok(m)
    }

    fn module_function(&self, module: usize, name: &CStr) -> Result<Option<usize>> {
        let mut f = 0usize;
        // SAFETY: live module, C string.
        let r = unsafe { (self.api.hipModuleGetFunction)(&mut f, module, name.as_ptr()) };
        if r == HIP_ERROR_NOT_FOUND {
            return Ok(None);
        }
        self.check(r, "hipModuleGetFunction")?;
        Ok(Some(f))
    }

    fn param_size(&self, _func: usize) -> Option<usize> {
        None
    }

    fn set_max_dynamic_shared(&self, _func: usize, _bytes: u32) -> Result<()> {
        Ok(()) // AMD needs no opt-in: the launch fails if the LDS does not fit
    }

    fn launch(&self, func: usize, l: &Launch, stream: usize) -> Result<()> {
        // The argument buffer route (`extra`) works in every ROCm release; the buffer is exactly
        // the kernel's single by-value struct.
        let mut size = l.params.len();
        let mut extra: [*mut c_void; 5] = [
            HIP_LAUNCH_PARAM_BUFFER_POINTER as *mut c_void,
            l.params.as_ptr() as *mut c_void,
            HIP_LAUNCH_PARAM_BUFFER_SIZE as *mut c_void,
            &mut size as *mut usize as *mut c_void,
            HIP_LAUNCH_PARAM_END as *mut c_void,
        ];
        // SAFETY: live function on the current device; the argument buffer outlives the call.
        let r = unsafe {
            (self.api.hipModuleLaunchKernel)(
                func,
                l.grid[0],
                l.grid[1],
                l.grid[2],
                l.block[0],
                l.block[1],
                l.block[2],
                l.shared_mem_bytes,
                stream,
                std::ptr::null_mut(),
                extra.as_mut_ptr(),
            )
        };
        self.check(r, &format!("hipModuleLaunchKernel({})", l.kernel))
    }

    fn pool_create(&self, dev: i32) -> Option<usize> {
        let (create, set) = (self.api.hipMemPoolCreate?, self.api.hipMemPoolSetAttribute?);
        self.api.hipMallocFromPoolAsync?;
        self.api.hipFreeAsync?;
        if self.attr(HIP_ATTR_MEMORY_POOLS_SUPPORTED, dev).ok()? == 0 {
            return None;
        }
        // hipMemPoolProps: allocType, handleTypes, location {type, id}, then zeroed fields (88 bytes).
        let mut props = [0i32; 32];
        props[0] = HIP_MEM_ALLOCATION_TYPE_PINNED;
        props[2] = HIP_MEM_LOCATION_TYPE_DEVICE;
        props[3] = dev;
        let mut pool = 0usize;
        // SAFETY: zeroed props larger than the struct; valid out-pointer.
        if unsafe { create(&mut pool, props.as_ptr() as *const c_void) } != HIP_SUCCESS {
            return None;
        }
        let mut keep = u64::MAX;
        // SAFETY: live pool; value type uint64_t.
        unsafe { set(pool, HIP_MEMPOOL_ATTR_RELEASE_THRESHOLD, &mut keep as *mut u64 as *mut c_void) };
        Some(pool)
    }

    fn alloc_async(&self, pool: Option<usize>, bytes: usize, stream: usize) -> Result<usize> {
        let mut p = 0usize;
        // SAFETY: valid out-pointer; pool from pool_create; the caller's stream.
        let r = unsafe {
            match (pool, self.api.hipMallocFromPoolAsync, self.api.hipMallocAsync, self.api.hipFreeAsync) {
                (Some(pool), Some(f), _, Some(_)) => f(&mut p, bytes, pool, stream),
                (_, _, Some(f), Some(_)) => f(&mut p, bytes, stream),
                _ => bail!(
                    CCV1D_ERR_WORKSPACE,
                    "this HIP runtime has no stream-ordered allocator: pass a workspace of {bytes} bytes (ccv1d_bwd_workspace_size)"
                ),
            }
        };
        self.check(r, &format!("hipMallocAsync({bytes} bytes of workspace)"))?;
        Ok(p)
    }

    fn free_async(&self, ptr: usize, stream: usize) -> Result<()> {
        let Some(f) = self.api.hipFreeAsync else { bail!(CCV1D_ERR_INTERNAL, "hipFreeAsync missing after an async allocation") };
        // SAFETY: ptr from alloc_async on this stream.
        self.check(unsafe { f(ptr, stream) }, "hipFreeAsync")
    }

    fn malloc(&self, bytes: usize) -> Result<usize> {
        let mut p = 0usize;
        // SAFETY: valid out-pointer.
        self.check(unsafe { (self.api.hipMalloc)(&mut p, bytes) }, &format!("hipMalloc({bytes} bytes)"))?;
        Ok(p)
    }

    fn free(&self, ptr: usize) -> Result<()> {
        // SAFETY: the caller's device pointer.
        self.check(unsafe { (self.api.hipFree)(ptr) }, "hipFree")
    }

    fn memcpy_async(&self, dst: usize, src: usize, bytes: usize, stream: usize) -> Result<()> {
        // SAFETY: hipMemcpyDefault: the runtime infers each side from unified addressing.
        self.check(unsafe { (self.api.hipMemcpyAsync)(dst, src, bytes, HIP_MEMCPY_DEFAULT, stream) }, "hipMemcpyAsync")
    }

    fn stream_synchronize(&self, stream: usize) -> Result<()> {
        // SAFETY: the caller's stream.
        self.check(unsafe { (self.api.hipStreamSynchronize)(stream) }, "hipStreamSynchronize")
    }

    fn synchronize_default(&'static self, stream: usize) -> Result<()> {
        let cur = self.get_device();
        self.stream_synchronize(stream)?;
        let used: Vec<i32> = self.used.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect();
        for d in used.into_iter().filter(|&d| d != cur) {
            self.set_device(d)?;
            let _back = Scope::new(self, CtxKey { vendor: 1, handle: d as usize, id: 0 }, d, Restore::SetDevice(cur));
            self.stream_synchronize(stream)?;
        }
        Ok(())
    }

    fn is_capturing(&self, stream: usize) -> bool {
        let Some(f) = self.api.hipStreamIsCapturing else { return false };
        let mut status = 0;
        // SAFETY: the caller's stream, valid out-pointer.
        let r = unsafe { f(stream, &mut status) };
        r != HIP_SUCCESS || status != 0
    }

    fn device_name(&self, dev: i32) -> Option<String> {
        let f = self.api.hipDeviceGetName?;
        let mut buf = [0 as c_char; 256];
        // SAFETY: valid buffer; the runtime writes a NUL-terminated name of at most len bytes.
        unsafe {
            if f(buf.as_mut_ptr(), buf.len() as i32 - 1, dev) != HIP_SUCCESS {
                return None;
            }
            Some(CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
        }
    }

    fn event_create(&self) -> Result<usize> {
        let Some(f) = self.api.hipEventCreate else { bail!(CCV1D_ERR_DEVICE, "this HIP runtime lacks hipEventCreate") };
        let mut e = 0usize;
        // SAFETY: valid out-pointer (on the current device).
        self.check(unsafe { f(&mut e) }, "hipEventCreate")?;
        Ok(e)
    }

    fn event_record(&self, event: usize, stream: usize) -> Result<()> {
        let Some(f) = self.api.hipEventRecord else { bail!(CCV1D_ERR_DEVICE, "this HIP runtime lacks hipEventRecord") };
        // SAFETY: live event and stream.
        self.check(unsafe { f(event, stream) }, "hipEventRecord")
    }

    fn event_synchronize(&self, event: usize) -> Result<()> {
        let Some(f) = self.api.hipEventSynchronize else { bail!(CCV1D_ERR_DEVICE, "this HIP runtime lacks hipEventSynchronize") };
        // SAFETY: live event.
        self.check(unsafe { f(event) }, "hipEventSynchronize")
    }

    fn event_elapsed_ms(&self, start: usize, end: usize) -> Result<f32> {
        let Some(f) = self.api.hipEventElapsedTime else { bail!(CCV1D_ERR_DEVICE, "this HIP runtime lacks hipEventElapsedTime") };
        let mut ms = 0f32;
        // SAFETY: live, completed events; valid out-pointer.
        self.check(unsafe { f(&mut ms, start, end) }, "hipEventElapsedTime")?;
        Ok(ms)
    }

    fn event_destroy(&self, event: usize) {
        if let Some(f) = self.api.hipEventDestroy {
            // SAFETY: an event from event_create.
            unsafe { f(event) };
        }
    }

    fn stream_create(&self) -> Result<usize> {
        let Some(f) = self.api.hipStreamCreateWithFlags else { bail!(CCV1D_ERR_DEVICE, "this HIP runtime lacks hipStreamCreateWithFlags") };
        let mut st = 0usize;
        // SAFETY: valid out-pointer (on the current device).
        self.check(unsafe { f(&mut st, HIP_STREAM_NON_BLOCKING) }, "hipStreamCreateWithFlags")?;
        Ok(st)
    }

    fn stream_destroy(&self, stream: usize) {
        if let Some(f) = self.api.hipStreamDestroy {
            // SAFETY: a stream from stream_create.
            unsafe { f(stream) };
        }
    }

    fn capture_begin(&self, stream: usize) -> Result<()> {
        let Some(f) = self.api.hipStreamBeginCapture else { bail!(CCV1D_ERR_DEVICE, "this HIP runtime lacks hipStreamBeginCapture") };
        // SAFETY: a live, non-default stream.
        self.check(unsafe { f(stream, HIP_STREAM_CAPTURE_MODE_RELAXED) }, "hipStreamBeginCapture")
    }

    fn capture_end(&self, stream: usize) -> Result<usize> {
        let (Some(end), Some(inst), Some(destroy)) = (self.api.hipStreamEndCapture, self.api.hipGraphInstantiate, self.api.hipGraphDestroy) else {
            bail!(CCV1D_ERR_DEVICE, "this HIP runtime lacks the graph entry points")
        };
        let (mut graph, mut exec) = (0usize, 0usize);
        // SAFETY: a capturing stream; valid out-pointers (no error node / log wanted); the template
        // graph is destroyed once instantiated.
        unsafe {
            self.check(end(stream, &mut graph), "hipStreamEndCapture")?;
            let r = inst(&mut exec, graph, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            destroy(graph);
            self.check(r, "hipGraphInstantiate")?;
        }
        Ok(exec)
    }

    fn graph_launch(&self, exec: usize, stream: usize) -> Result<()> {
        let Some(f) = self.api.hipGraphLaunch else { bail!(CCV1D_ERR_DEVICE, "this HIP runtime lacks hipGraphLaunch") };
        // SAFETY: an executable graph from capture_end, a live stream.
        self.check(unsafe { f(exec, stream) }, "hipGraphLaunch")
    }

    fn graph_destroy(&self, exec: usize) {
        if let Some(f) = self.api.hipGraphExecDestroy {
            // SAFETY: an executable graph from capture_end.
            unsafe { f(exec) };
        }
    }
}
