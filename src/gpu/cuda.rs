//! NVIDIA: the CUDA driver API (`libcuda.so.1`) through a table of function pointers.
//!
//! Symbol names are the ones the CUDA 12/13 headers map the API to (`cuCtxPushCurrent_v2`,
//! `cuMemAlloc_v2`, ...). Launch-path entry points are the legacy-default-stream variants (not
//! `_ptsz`): stream 0 means the legacy default stream, as in PyTorch; pass
//! `CU_STREAM_PER_THREAD` (2) explicitly for the per-thread one.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, OsStr};
use std::sync::Mutex;

use super::driver::{self, fn_table, is_default_stream, CtxKey, Driver, Lib, Mem, Restore, Scope};
use super::launch::{peak_mem_gbps, DeviceInfo, Launch, Vendor};
use crate::error::*;

type CUresult = i32;
const CUDA_SUCCESS: CUresult = 0;
const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
const CUDA_ERROR_NOT_FOUND: CUresult = 500;
const CUDA_ERROR_NO_BINARY_FOR_GPU: CUresult = 209;

const CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: i32 = 1;
const CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: i32 = 8;
const CU_DEVICE_ATTRIBUTE_WARP_SIZE: i32 = 10;
const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: i32 = 16;
const CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: i32 = 36;
const CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: i32 = 37;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: i32 = 75;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: i32 = 76;
const CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: i32 = 97;
const CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: i32 = 115;

const CU_POINTER_ATTRIBUTE_MEMORY_TYPE: i32 = 2;
const CU_POINTER_ATTRIBUTE_IS_MANAGED: i32 = 8;
const CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: i32 = 9;
const CU_MEMORYTYPE_HOST: u32 = 1;
const CU_MEMORYTYPE_DEVICE: u32 = 2;
const CU_MEMORYTYPE_UNIFIED: u32 = 4;

const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: i32 = 8;
/// Dynamic shared memory a launch may use without opting in.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

const CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: i32 = 4;
const CU_MEM_ALLOCATION_TYPE_PINNED: i32 = 1;
const CU_MEM_LOCATION_TYPE_DEVICE: i32 = 1;
const CU_STREAM_CAPTURE_STATUS_NONE: i32 = 0;
const CU_STREAM_NON_BLOCKING: u32 = 1;
const CU_STREAM_CAPTURE_MODE_RELAXED: i32 = 2;
const CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: u32 = 6;
/// Programmatic launches from CUDA 12.3 on, the version that captures them into graphs.
const PROGRAMMATIC_MIN_DRIVER: i32 = 12030;

/// `CUlaunchAttribute`: an id, padding to 8 bytes, a 64-byte value union.
#[repr(C)]
pub(super) struct LaunchAttribute {
    id: u32,
    pad: u32,
    value: [u64; 8],
}

/// `CUlaunchConfig`.
#[repr(C)]
pub(super) struct LaunchConfig {
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    stream: usize,
    attrs: *const LaunchAttribute,
    num_attrs: u32,
}

fn_table! {
    /// The CUDA driver entry points this library uses.
    CuApi {
        required {
            cuInit: fn(u32) -> CUresult;
            cuDriverGetVersion: fn(*mut i32) -> CUresult;
            cuGetErrorName: fn(CUresult, *mut *const c_char) -> CUresult;
            cuGetErrorString: fn(CUresult, *mut *const c_char) -> CUresult;
            cuDeviceGetCount: fn(*mut i32) -> CUresult;
            cuDeviceGet: fn(*mut i32, i32) -> CUresult;
            cuDeviceGetAttribute: fn(*mut i32, i32, i32) -> CUresult;
            cuDevicePrimaryCtxRetain: fn(*mut usize, i32) -> CUresult;
            cuCtxGetCurrent: fn(*mut usize) -> CUresult;
            cuCtxPushCurrent_v2: fn(usize) -> CUresult;
            cuCtxPopCurrent_v2: fn(*mut usize) -> CUresult;
            cuCtxGetDevice: fn(*mut i32) -> CUresult;
            cuPointerGetAttributes: fn(u32, *const i32, *mut *mut c_void, u64) -> CUresult;
            cuModuleLoadData: fn(*mut usize, *const c_void) -> CUresult;
            cuModuleGetFunction: fn(*mut usize, usize, *const c_char) -> CUresult;
            cuFuncSetAttribute: fn(usize, i32, i32) -> CUresult;
            cuLaunchKernel: fn(usize, u32, u32, u32, u32, u32, u32, u32, usize, *mut *mut c_void, *mut *mut c_void) -> CUresult;
            cuMemAlloc_v2: fn(*mut u64, usize) -> CUresult;
            cuMemFree_v2: fn(u64) -> CUresult;
            cuMemcpyAsync: fn(u64, u64, usize, usize) -> CUresult;
            cuStreamSynchronize: fn(usize) -> CUresult;
            cuStreamGetCtx: fn(usize, *mut usize) -> CUresult;
            cuStreamIsCapturing: fn(usize, *mut i32) -> CUresult;
        }
        optional {
            cuCtxGetId: fn(usize, *mut u64) -> CUresult;
            cuLaunchKernelEx: fn(*const LaunchConfig, usize, *mut *mut c_void, *mut *mut c_void) -> CUresult;
            cuFuncGetParamInfo: fn(usize, usize, *mut usize, *mut usize) -> CUresult;
            cuMemAllocAsync: fn(*mut u64, usize, usize) -> CUresult;
            cuMemFreeAsync: fn(u64, usize) -> CUresult;
            cuMemPoolCreate: fn(*mut usize, *const c_void) -> CUresult;
            cuMemPoolSetAttribute: fn(usize, i32, *mut c_void) -> CUresult;
            cuMemAllocFromPoolAsync: fn(*mut u64, usize, usize, usize) -> CUresult;
            // For `ccv1d info` / `ccv1d bench` only (src/gpu/timing.rs).
            cuDeviceGetName: fn(*mut c_char, i32, i32) -> CUresult;
            cuEventCreate: fn(*mut usize, u32) -> CUresult;
            cuEventRecord: fn(usize, usize) -> CUresult;
            cuEventSynchronize: fn(usize) -> CUresult;
            cuEventElapsedTime: fn(*mut f32, usize, usize) -> CUresult;
            cuEventElapsedTime_v2: fn(*mut f32, usize, usize) -> CUresult;
            cuEventDestroy_v2: fn(usize) -> CUresult;
            cuStreamCreate: fn(*mut usize, u32) -> CUresult;
            cuStreamDestroy_v2: fn(usize) -> CUresult;
            cuStreamBeginCapture_v2: fn(usize, i32) -> CUresult;
            cuStreamEndCapture: fn(usize, *mut usize) -> CUresult;
            cuGraphInstantiateWithFlags: fn(*mut usize, usize, u64) -> CUresult;
            cuGraphLaunch: fn(usize, usize) -> CUresult;
            cuGraphDestroy: fn(usize) -> CUresult;
            cuGraphExecDestroy: fn(usize) -> CUresult;
        }
    }
}

pub(crate) struct Cuda {
    lib: Lib,
    api: CuApi,
    devices: i32,
    /// Driver version (e.g. 13000), for messages.
    pub version: i32,
    /// Primary contexts this library retained (device → context). Kept for the process lifetime.
    primary: Mutex<HashMap<i32, usize>>,
}

impl Cuda {
    /// Open `libcuda.so.1`, resolve the table, `cuInit`, and count devices. Any failure is the
    /// `NO_DEVICE` message.
    pub fn load(dir: Option<&OsStr>) -> std::result::Result<Cuda, String> {
        let lib = Lib::open("CUDA", &["libcuda.so.1", "libcuda.so"], dir)?;
        // SAFETY: the signatures in the table are the CUDA driver API's.
        let api = unsafe { CuApi::resolve(&lib)? };
        let mut cuda = Cuda { lib, api, devices: 0, version: 0, primary: Mutex::new(HashMap::new()) };
        // SAFETY: plain driver calls with valid out-pointers.
        unsafe {
            let r = (cuda.api.cuInit)(0);
            if r != CUDA_SUCCESS {
                return Err(format!("CUDA driver {} found but cuInit failed: {}", cuda.lib.path, cuda.describe(r)));
            }
            (cuda.api.cuDriverGetVersion)(&mut cuda.version);
            let mut n = 0;
            let r = (cuda.api.cuDeviceGetCount)(&mut n);
            if r != CUDA_SUCCESS {
                return Err(format!("cuDeviceGetCount failed: {}", cuda.describe(r)));
            }
            if n <= 0 {
                return Err(format!("CUDA driver {} found but no CUDA device is visible", cuda.lib.path));
            }
            cuda.devices = n;
        }
        Ok(cuda)
    }

    /// "CUDA_ERROR_X (n): text".
    fn describe(&self, r: CUresult) -> String {
        let (name, text) = self.names(r);
        format!("{name} ({r}): {text}")
    }

    fn names(&self, r: CUresult) -> (String, String) {
        let mut name: *const c_char = std::ptr::null();
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: out-pointers; the driver returns static strings or leaves them NULL.
        unsafe {
            (self.api.cuGetErrorName)(r, &mut name);
            (self.api.cuGetErrorString)(r, &mut text);
            let s = |p: *const c_char, d: &str| {
                if p.is_null() {
                    d.to_string()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            (s(name, "CUDA_ERROR_UNKNOWN_CODE"), s(text, "unrecognized error code"))
        }
    }

    fn check(&self, r: CUresult, what: &str) -> Result<()> {
        if r == CUDA_SUCCESS {
            return Ok(());
        }
        let (name, text) = self.names(r);
        Err(driver::driver_error("CUDA", what, r, CUDA_ERROR_OUT_OF_MEMORY, &name, &text))
    }

    fn attr(&self, attr: i32, dev: i32) -> Result<i32> {
        let mut v = 0;
        // SAFETY: valid out-pointer; dev is an ordinal from the driver.
        self.check(unsafe { (self.api.cuDeviceGetAttribute)(&mut v, attr, dev) }, "cuDeviceGetAttribute")?;
        Ok(v)
    }

    fn current_context(&self) -> usize {
        let mut c = 0usize;
        // SAFETY: valid out-pointer.
        if unsafe { (self.api.cuCtxGetCurrent)(&mut c) } != CUDA_SUCCESS {
            return 0;
        }
        c
    }

    /// The device of the current context (which must exist).
    fn context_device(&self) -> Result<i32> {
        let mut d = -1;
        // SAFETY: valid out-pointer.
        self.check(unsafe { (self.api.cuCtxGetDevice)(&mut d) }, "cuCtxGetDevice")?;
        Ok(d)
    }

    /// The primary context of `dev`, retained once per device and kept.
    fn primary(&self, dev: i32) -> Result<usize> {
        if dev < 0 || dev >= self.devices {
            bail!(CCV1D_ERR_WRONG_DEVICE, "CUDA device {dev} does not exist ({} visible)", self.devices);
        }
        let mut map = self.primary.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&c) = map.get(&dev) {
            return Ok(c);
        }
        let mut handle = 0;
        let mut ctx = 0usize;
        // SAFETY: valid out-pointers, ordinal in range.
        unsafe {
            self.check((self.api.cuDeviceGet)(&mut handle, dev), "cuDeviceGet")?;
            self.check((self.api.cuDevicePrimaryCtxRetain)(&mut ctx, handle), "cuDevicePrimaryCtxRetain")?;
        }
        map.insert(dev, ctx);
        Ok(ctx)
    }

    fn push(&self, ctx: usize) -> Result<()> {
        // SAFETY: ctx is a live context handle (primary retained by us, or the caller's stream's).
        self.check(unsafe { (self.api.cuCtxPushCurrent_v2)(ctx) }, "cuCtxPushCurrent")
    }

    fn key(&self, ctx: usize) -> CtxKey {
        let mut id = 0u64;
        if let Some(f) = self.api.cuCtxGetId {
            // SAFETY: live context handle, valid out-pointer.
            unsafe { f(ctx, &mut id) };
        }
        CtxKey { vendor: 0, handle: ctx, id }
    }
}

impl Driver for Cuda {
    fn vendor(&self) -> Vendor {
        Vendor::Nvidia
    }
    fn api(&self) -> &'static str {
        "CUDA"
    }
    fn device_count(&self) -> i32 {
        self.devices
    }

    fn mem(&self, addr: usize) -> Mem {
        if addr == 0 {
            return Mem::Unknown;
        }
        // Each result lands in a zeroed u64, so a driver writing 1, 4 or 8 bytes reads the same.
        let attrs = [CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL];
        let mut out = [0u64; 3];
        let mut data: [*mut c_void; 3] = [
            &mut out[0] as *mut u64 as *mut c_void,
            &mut out[1] as *mut u64 as *mut c_void,
            &mut out[2] as *mut u64 as *mut c_void,
        ];
        // SAFETY: arrays of matching length; cuPointerGetAttributes reports unknown pointers as
        // zeros (CUDA_SUCCESS) rather than dereferencing anything.
        let r = unsafe { (self.api.cuPointerGetAttributes)(3, attrs.as_ptr(), data.as_mut_ptr(), addr as u64) };
        if r != CUDA_SUCCESS {
            return Mem::Unknown;
        }
        let ty = out[0] as u32;
        let managed = out[1] as u32 & 0xff != 0;
        let ordinal = out[2] as u32 as i32;
        if managed {
            return Mem::Managed(ordinal);
        }
        match ty {
            CU_MEMORYTYPE_DEVICE => Mem::Device(ordinal),
            CU_MEMORYTYPE_UNIFIED => Mem::Managed(ordinal),
            CU_MEMORYTYPE_HOST => Mem::Host,
            _ => Mem::Unknown,
        }
    }

    fn current_device(&self) -> Option<i32> {
        if self.current_context() == 0 {
            return None;
        }
        self.context_device().ok()
    }

    fn enter(&'static self, device: Option<i32>, stream: usize) -> Result<Scope> {
        let cur = self.current_context();
        let target = if !is_default_stream(stream) {
            let mut c = 0usize;
            // SAFETY: the caller's stream handle; valid out-pointer.
            self.check(unsafe { (self.api.cuStreamGetCtx)(stream, &mut c) }, "cuStreamGetCtx (is `stream` a live CUDA stream?)")?;
            c
        } else {
            match device {
                Some(dev) => {
                    if cur != 0 && self.context_device().ok() == Some(dev) {
                        cur
                    } else {
                        self.primary(dev)?
                    }
                }
                None if cur != 0 => cur,
                None => self.primary(0)?,
            }
        };
        let restore = if target != cur {
            self.push(target)?;
            Restore::PopContext
        } else {
            Restore::Nothing
        };
        // From here the Scope pops what we pushed, also on error.
        let mut scope = Scope::new(self, self.key(target), -1, restore);
        scope.device = self.context_device()?;
        Ok(scope)
    }

    fn leave(&self, restore: Restore) {
        if let Restore::PopContext = restore {
            let mut c = 0usize;
            // SAFETY: pops the context `enter` pushed on this thread.
            unsafe { (self.api.cuCtxPopCurrent_v2)(&mut c) };
        }
    }

    fn device_info(&self, dev: i32) -> Result<DeviceInfo> {
        let major = self.attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)?;
        let minor = self.attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)?;
        let smem = self.attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev)?;
        let optin = self.attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev).unwrap_or(0);
        Ok(DeviceInfo {
            vendor: Vendor::Nvidia,
            warp_size: self.attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev)? as u32,
            multiprocessors: self.attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)? as u32,
            max_threads_per_block: self.attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev)? as u32,
            max_shared_mem_per_block: smem.max(optin) as u32,
            arch: (major * 10 + minor) as u32,
            mem_gbps: peak_mem_gbps(
                self.attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev).unwrap_or(0),
                self.attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev).unwrap_or(0),
            ),
        })
    }

    fn module_load(&self, image: &[u8]) -> Result<usize> {
        let mut m = 0usize;
        // SAFETY: image is a complete fatbin that outlives the call (it is 'static in practice).
        let r = unsafe { (self.api.cuModuleLoadData)(&mut m, image.as_ptr() as *const c_void) };
        if r == CUDA_ERROR_NO_BINARY_FOR_GPU {
            let arch = self.context_device().and_then(|d| self.device_info(d)).map(|i| i.arch).unwrap_or(0);
            bail!(
                CCV1D_ERR_DEVICE,
                "the CUDA kernels in this build have no code for this GPU (sm_{arch}); rebuild with that architecture: {}",
                self.describe(r)
            );
        }
        self.check(r, "cuModuleLoadData")?;
        Ok(m)
    }

    fn module_function(&self, module: usize, name: &CStr) -> Result<Option<usize>> {
        let mut f = 0usize;
        // SAFETY: live module, C string.
        let r = unsafe { (self.api.cuModuleGetFunction)(&mut f, module, name.as_ptr()) };
        if r == CUDA_ERROR_NOT_FOUND {
            return Ok(None);
        }
        self.check(r, "cuModuleGetFunction")?;
        Ok(Some(f))
    }

    fn param_size(&self, func: usize) -> Option<usize> {
        let f = self.api.cuFuncGetParamInfo?;
        let (mut off, mut size) = (0usize, 0usize);
        // SAFETY: live function, valid out-pointers.
        (unsafe { f(func, 0, &mut off, &mut size) } == CUDA_SUCCESS).then_some(size)
    }

    fn set_max_dynamic_shared(&self, func: usize, bytes: u32) -> Result<()> {
        if bytes <= DEFAULT_DYNAMIC_SHARED {
            return Ok(());
        }
        // SAFETY: live function.
        self.check(
            unsafe { (self.api.cuFuncSetAttribute)(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32) },
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        )
    }

    fn launch(&self, func: usize, l: &Launch, stream: usize) -> Result<()> {
        // The kernel's single by-value parameter: the driver copies its bytes at launch time.
        let mut args: [*mut c_void; 1] = [l.params.as_ptr() as *mut c_void];
        if let Some(launch_ex) = self.api.cuLaunchKernelEx.filter(|_| l.overlap_previous && self.version >= PROGRAMMATIC_MIN_DRIVER) {
            // value.programmaticStreamSerializationAllowed = 1 (an int at the union's start)
            let attr = LaunchAttribute { id: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, pad: 0, value: [1, 0, 0, 0, 0, 0, 0, 0] };
            let cfg = LaunchConfig { grid: l.grid, block: l.block, shared_mem_bytes: l.shared_mem_bytes, stream, attrs: &attr, num_attrs: 1 };
            // SAFETY: as cuLaunchKernel below; `cfg` and `attr` outlive the call.
            let r = unsafe { launch_ex(&cfg, func, args.as_mut_ptr(), std::ptr::null_mut()) };
            return self.check(r, &format!("cuLaunchKernelEx({})", l.kernel));
        }
        // SAFETY: live function in the current context; `args` holds one pointer to the parameter
        // block, whose size was checked against the kernel's where the driver can tell.
        let r = unsafe {
            (self.api.cuLaunchKernel)(
                func,
                l.grid[0],
                l.grid[1],
                l.grid[2],
                l.block[0],
                l.block[1],
                l.block[2],
                l.shared_mem_bytes,
                stream,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        self.check(r, &format!("cuLaunchKernel({})", l.kernel))
    }

    fn pool_create(&self, dev: i32) -> Option<usize> {
        let (create, set) = (self.api.cuMemPoolCreate?, self.api.cuMemPoolSetAttribute?);
        self.api.cuMemAllocFromPoolAsync?;
        if self.attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev).ok()? == 0 {
            return None;
        }
        // CUmemPoolProps: allocType, handleTypes, location {type, id}, then pointers/reserved
        // bytes that must be zero (88 bytes in CUDA 13; a larger zeroed buffer is fine).
        let mut props = [0i32; 32];
        props[0] = CU_MEM_ALLOCATION_TYPE_PINNED;
        props[1] = 0;
        props[2] = CU_MEM_LOCATION_TYPE_DEVICE;
        props[3] = dev;
        let mut pool = 0usize;
        // SAFETY: a zeroed props block of at least the struct's size; valid out-pointer.
        if unsafe { create(&mut pool, props.as_ptr() as *const c_void) } != CUDA_SUCCESS {
            return None;
        }
        // Keep freed blocks for reuse instead of returning them to the OS at each sync.
        let mut keep = u64::MAX;
        // SAFETY: live pool; the attribute's value type is cuuint64_t.
        unsafe { set(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &mut keep as *mut u64 as *mut c_void) };
        Some(pool)
    }

    fn alloc_async(&self, pool: Option<usize>, bytes: usize, stream: usize) -> Result<usize> {
        let mut p = 0u64;
        // SAFETY: valid out-pointer; pool from pool_create; stream is the caller's.
        let r = unsafe {
            match (pool, self.api.cuMemAllocFromPoolAsync, self.api.cuMemAllocAsync) {
                (Some(pool), Some(f), _) => f(&mut p, bytes, pool, stream),
                (_, _, Some(f)) => f(&mut p, bytes, stream),
                _ => bail!(
                    CCV1D_ERR_WORKSPACE,
                    "this CUDA driver has no stream-ordered allocator: pass a workspace of {bytes} bytes (ccv1d_bwd_workspace_size)"
                ),
            }
        };
        self.check(r, &format!("cuMemAllocAsync({bytes} bytes of workspace)"))?;
        Ok(p as usize)
    }

    fn free_async(&self, ptr: usize, stream: usize) -> Result<()> {
        let Some(f) = self.api.cuMemFreeAsync else {
            bail!(CCV1D_ERR_INTERNAL, "cuMemFreeAsync missing after an async allocation")
        };
        // SAFETY: ptr from alloc_async on this stream.
        self.check(unsafe { f(ptr as u64, stream) }, "cuMemFreeAsync")
    }

    fn malloc(&self, bytes: usize) -> Result<usize> {
        let mut p = 0u64;
        // SAFETY: valid out-pointer, a context is current.
        self.check(unsafe { (self.api.cuMemAlloc_v2)(&mut p, bytes) }, &format!("cuMemAlloc({bytes} bytes)"))?;
        Ok(p as usize)
    }

    fn free(&self, ptr: usize) -> Result<()> {
        // SAFETY: the caller's device pointer (checked to be device memory).
        self.check(unsafe { (self.api.cuMemFree_v2)(ptr as u64) }, "cuMemFree")
    }

    fn memcpy_async(&self, dst: usize, src: usize, bytes: usize, stream: usize) -> Result<()> {
        // SAFETY: unified addressing: the driver infers each side's memory type.
        self.check(unsafe { (self.api.cuMemcpyAsync)(dst as u64, src as u64, bytes, stream) }, "cuMemcpyAsync")
    }

    fn stream_synchronize(&self, stream: usize) -> Result<()> {
        // SAFETY: caller's stream (or a default-stream handle) in the current context.
        self.check(unsafe { (self.api.cuStreamSynchronize)(stream) }, "cuStreamSynchronize")
    }

    fn synchronize_default(&'static self, stream: usize) -> Result<()> {
        let cur = self.current_context();
        if cur != 0 {
            self.stream_synchronize(stream)?;
        }
        let ctxs: Vec<usize> = self.primary.lock().unwrap_or_else(|e| e.into_inner()).values().copied().collect();
        for ctx in ctxs.into_iter().filter(|&c| c != cur) {
            self.push(ctx)?;
            let _pop = Scope::new(self, self.key(ctx), -1, Restore::PopContext);
            self.stream_synchronize(stream)?;
        }
        Ok(())
    }

    fn is_capturing(&self, stream: usize) -> bool {
        let mut status = 0;
        // SAFETY: caller's stream, valid out-pointer. An error (e.g. the legacy stream while
        // another stream captures) counts as capturing: no host sync then.
        let r = unsafe { (self.api.cuStreamIsCapturing)(stream, &mut status) };
        r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE
    }

    fn device_name(&self, dev: i32) -> Option<String> {
        let f = self.api.cuDeviceGetName?;
        let mut handle = 0;
        let mut buf = [0 as c_char; 256];
        // SAFETY: valid out-pointers; the driver writes a NUL-terminated name of at most len bytes.
        unsafe {
            if (self.api.cuDeviceGet)(&mut handle, dev) != CUDA_SUCCESS || f(buf.as_mut_ptr(), buf.len() as i32 - 1, handle) != CUDA_SUCCESS {
                return None;
            }
            Some(CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
        }
    }

    fn event_create(&self) -> Result<usize> {
        let Some(f) = self.api.cuEventCreate else { bail!(CCV1D_ERR_DEVICE, "this CUDA driver lacks cuEventCreate") };
        let mut e = 0usize;
        // SAFETY: valid out-pointer, a context is current; flags 0 = CU_EVENT_DEFAULT (timing on).
        self.check(unsafe { f(&mut e, 0) }, "cuEventCreate")?;
        Ok(e)
    }

    fn event_record(&self, event: usize, stream: usize) -> Result<()> {
        let Some(f) = self.api.cuEventRecord else { bail!(CCV1D_ERR_DEVICE, "this CUDA driver lacks cuEventRecord") };
        // SAFETY: live event and stream of the current context.
        self.check(unsafe { f(event, stream) }, "cuEventRecord")
    }

    fn event_synchronize(&self, event: usize) -> Result<()> {
        let Some(f) = self.api.cuEventSynchronize else { bail!(CCV1D_ERR_DEVICE, "this CUDA driver lacks cuEventSynchronize") };
        // SAFETY: live event.
        self.check(unsafe { f(event) }, "cuEventSynchronize")
    }

    fn event_elapsed_ms(&self, start: usize, end: usize) -> Result<f32> {
        let Some(f) = self.api.cuEventElapsedTime_v2.or(self.api.cuEventElapsedTime) else {
            bail!(CCV1D_ERR_DEVICE, "this CUDA driver lacks cuEventElapsedTime")
        };
        let mut ms = 0f32;
        // SAFETY: live, completed events; valid out-pointer.
        self.check(unsafe { f(&mut ms, start, end) }, "cuEventElapsedTime")?;
        Ok(ms)
    }

    fn event_destroy(&self, event: usize) {
        if let Some(f) = self.api.cuEventDestroy_v2 {
            // SAFETY: an event from event_create.
            unsafe { f(event) };
        }
    }

    fn stream_create(&self) -> Result<usize> {
        let Some(f) = self.api.cuStreamCreate else { bail!(CCV1D_ERR_DEVICE, "this CUDA driver lacks cuStreamCreate") };
        let mut st = 0usize;
        // SAFETY: valid out-pointer, a context is current.
        self.check(unsafe { f(&mut st, CU_STREAM_NON_BLOCKING) }, "cuStreamCreate")?;
        Ok(st)
    }

    fn stream_destroy(&self, stream: usize) {
        if let Some(f) = self.api.cuStreamDestroy_v2 {
            // SAFETY: a stream from stream_create.
            unsafe { f(stream) };
        }
    }

    fn capture_begin(&self, stream: usize) -> Result<()> {
        let Some(f) = self.api.cuStreamBeginCapture_v2 else { bail!(CCV1D_ERR_DEVICE, "this CUDA driver lacks cuStreamBeginCapture") };
        // SAFETY: a live, non-default stream.
        self.check(unsafe { f(stream, CU_STREAM_CAPTURE_MODE_RELAXED) }, "cuStreamBeginCapture")
    }

    fn capture_end(&self, stream: usize) -> Result<usize> {
        let (Some(end), Some(inst), Some(destroy)) = (self.api.cuStreamEndCapture, self.api.cuGraphInstantiateWithFlags, self.api.cuGraphDestroy) else {
            bail!(CCV1D_ERR_DEVICE, "this CUDA driver lacks the graph entry points")
        };
        let (mut graph, mut exec) = (0usize, 0usize);
        // SAFETY: a capturing stream; valid out-pointers; the template graph is destroyed once
        // instantiated (the executable graph does not depend on it).
        unsafe {
            self.check(end(stream, &mut graph), "cuStreamEndCapture")?;
            let r = inst(&mut exec, graph, 0);
            destroy(graph);
            self.check(r, "cuGraphInstantiate")?;
        }
        Ok(exec)
    }

    fn graph_launch(&self, exec: usize, stream: usize) -> Result<()> {
        let Some(f) = self.api.cuGraphLaunch else { bail!(CCV1D_ERR_DEVICE, "this CUDA driver lacks cuGraphLaunch") };
        // SAFETY: an executable graph from capture_end, a live stream.
        self.check(unsafe { f(exec, stream) }, "cuGraphLaunch")
    }

    fn graph_destroy(&self, exec: usize) {
        if let Some(f) = self.api.cuGraphExecDestroy {
            // SAFETY: an executable graph from capture_end.
            unsafe { f(exec) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cuda.h's CUlaunchAttribute (72 bytes: id, padding, a 64-byte union) and CUlaunchConfig
    /// (seven u32, the stream at 32, the attribute list at 40, its count at 48; 56 bytes).
    #[test]
    fn launch_config_layout() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<LaunchAttribute>(), 72);
        assert_eq!(offset_of!(LaunchAttribute, value), 8);
        assert_eq!(size_of::<LaunchConfig>(), 56);
        assert_eq!(offset_of!(LaunchConfig, shared_mem_bytes), 24);
        assert_eq!(offset_of!(LaunchConfig, stream), 32);
        assert_eq!(offset_of!(LaunchConfig, attrs), 40);
        assert_eq!(offset_of!(LaunchConfig, num_attrs), 48);
    }
}
