//! `ccv1d info`: library version, compiled backends, GPUs, CPU threads.

use std::ffi::{c_int, CStr};

use causal_conv1d::capi;
use causal_conv1d::error::CCV1D_OK;
use causal_conv1d::gpu::{self, launch::Vendor};
use causal_conv1d::harness::{last_error, status_str};
use causal_conv1d::params::*;

/// Largest cache of cpu0 in bytes (sysfs), if the system says.
pub fn llc_bytes() -> Option<usize> {
    let mut best = None;
    for i in 0..8 {
        let Ok(s) = std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size")) else { continue };
        let s = s.trim();
        let (num, mult) = match s.chars().last() {
            Some('K') => (&s[..s.len() - 1], 1 << 10),
            Some('M') => (&s[..s.len() - 1], 1 << 20),
            Some('G') => (&s[..s.len() - 1], 1 << 30),
            _ => (s, 1),
        };
        if let Ok(n) = num.parse::<usize>() {
            best = best.max(Some(n * mult));
        }
    }
    best
}

/// "cpu, cuda" etc.
pub fn backends_compiled() -> String {
    let bits = capi::ccv1d_backends_compiled();
    let mut v = Vec::new();
    for (bit, name) in [(CCV1D_HAVE_CPU, "cpu"), (CCV1D_HAVE_CUDA, "cuda"), (CCV1D_HAVE_ROCM, "rocm")] {
        if bits & bit != 0 {
            v.push(name);
        }
    }
    v.join(", ")
}

/// Number of GPUs, or the library's NO_DEVICE (or other) message.
pub fn device_count() -> Result<i32, String> {
    let mut n: c_int = 0;
    let st = unsafe { capi::ccv1d_device_count(&mut n) };
    if st == CCV1D_OK {
        Ok(n)
    } else {
        Err(format!("{}: {}", status_str(st), last_error()))
    }
}

pub fn run() -> i32 {
    let version = unsafe { CStr::from_ptr(capi::ccv1d_version()) }.to_string_lossy();
    println!("causal-conv1d {version} (ccv1d)");
    println!("backends compiled: {}", backends_compiled());
    match device_count() {
        Ok(n) => {
            println!("GPUs: {n}");
            match gpu::devices() {
                Ok(devs) => {
                    for d in devs {
                        let i = d.info;
                        let arch = match i.vendor {
                            Vendor::Nvidia => format!("sm_{}", i.arch),
                            Vendor::Amd => format!("gfx{}", i.arch),
                        };
                        let unit = if i.vendor == Vendor::Nvidia { "SMs" } else { "CUs" };
                        println!(
                            "  [{}] {} {}: {arch}, {} {unit}, warp size {}, {} threads/block, {} KiB shared/block, peak memory {} GB/s",
                            d.ordinal,
                            d.api,
                            d.name.as_deref().unwrap_or("(name unknown)"),
                            i.multiprocessors,
                            i.warp_size,
                            i.max_threads_per_block,
                            i.max_shared_mem_per_block / 1024,
                            i.mem_gbps
                        );
                    }
                }
                Err(e) => println!("  (device details unavailable: {})", e.msg),
            }
        }
        Err(e) => println!("GPUs: none ({e})"),
    }
    let env = std::env::var("CCV1D_NUM_THREADS").ok();
    let avail = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!(
        "CPU backend threads: {} ({}; {avail} available to this process){}",
        causal_conv1d::cpu::num_threads(),
        match &env {
            Some(v) => format!("CCV1D_NUM_THREADS={v}"),
            None => "CCV1D_NUM_THREADS unset".into(),
        },
        llc_bytes().map_or(String::new(), |b| format!(", largest CPU cache {} MiB", b >> 20))
    );
    0
}
