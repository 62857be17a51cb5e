//! GPU backend: the kernels embedded by build.rs, launched through the vendor's driver API opened
//! with `dlopen` at run time (nothing GPU-related is linked; see DESIGN.md "Why the driver API").
//!
//! Every op takes the same path (`exec`):
//! 1. **Where**: the driver that owns `x` (CUDA first, then HIP) and its device ordinal, from the
//!    driver's pointer attributes. `x` must be device (or managed) memory, and so must every other
//!    non-null pointer of the plan, on the same device; else `WRONG_DEVICE` naming the field.
//! 2. **Which context**: the caller's stream's context; for the default stream (NULL), the
//!    thread's current context when it is on that device, else the device's primary context
//!    (retained once, kept). A context we make current is pushed for the call and popped after,
//!    so the library works inside a PyTorch process on PyTorch's tensors and streams and leaves
//!    the thread as it found it. A stream on another device than the tensors: `WRONG_DEVICE`.
//! 3. **Module**: loaded once per context (`cache.rs`), with the device's facts (`DeviceInfo`) and
//!    the functions looked up by name.
//! 4. **Launches**: from kernel selection (`kernels/`), each kernel's single by-value parameter
//!    struct passed as `void* args[] = { params }`, on the caller's stream. No host sync and no
//!    synchronous allocation anywhere on this path: it is graph-capture safe.
//! 5. **Workspace** (bwd): the caller's (`workspace`, at least `ccv1d_bwd_workspace_size` bytes,
//!    else `WORKSPACE`), or a stream-ordered allocation from this library's own pool on the
//!    caller's stream, freed stream-ordered after the launches (the pool keeps its memory for
//!    reuse; it is not the device's default pool, so other users' settings are untouched).
//!
//! `CCV1D_SYNC_CHECK=1` (debugging): synchronise after each launch (unless the stream is capturing)
//! and report a fault as `DEVICE` naming the kernel. `CCV1D_DRIVER_DIR=<dir>`: load the driver
//! library from that directory only. `CCV1D_GPU_POOL_LIMIT_BYTES=<n>` (read once): a backward
//! that would take more than n bytes of workspace from the library's pool fails with
//! `OUT_OF_MEMORY` instead (caps the pool's use per call; tests use it to reach the
//! out-of-memory path on demand). A caller's `workspace` is not limited.
//!
//! Device helpers (`ccv1d_malloc`, ...) use the first driver with a device (CUDA, then HIP).
//! `memcpy` is asynchronous on its stream: host buffers must stay alive and unchanged until the
//! stream is synchronised (`ccv1d_synchronize`).

mod cache;
mod cuda;
mod driver;
mod hip;
mod kernels;
pub mod launch;
pub mod timing;

use std::sync::OnceLock;

use crate::error::*;
use crate::params::{CCV1D_HAVE_CUDA, CCV1D_HAVE_ROCM};
use crate::plan::*;
use driver::{is_default_stream, Driver, Mem};
use launch::{DeviceInfo, Launch, Vendor};

// ---------------------------------------------------------------------------------------------
// Kernel images embedded by build.rs (page-aligned: loaders may expect aligned ELF/fatbin data).

#[cfg(any(ccv1d_cuda, ccv1d_rocm))]
#[repr(C, align(4096))]
struct Aligned<B: ?Sized>(B);

#[cfg(ccv1d_cuda)]
static CUDA_IMAGE: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/ccv1d_kernels.fatbin")));
#[cfg(ccv1d_rocm)]
static ROCM_IMAGE: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/ccv1d_kernels.hsaco")));

fn embedded(vendor: Vendor) -> Option<&'static [u8]> {
    match vendor {
        #[cfg(ccv1d_cuda)]
        Vendor::Nvidia => Some(&CUDA_IMAGE.0),
        #[cfg(ccv1d_rocm)]
        Vendor::Amd => Some(&ROCM_IMAGE.0),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// Test-only replacements for the embedded images (`testing::set_image`).
static IMAGE_OVERRIDE: [OnceLock<&'static [u8]>; 2] = [OnceLock::new(), OnceLock::new()];

fn image(vendor: Vendor) -> Option<&'static [u8]> {
    IMAGE_OVERRIDE[vendor as usize].get().copied().or_else(|| embedded(vendor))
}

/// Bit set of the GPU backends compiled into this build (`CCV1D_HAVE_CUDA` / `CCV1D_HAVE_ROCM`).
pub fn compiled_backends() -> u32 {
    (if cfg!(ccv1d_cuda) { CCV1D_HAVE_CUDA } else { 0 }) | (if cfg!(ccv1d_rocm) { CCV1D_HAVE_ROCM } else { 0 })
}

/// The usable drivers of the vendors this build has kernels for, CUDA first.
fn drivers() -> Result<Vec<&'static dyn Driver>> {
    let mut out: Vec<&'static dyn Driver> = Vec::with_capacity(2);
    let mut errors = Vec::new();
    let mut compiled = false;
    for v in [Vendor::Nvidia, Vendor::Amd] {
        if image(v).is_none() {
            continue;
        }
        compiled = true;
        match driver::driver(v) {
            Ok(d) => out.push(d),
            Err(e) => errors.push(e),
        }
    }
    if !compiled {
        bail!(CCV1D_ERR_NO_DEVICE, "no GPU backend compiled into this build (CPU only)");
    }
    if out.is_empty() {
        bail!(CCV1D_ERR_NO_DEVICE, "no usable GPU: {}", errors.join("; "));
    }
    Ok(out)
}

fn sync_check() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CCV1D_SYNC_CHECK").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// `CCV1D_GPU_POOL_LIMIT_BYTES`: None when unset or empty; an unparsable value is kept as its
/// text so that every pooled call reports it.
fn pool_limit() -> Option<std::result::Result<usize, String>> {
    static LIMIT: OnceLock<Option<std::result::Result<usize, String>>> = OnceLock::new();
    LIMIT
        .get_or_init(|| {
            let v = std::env::var("CCV1D_GPU_POOL_LIMIT_BYTES").ok().filter(|v| !v.trim().is_empty())?;
            Some(v.trim().parse::<usize>().map_err(|_| v))
        })
        .clone()
}

/// A pooled workspace of `need` bytes, refused above `CCV1D_GPU_POOL_LIMIT_BYTES`.
fn pooled_workspace(drv: &dyn Driver, pool: Option<usize>, need: usize, stream: usize) -> Result<usize> {
    match pool_limit() {
        Some(Err(text)) => bail!(CCV1D_ERR_WORKSPACE, "CCV1D_GPU_POOL_LIMIT_BYTES={text:?} is not a byte count"),
        Some(Ok(limit)) if need > limit => bail!(
            CCV1D_ERR_OUT_OF_MEMORY,
            "workspace: this backward needs {need} bytes from the library's pool, over CCV1D_GPU_POOL_LIMIT_BYTES={limit}; pass a `workspace` (ccv1d_bwd_workspace_size) or raise the limit"
        ),
        _ => drv.alloc_async(pool, need, stream),
    }
}

fn ordinal(m: Mem) -> Option<i32> {
    match m {
        Mem::Device(d) => Some(d),
        Mem::Managed(d) if d >= 0 => Some(d),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Where a call runs

/// The plan's pointers as (field name, address); the first is the one that decides the device.
type Fields = Vec<(&'static str, usize)>;

fn push_view(f: &mut Fields, name: &'static str, v: Option<View>) {
    if let Some(v) = v {
        f.push((name, v.addr));
    }
}
fn push_idx(f: &mut Fields, name: &'static str, v: Option<IdxView>) {
    if let Some(v) = v {
        f.push((name, v.addr));
    }
}

fn conv_fields(i: &ConvInputs) -> Fields {
    let mut f = vec![("x", i.x.addr), ("weight", i.weight.addr)];
    push_view(&mut f, "bias", i.bias);
    push_idx(&mut f, "seq_idx", i.seq_idx);
    push_view(&mut f, "initial_states", i.initial_states);
    if let Seqs::Packed { cu_seqlens, .. } = i.seqs {
        f.push(("cu_seqlens", cu_seqlens.addr));
    }
    push_idx(&mut f, "state_indices", i.pool.state_indices);
    push_idx(&mut f, "has_initial_state", i.pool.has_initial_state);
    f
}

fn fwd_fields(p: &FwdPlan) -> Fields {
    let mut f = conv_fields(&p.inp);
    f.push(("out", p.out.addr));
    push_view(&mut f, "final_states", p.final_states);
    f
}

fn bwd_fields(p: &BwdPlan) -> Fields {
    let mut f = conv_fields(&p.inp);
    f.push(("dout", p.dout.addr));
    push_view(&mut f, "dfinal_states", p.dfinal_states);
    f.push(("dx", p.dx.addr));
    f.push(("dweight", p.dweight.addr));
    push_view(&mut f, "dbias", p.dbias);
    push_view(&mut f, "dinitial_states", p.dinitial_states);
    if let Some((addr, _)) = p.workspace {
        f.push(("workspace", addr));
    }
    f
}

fn update_fields(p: &UpdatePlan) -> Fields {
    let mut f = vec![("x", p.x.addr), ("weight", p.weight.addr)];
    push_view(&mut f, "bias", p.bias);
    f.push(("out", p.out.addr));
    f.push(("conv_state", p.conv_state.addr));
    push_idx(&mut f, "cache_seqlens", p.cache_seqlens);
    push_idx(&mut f, "conv_state_indices", p.conv_state_indices);
    f
}

fn not_device_memory(name: &str, addr: usize, m: Mem) -> Error {
    let what = if m == Mem::Host { "pinned host memory" } else { "not GPU memory (host or unregistered memory)" };
    Error::new(
        CCV1D_ERR_WRONG_DEVICE,
        format!("`{name}` ({addr:#x}) is {what}: the GPU backend needs device memory for every tensor (use the CPU backend, or AUTO, for host data)"),
    )
}

/// The driver owning the plan's memory and the device it is on; checks every pointer.
fn locate(fields: &[(&'static str, usize)]) -> Result<(&'static dyn Driver, i32)> {
    let drivers = drivers()?;
    let (xname, x) = fields[0];
    let mut owner = None;
    let mut xm = Mem::Unknown;
    for &d in &drivers {
        let m = d.mem(x);
        if m.on_device() {
            owner = Some(d);
            xm = m;
            break;
        }
        if m == Mem::Host {
            xm = m;
        }
    }
    let Some(drv) = owner else { return Err(not_device_memory(xname, x, xm)) };
    // The device: the first field in device (not managed) memory decides, x's when it is.
    let mut dev: Option<(&str, i32)> = if let Mem::Device(d) = xm { Some((xname, d)) } else { None };
    for &(name, addr) in &fields[1..] {
        if addr == 0 {
            continue;
        }
        match drv.mem(addr) {
            Mem::Device(d) => match dev {
                None => dev = Some((name, d)),
                Some((_, e)) if e == d => {}
                Some((first, e)) => bail!(
                    CCV1D_ERR_WRONG_DEVICE,
                    "`{name}` is on {} device {d} but `{first}` is on device {e}: all tensors of a call must be on one device",
                    drv.api()
                ),
            },
            Mem::Managed(_) => {}
            m => return Err(not_device_memory(name, addr, m)),
        }
    }
    let device = dev.map(|(_, d)| d).or_else(|| ordinal(xm)).or_else(|| drv.current_device()).unwrap_or(0);
    Ok((drv, device))
}

// ---------------------------------------------------------------------------------------------
// The one execution path

/// Check the pointers, enter the right context, get the module, provide the workspace (caller's
/// or pooled, `need` bytes), and run the launches `make` returns, on `stream`.
fn exec(
    fields: &[(&'static str, usize)],
    stream: usize,
    workspace: Option<(usize, usize)>,
    need: impl FnOnce(&DeviceInfo) -> usize,
    make: impl FnOnce(&DeviceInfo, usize) -> Result<Vec<Launch>>,
) -> Result<()> {
    let (drv, device) = locate(fields)?;
    let image = image(drv.vendor()).ok_or_else(|| Error::new(CCV1D_ERR_INTERNAL, "driver without image"))?;
    let scope = drv.enter(Some(device), stream)?;
    if scope.device != device {
        bail!(
            CCV1D_ERR_WRONG_DEVICE,
            "`stream` belongs to {} device {} but the tensors are on device {device}",
            drv.api(),
            scope.device
        );
    }
    let ld = cache::loaded(drv, &scope, image)?;
    let need = need(&ld.info);
    let (ws, pooled) = match workspace {
        Some((addr, bytes)) => {
            if addr % 16 != 0 {
                bail!(CCV1D_ERR_WORKSPACE, "`workspace` ({addr:#x}) must be 16-byte aligned");
            }
            if bytes < need {
                bail!(
                    CCV1D_ERR_WORKSPACE,
                    "`workspace` has {bytes} bytes but this call needs {need} (ccv1d_bwd_workspace_size); pass NULL to use the library's pool"
                );
            }
            (addr, false)
        }
        None if need == 0 => (0, false),
        None => (pooled_workspace(drv, ld.pool, need, stream)?, true),
    };
    let result = make(&ld.info, ws).and_then(|launches| run(drv, &ld, &launches, stream));
    if pooled {
        // Stream-ordered: the memory returns to the pool after the launches above complete.
        let freed = drv.free_async(ws, stream);
        return result.and(freed);
    }
    result
}

fn run(drv: &dyn Driver, ld: &cache::Loaded, launches: &[Launch], stream: usize) -> Result<()> {
    // Look every kernel up first, so a bad list fails before anything is launched.
    let mut funcs = Vec::with_capacity(launches.len());
    for l in launches {
        funcs.push(ld.function(drv, l)?);
    }
    for (l, &f) in launches.iter().zip(&funcs) {
        if l.grid.contains(&0) || l.block.contains(&0) {
            continue; // nothing to do (an empty problem)
        }
        drv.launch(f, l, stream)?;
        if sync_check() && !drv.is_capturing(stream) {
            drv.stream_synchronize(stream)
                .map_err(|e| Error::new(e.status, format!("kernel {} failed (CCV1D_SYNC_CHECK): {}", l.kernel, e.msg)))?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The backend API used by capi.rs

pub fn fwd(p: &FwdPlan) -> Result<()> {
    exec(&fwd_fields(p), p.inp.stream, None, |_| 0, |info, _| kernels::fwd_launches(p, info))
}

pub fn bwd(p: &BwdPlan) -> Result<()> {
    exec(
        &bwd_fields(p),
        p.inp.stream,
        p.workspace,
        |info| kernels::bwd_workspace_bytes(p, info),
        |info, ws| kernels::bwd_launches(p, info, ws),
    )
}

/// Workspace bytes `bwd` needs for this plan on the device of `x` (when `x` is device memory;
/// else the current device, else device 0). Loads nothing, launches nothing.
pub fn bwd_workspace_size(p: &BwdPlan) -> Result<usize> {
    let drivers = drivers()?;
    let x = p.inp.x.addr;
    let (drv, dev) = drivers
        .iter()
        .find_map(|&d| ordinal(d.mem(x)).map(|n| (d, n)))
        .unwrap_or_else(|| (drivers[0], drivers[0].current_device().unwrap_or(0)));
    let info = cache::device_info(drv, dev)?;
    Ok(kernels::bwd_workspace_bytes(p, &info))
}

pub fn update(p: &UpdatePlan) -> Result<()> {
    exec(&update_fields(p), p.stream, None, |_| 0, |info, _| kernels::update_launches(p, info))
}

/// GPUs of the first driver that has any (CUDA, then HIP).
pub fn device_count() -> Result<i32> {
    Ok(drivers()?[0].device_count())
}

/// One GPU as `ccv1d info` lists it.
#[derive(Clone, Debug)]
pub struct DeviceListing {
    /// "CUDA" or "HIP".
    pub api: &'static str,
    pub ordinal: i32,
    /// The driver's name for the device, when it can tell.
    pub name: Option<String>,
    pub info: DeviceInfo,
}

/// Every device of every usable driver this build has kernels for (for `ccv1d info`).
pub fn devices() -> Result<Vec<DeviceListing>> {
    let mut v = Vec::new();
    for d in drivers()? {
        for i in 0..d.device_count() {
            v.push(DeviceListing { api: d.api(), ordinal: i, name: d.device_name(i), info: cache::device_info(d, i)? });
        }
    }
    Ok(v)
}

/// Device memory in the calling thread's current context (HIP: current device), else on device
/// 0. Zero bytes gives NULL.
pub fn malloc(bytes: usize) -> Result<usize> {
    if bytes == 0 {
        return Ok(0);
    }
    let drv = drivers()?[0];
    let _scope = drv.enter(None, 0)?;
    drv.malloc(bytes)
}

/// Free device memory (from `malloc`, or any device allocation of the driver).
pub fn free(ptr: usize) -> Result<()> {
    let drivers = drivers()?;
    let Some((drv, m)) = drivers.iter().find_map(|&d| Some(d.mem(ptr)).filter(|m| m.on_device()).map(|m| (d, m))) else {
        let m = drivers[0].mem(ptr);
        return Err(not_device_memory("ptr", ptr, m));
    };
    let _scope = drv.enter(ordinal(m), 0)?;
    drv.free(ptr)
}

/// Copy between any host/device pointers (unified addressing), ordered on `stream`.
/// Asynchronous: host memory must stay valid until the stream is synchronised.
pub fn memcpy(dst: usize, src: usize, bytes: usize, stream: usize) -> Result<()> {
    let drivers = drivers()?;
    let owner = drivers.iter().find_map(|&d| {
        let (md, ms) = (d.mem(dst), d.mem(src));
        if md.on_device() {
            Some((d, md))
        } else if ms.on_device() {
            Some((d, ms))
        } else {
            None
        }
    });
    let (drv, dev) = match owner {
        Some((d, m)) => (d, ordinal(m)),
        None => (drivers[0], None),
    };
    let _scope = drv.enter(dev, stream)?;
    drv.memcpy_async(dst, src, bytes, stream)
}

/// For `ccv1d bench`'s copy ceiling: copy `bytes` (a multiple of 16; both pointers device memory,
/// 16-byte aligned) with the library's 16-byte-vector copy kernel, ordered on `stream`.
pub fn copy_kernel(dst: usize, src: usize, bytes: usize, stream: usize) -> Result<()> {
    if bytes % 16 != 0 || dst % 16 != 0 || src % 16 != 0 {
        bail!(CCV1D_ERR_SHAPE, "copy_kernel: bytes and both pointers must be multiples of 16");
    }
    exec(&[("dst", dst), ("src", src)], stream, None, |_| 0, |info, _| Ok(vec![kernels::copy_launch(dst, src, bytes, info)]))
}

/// Wait for `stream`. The default stream (NULL): the current context's and those of every device
/// this library has switched to.
pub fn synchronize(stream: usize) -> Result<()> {
    let drivers = drivers()?;
    if is_default_stream(stream) {
        for d in drivers {
            d.synchronize_default(stream)?;
        }
        return Ok(());
    }
    let drv = drivers[0];
    let _scope = drv.enter(None, stream)?;
    drv.stream_synchronize(stream)
}

/// True when `addr` is device (or managed) memory of a GPU this build can drive. False without a
/// driver, for host memory, for anything unknown. Never faults, never prints.
pub fn is_device_pointer(addr: usize) -> bool {
    if addr == 0 {
        return false;
    }
    drivers().map(|ds| ds.iter().any(|d| d.mem(addr).on_device())).unwrap_or(false)
}

/// For the GPU smoke test (tests/gpu/smoke) and the library's own tests: not a public API.
#[doc(hidden)]
pub mod testing {
    pub use super::launch::{DeviceInfo, Launch, Vendor};
    use crate::error::*;

    /// Use `image` instead of the embedded kernels of `vendor` (also enables that vendor in a
    /// build without its kernels). Call before any GPU call; false if already set. The image must
    /// stay valid and be suitably aligned (8 bytes for a fatbin).
    pub fn set_image(vendor: Vendor, image: &'static [u8]) -> bool {
        super::IMAGE_OVERRIDE[vendor as usize].set(image).is_ok()
    }

    /// [`set_image`] from a file: a fatbin/cubin (NVIDIA) or a code object `.hsaco`/`.co` (AMD),
    /// read into an 8-byte aligned, leaked buffer. For kernel tuning (`ccv1d bench --image`) and
    /// the smoke test. Returns the vendor the image was installed for, and the image.
    pub fn set_image_file(path: &str) -> std::result::Result<(Vendor, &'static [u8]), String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read kernel image {path}: {e}"))?;
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        // SAFETY: `words` has room for bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr() as *mut u8, bytes.len()) };
        let words: &'static [u64] = Box::leak(words.into_boxed_slice());
        // SAFETY: a view of the leaked words as bytes.
        let image: &'static [u8] = unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, bytes.len()) };
        let vendor = if path.ends_with(".hsaco") || path.ends_with(".co") { Vendor::Amd } else { Vendor::Nvidia };
        if !set_image(vendor, image) {
            return Err(format!("a {vendor:?} kernel image was already set"));
        }
        Ok((vendor, image))
    }

    /// Run `make`'s launches exactly as `ccv1d_fwd`/`ccv1d_bwd` run theirs: pointer checks
    /// (`fields[0]` decides the device), context, module cache, workspace of `need` bytes (the
    /// caller's `workspace`, or pooled), launches on `stream`. `make` gets the device facts and
    /// the workspace address.
    pub fn run(
        fields: &[(&'static str, usize)],
        stream: usize,
        workspace: Option<(usize, usize)>,
        need: usize,
        make: impl FnOnce(&DeviceInfo, usize) -> Vec<Launch>,
    ) -> Result<()> {
        super::exec(fields, stream, workspace, |_| need, |i, ws| Ok(make(i, ws)))
    }

    /// The device facts of the device owning `addr`.
    pub fn device_info_of(addr: usize) -> Result<DeviceInfo> {
        let (drv, dev) = super::locate(&[("ptr", addr)])?;
        super::cache::device_info(drv, dev)
    }

    /// Why the vendor's driver is unusable (None when it loaded).
    pub fn driver_error(vendor: Vendor) -> Option<String> {
        super::driver::driver(vendor).err().map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine has no GPU (CI and the development machine): every entry point must answer
    /// NO_DEVICE with a message, whatever this build compiled.
    #[test]
    fn no_device_everywhere() {
        if drivers().is_ok() {
            eprintln!("a GPU driver with devices is present: skipping the no-device test");
            return;
        }
        let host = [1.0f32; 16];
        let a = host.as_ptr() as usize;
        let checks: Vec<(&str, Result<()>)> = vec![
            ("device_count", device_count().map(drop)),
            ("malloc", malloc(64).map(drop)),
            ("free", free(a)),
            ("memcpy", memcpy(a, a, 4, 0)),
            ("synchronize", synchronize(0)),
        ];
        for (what, r) in checks {
            let e = r.expect_err(what);
            assert_eq!(e.status, CCV1D_ERR_NO_DEVICE, "{what}: {}", e.msg);
            assert!(!e.msg.is_empty(), "{what}");
        }
        assert!(!is_device_pointer(a));
        assert!(!is_device_pointer(0));
        assert!(!is_device_pointer(usize::MAX - 4095));
    }

    #[test]
    fn compiled_bits_match_cfg() {
        assert_eq!(compiled_backends() & CCV1D_HAVE_CUDA != 0, cfg!(ccv1d_cuda));
        assert_eq!(compiled_backends() & CCV1D_HAVE_ROCM != 0, cfg!(ccv1d_rocm));
        assert_eq!(embedded(Vendor::Nvidia).is_some(), cfg!(ccv1d_cuda));
        assert_eq!(embedded(Vendor::Amd).is_some(), cfg!(ccv1d_rocm));
    }

    /// The drivers themselves (not only the compiled-in ones): on this machine each either is
    /// missing or has no device, and says so.
    #[test]
    fn driver_load_errors_are_messages() {
        for v in [Vendor::Nvidia, Vendor::Amd] {
            match driver::driver(v) {
                Ok(d) => eprintln!("{} driver present with {} device(s)", d.api(), d.device_count()),
                Err(e) => {
                    assert!(!e.is_empty());
                    eprintln!("{v:?}: {e}");
                }
            }
        }
    }

    #[test]
    fn missing_driver_dir() {
        let dir = std::ffi::OsStr::new("/nonexistent");
        let e = cuda::Cuda::load(Some(dir)).err().expect("no libcuda in /nonexistent");
        assert!(e.contains("/nonexistent") && e.contains("libcuda.so.1"), "{e}");
        let e = hip::Hip::load(Some(dir)).err().expect("no libamdhip64 in /nonexistent");
        assert!(e.contains("/nonexistent") && e.contains("libamdhip64.so"), "{e}");
    }

    #[test]
    fn field_lists_name_every_pointer() {
        let v = |addr| View { addr, dtype: DType::F32, stride: [0; 3] };
        let iv = |addr| IdxView { addr, stride: [0; 2], elem_bytes: 4 };
        let inp = ConvInputs {
            backend: Backend::Gpu,
            stream: 0,
            batch: 1,
            dim: 1,
            seqlen: 1,
            width: 4,
            act: Act::None,
            x: v(1),
            weight: v(2),
            bias: Some(v(3)),
            seq_idx: None,
            initial_states: Some(v(4)),
            seqs: Seqs::Packed { cu_seqlens: iv(5), num_seqs: 1 },
            pool: StatePool { state_indices: Some(iv(6)), has_initial_state: Some(iv(7)), num_slots: 1 },
        };
        let b = BwdPlan {
            inp,
            dout: v(8),
            dfinal_states: Some(v(9)),
            dx: v(10),
            dweight: v(11),
            dbias: Some(v(12)),
            dinitial_states: Some(v(13)),
            workspace: Some((14, 100)),
            deterministic: true,
        };
        let f = bwd_fields(&b);
        assert_eq!(f[0], ("x", 1));
        let addrs: Vec<usize> = f.iter().map(|p| p.1).collect();
        assert_eq!(addrs, (1..=14).collect::<Vec<_>>());
        let names: Vec<&str> = f.iter().map(|p| p.0).collect();
        assert!(names.contains(&"workspace") && names.contains(&"cu_seqlens") && names.contains(&"dinitial_states"));
        let fw = FwdPlan { inp, out: v(20), final_states: Some(v(21)) };
        assert_eq!(fwd_fields(&fw).last(), Some(&("final_states", 21)));
    }
}
