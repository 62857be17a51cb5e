//! GPU driver layer, checks that need no GPU:
//! - the cdylib links no GPU library (its ELF dynamic section names only the C runtime), so it
//!   loads on any machine and opens the driver with dlopen at run time;
//! - with `CCV1D_DRIVER_DIR` pointing at a directory without a driver, every device entry point
//!   (device_count, malloc, free, memcpy, synchronize; fwd, bwd, bwd_workspace_size and update
//!   with backend GPU) answers NO_DEVICE with a message and writes nothing; AUTO on host memory
//!   still runs on the CPU (this binary's only test that touches the GPU layer, so the
//!   variable is set before anything opens a driver).

use std::ffi::{c_void, CStr};
use std::path::PathBuf;

use causal_conv1d::capi::*;
use causal_conv1d::error::*;
use causal_conv1d::params::*;

/// `libcausal_conv1d.so` of the profile this test was built with (target/<profile>/).
fn cdylib() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [deps, deps.parent()?].iter().map(|d| d.join("libcausal_conv1d.so")).find(|p| p.exists())
}

fn u16_at(b: &[u8], o: usize) -> usize {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize
}
fn u32_at(b: &[u8], o: usize) -> usize {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize
}
fn u64_at(b: &[u8], o: usize) -> usize {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize
}

/// DT_NEEDED entries of a little-endian ELF64 file, from its SHT_DYNAMIC section and the string
/// table that section links to.
fn needed_libraries(elf: &[u8]) -> Vec<String> {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not ELF64");
    assert_eq!(elf[5], 1, "not little-endian");
    let (shoff, shentsize, shnum) = (u64_at(elf, 0x28), u16_at(elf, 0x3a), u16_at(elf, 0x3c));
    let section = |i: usize| shoff + i * shentsize;
    let mut out = Vec::new();
    for i in 0..shnum {
        let sh = section(i);
        if u32_at(elf, sh + 4) != 6 {
            continue; // not SHT_DYNAMIC
        }
        let (off, size, link) = (u64_at(elf, sh + 24), u64_at(elf, sh + 32), u32_at(elf, sh + 40));
        let strtab = u64_at(elf, section(link) + 24);
        for e in (off..off + size).step_by(16) {
            let (tag, val) = (u64_at(elf, e), u64_at(elf, e + 8));
            match tag {
                0 => break, // DT_NULL
                1 => {
                    // DT_NEEDED
                    let s = &elf[strtab + val..];
                    let end = s.iter().position(|&c| c == 0).unwrap();
                    out.push(String::from_utf8_lossy(&s[..end]).into_owned());
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
#[cfg(all(target_os = "linux", target_endian = "little", target_pointer_width = "64"))]
fn cdylib_links_only_the_c_runtime() {
    let path = cdylib().expect("libcausal_conv1d.so is not next to this test (cargo builds it with the library)");
    let needed = needed_libraries(&std::fs::read(&path).unwrap());
    eprintln!("{} NEEDED: {needed:?}", path.display());
    assert!(needed.iter().any(|n| n.starts_with("libc.so")), "{needed:?}");
    // glibc's own pieces only (libdl/libpthread/librt are separate files before glibc 2.34).
    let allowed = ["libc.so", "libm.so", "libgcc_s.so", "ld-linux", "libdl.so", "libpthread.so", "librt.so"];
    for n in &needed {
        assert!(
            allowed.iter().any(|a| n.starts_with(a)),
            "{} links {n}: the library must open GPU drivers with dlopen",
            path.display()
        );
    }
}

fn last_error() -> String {
    // SAFETY: a thread-local C string, valid until the next call.
    unsafe { CStr::from_ptr(ccv1d_last_error()) }.to_string_lossy().into_owned()
}

#[test]
fn missing_driver_directory_is_no_device() {
    std::env::set_var("CCV1D_DRIVER_DIR", "/nonexistent");
    let gpu_compiled = ccv1d_backends_compiled() & (CCV1D_HAVE_CUDA | CCV1D_HAVE_ROCM) != 0;
    let host = [0u8; 64];
    let hp = host.as_ptr() as *mut c_void;
    let mut count = -1;
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid pointers; the calls must refuse, not touch memory.
    let calls = unsafe {
        [
            ("ccv1d_device_count", ccv1d_device_count(&mut count)),
            ("ccv1d_malloc", ccv1d_malloc(&mut p, 64)),
            ("ccv1d_free", ccv1d_free(hp)),
            ("ccv1d_memcpy", ccv1d_memcpy(hp, hp, 8, std::ptr::null_mut())),
            ("ccv1d_synchronize", ccv1d_synchronize(std::ptr::null_mut())),
        ]
    };
    for (what, status) in calls {
        assert_eq!(status, CCV1D_ERR_NO_DEVICE, "{what}");
    }
    let msg = last_error();
    assert!(!msg.is_empty());
    if gpu_compiled {
        assert!(msg.contains("/nonexistent"), "the message names the directory: {msg}");
    }
    assert_eq!(count, -1, "outputs are written only on success");
    assert!(p.is_null(), "outputs are written only on success");
    assert!(!causal_conv1d::gpu::is_device_pointer(hp as usize));
    ops_ask_for_the_gpu_in_vain(gpu_compiled);
}

/// The ops with backend GPU: NO_DEVICE naming the backend (and the directory when a GPU backend
/// is compiled in), outputs untouched; with AUTO the same host tensors run on the CPU.
fn ops_ask_for_the_gpu_in_vain(gpu_compiled: bool) {
    const B: i64 = 2;
    const D: i64 = 3;
    const L: i64 = 5;
    const W: i64 = 4;
    let n = (B * D * L) as usize;
    let host = |len: usize, v: f32| vec![v; len];
    let (mut x, mut w, mut dout) = (host(n, 0.5), host((D * W) as usize, 0.25), host(n, 1.0));
    let (mut out, mut dx, mut dw) = (host(n, f32::NAN), host(n, f32::NAN), host((D * W) as usize, f32::NAN));
    let (mut state, mut xu, mut outu) = (host((B * D * 3) as usize, 0.5), host((B * D) as usize, 0.5), host((B * D) as usize, f32::NAN));
    let f32t = |v: &mut Vec<f32>, stride: [i64; 3]| ccv1d_tensor { data: v.as_mut_ptr() as *mut c_void, dtype: CCV1D_DTYPE_F32, stride };
    let xs = [D * L, L, 1];
    let z = ccv1d_tensor::default();
    let mut fp = ccv1d_fwd_params {
        struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
        backend: CCV1D_BACKEND_GPU,
        activation: CCV1D_ACT_SILU,
        batch: B,
        dim: D,
        seqlen: L,
        width: W,
        x: f32t(&mut x, xs),
        weight: f32t(&mut w, [W, 1, 0]),
        bias: z,
        out: f32t(&mut out, xs),
        seq_idx: z,
        initial_states: z,
        final_states: z,
        cu_seqlens: z,
        state_indices: z,
        has_initial_state: z,
        num_seqs: 0,
        num_state_slots: 0,
    };
    let mut bp = ccv1d_bwd_params {
        struct_size: std::mem::size_of::<ccv1d_bwd_params>() as u32,
        backend: CCV1D_BACKEND_GPU,
        activation: CCV1D_ACT_SILU,
        batch: B,
        dim: D,
        seqlen: L,
        width: W,
        x: fp.x,
        weight: fp.weight,
        bias: z,
        seq_idx: z,
        initial_states: z,
        cu_seqlens: z,
        state_indices: z,
        has_initial_state: z,
        num_seqs: 0,
        num_state_slots: 0,
        dout: f32t(&mut dout, xs),
        dfinal_states: z,
        dx: f32t(&mut dx, xs),
        dweight: f32t(&mut dw, [W, 1, 0]),
        dbias: z,
        dinitial_states: z,
        workspace: std::ptr::null_mut(),
        workspace_size: 0,
        nondeterministic: 0,
    };
    let mut up = ccv1d_update_params {
        struct_size: std::mem::size_of::<ccv1d_update_params>() as u32,
        backend: CCV1D_BACKEND_GPU,
        activation: CCV1D_ACT_NONE,
        batch: B,
        dim: D,
        seqlen: 1,
        width: W,
        state_len: 3,
        num_state_slots: 0,
        x: f32t(&mut xu, [D, 1, 1]),
        weight: fp.weight,
        bias: z,
        out: f32t(&mut outu, [D, 1, 1]),
        conv_state: f32t(&mut state, [D * 3, 3, 1]),
        cache_seqlens: z,
        conv_state_indices: z,
    };
    let mut ws_bytes = 777usize;
    // SAFETY: every view lies inside its vector.
    let calls = unsafe {
        [
            ("ccv1d_fwd", ccv1d_fwd(&fp, std::ptr::null_mut()), last_error()),
            ("ccv1d_bwd", ccv1d_bwd(&bp, std::ptr::null_mut()), last_error()),
            ("ccv1d_bwd_workspace_size", ccv1d_bwd_workspace_size(&bp, &mut ws_bytes), last_error()),
            ("ccv1d_update", ccv1d_update(&up, std::ptr::null_mut()), last_error()),
        ]
    };
    for (what, status, msg) in &calls {
        assert_eq!(*status, CCV1D_ERR_NO_DEVICE, "{what}: {msg}");
        assert!(msg.starts_with("backend: GPU requested"), "{what}: the message names the field: {msg}");
        if gpu_compiled {
            assert!(msg.contains("/nonexistent"), "{what}: the message names the directory: {msg}");
        }
    }
    assert_eq!(ws_bytes, 777, "*bytes written although the call failed");
    for (name, v) in [("out", &out), ("dx", &dx), ("dweight", &dw), ("update out", &outu)] {
        assert!(v.iter().all(|e| e.is_nan()), "{name} written by a failed call");
    }
    assert!(state.iter().all(|&e| e == 0.5), "conv_state written by a failed call");
    // AUTO with host memory: the CPU backend, no driver needed.
    fp.backend = CCV1D_BACKEND_AUTO;
    bp.backend = CCV1D_BACKEND_AUTO;
    up.backend = CCV1D_BACKEND_AUTO;
    // SAFETY: as above.
    unsafe {
        assert_eq!(ccv1d_fwd(&fp, std::ptr::null_mut()), CCV1D_OK, "{}", last_error());
        assert_eq!(ccv1d_bwd(&bp, std::ptr::null_mut()), CCV1D_OK, "{}", last_error());
        assert_eq!(ccv1d_bwd_workspace_size(&bp, &mut ws_bytes), CCV1D_OK, "{}", last_error());
        assert_eq!(ccv1d_update(&up, std::ptr::null_mut()), CCV1D_OK, "{}", last_error());
    }
    assert_eq!(ws_bytes, 0);
    assert!(out.iter().chain(&dx).chain(&dw).chain(&outu).all(|e| e.is_finite()), "AUTO on host memory runs on the CPU");
}
