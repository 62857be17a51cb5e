//! Build script: generates the C header (checked against include/ by tests/header.rs) and
//! compiles the GPU kernels (see `gpu_build` below).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());

    generate_header(&manifest, &out_dir);

    println!("cargo::rustc-check-cfg=cfg(ccv1d_cuda)");
    println!("cargo::rustc-check-cfg=cfg(ccv1d_rocm)");
    println!("cargo:rerun-if-env-changed=CAUSAL_CONV1D_BACKEND");

    // SONAME with the major version, so `libcausal_conv1d.so.0` can be installed beside newer majors.
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcausal_conv1d.so.{major}");
    }

    gpu_build(&manifest, &out_dir);
}

fn generate_header(manifest: &PathBuf, out_dir: &PathBuf) {
    // The C API lives in exactly these files; parsing only them keeps internal `pub` items out
    // of the header and keeps this script from re-running on every Rust change.
    const API_FILES: [&str; 3] = ["src/params.rs", "src/error.rs", "src/capi.rs"];
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(manifest.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut builder = cbindgen::Builder::new().with_config(config);
    for f in API_FILES {
        println!("cargo:rerun-if-changed={f}");
        builder = builder.with_src(manifest.join(f));
    }
    let header = out_dir.join("causal_conv1d.h");
    match builder.generate() {
        Ok(b) => {
            b.write_to_file(&header);
        }
        Err(e) => panic!("cbindgen failed to generate the C header: {e}"),
    }
    println!("cargo:rustc-env=CCV1D_GENERATED_HEADER={}", header.display());
}

// ======================================================================== GPU kernels
//
// CAUSAL_CONV1D_BACKEND = cpu | cuda | rocm | all | auto (default)
//   auto: build for the GPU compilers that are found; cuda / rocm / all: those are required.
// NVIDIA: nvcc ($CUDA_HOME/bin, $CUDA_PATH/bin, or PATH). Each hip/*.hip is compiled per arch to
//   a relocatable cubin (SASS only, no PTX: the target driver may be older than this nvcc), the
//   cubins of an arch are linked by nvlink, and fatbinary packs one image per arch into
//   $OUT_DIR/ccv1d_kernels.fatbin. Archs: CAUSAL_CONV1D_CUDA_ARCHS (default "80;90").
// AMD: hipcc ($HIPCC, $ROCM_PATH/bin, /opt/rocm/bin, or PATH). All kernel files form one
//   translation unit (AMD code objects are linked shared objects: one module cannot be made from
//   several), compiled into the code-object bundle $OUT_DIR/ccv1d_kernels.hsaco while the nvcc
//   jobs run on the other threads.
//   Archs: CAUSAL_CONV1D_HIP_ARCHS (default "gfx90a;gfx942"); archs the compiler rejects are
//   dropped with a warning (each probed with a one-line kernel).
// Emits cfg ccv1d_cuda / ccv1d_rocm and the env vars CCV1D_FATBIN / CCV1D_HSACO (file paths,
// for include_bytes!) for what was built. Independent compile jobs run in parallel threads.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Need {
    Off,
    IfFound,
    Required,
}

fn gpu_build(manifest: &Path, out_dir: &Path) {
    for v in [
        "CAUSAL_CONV1D_CUDA_ARCHS",
        "CAUSAL_CONV1D_HIP_ARCHS",
        "CUDA_HOME",
        "CUDA_PATH",
        "HIPCC",
        "ROCM_PATH",
        "CAUSAL_CONV1D_NVCC_FLAGS",
        "CAUSAL_CONV1D_HIPCC_FLAGS",
    ] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    let hip_dir = manifest.join("hip");
    println!("cargo:rerun-if-changed={}", hip_dir.display());
    let mut sources = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&hip_dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for p in entries {
        match p.extension().and_then(|e| e.to_str()) {
            Some("hip") => {
                println!("cargo:rerun-if-changed={}", p.display());
                sources.push(p);
            }
            Some("h") => println!("cargo:rerun-if-changed={}", p.display()),
            _ => {}
        }
    }

    let mode = env::var("CAUSAL_CONV1D_BACKEND")
        .unwrap_or_else(|_| "auto".into())
        .to_ascii_lowercase();
    let (cuda, rocm) = match mode.as_str() {
        "cpu" => (Need::Off, Need::Off),
        "auto" | "" => (Need::IfFound, Need::IfFound),
        "cuda" => (Need::Required, Need::Off),
        "rocm" | "hip" => (Need::Off, Need::Required),
        "all" => (Need::Required, Need::Required),
        other => panic!("CAUSAL_CONV1D_BACKEND={other}: expected cpu, cuda, rocm, all or auto"),
    };
    if cuda == Need::Off && rocm == Need::Off {
        return;
    }
    if sources.is_empty() {
        panic!("no kernel sources in {}", hip_dir.display());
    }

    let nvcc = if cuda != Need::Off { find_nvcc() } else { None };
    let hipcc = if rocm != Need::Off {
        find_hipcc()
    } else {
        None
    };
    if cuda == Need::Required && nvcc.is_none() {
        panic!(
            "CAUSAL_CONV1D_BACKEND={mode} needs nvcc, which was not found: set CUDA_HOME (nvcc in $CUDA_HOME/bin) \
             or put nvcc on PATH, or build with CAUSAL_CONV1D_BACKEND=cpu"
        );
    }
    if rocm == Need::Required && hipcc.is_none() {
        panic!(
            "CAUSAL_CONV1D_BACKEND={mode} needs hipcc, which was not found: set HIPCC or ROCM_PATH (hipcc in $ROCM_PATH/bin) \
             or put hipcc on PATH, or build with CAUSAL_CONV1D_BACKEND=cpu"
        );
    }
    if nvcc.is_none() && hipcc.is_none() {
        println!(
            "cargo:warning=causal-conv1d: no GPU compiler found (nvcc, hipcc): CPU-only build"
        );
        return;
    }

    let jobs = env::var("NUM_JOBS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        });
    let t_all = Instant::now();

    // plan the work: CUDA compile jobs (file x arch), then per-arch links; HIP one job
    let mut plan: Vec<Job> = Vec::new();
    let mut cuda_archs = Vec::new();
    if let Some(nvcc) = &nvcc {
        cuda_archs = parse_cuda_archs();
        let inc = cuda_include_flags(nvcc);
        let extra = split_flags(&env::var("CAUSAL_CONV1D_NVCC_FLAGS").unwrap_or_default());
        for arch in &cuda_archs {
            for src in &sources {
                let stem = src.file_stem().unwrap().to_string_lossy().to_string();
                let out = out_dir.join(format!("ccv1d_{stem}_sm{arch}.cubin"));
                let mut c = Command::new(nvcc);
                c.args(["-std=c++17", "-O3", "-rdc=true", "-cubin", "-x", "cu"])
                    .arg(format!("-arch=sm_{arch}"))
                    .args(&inc)
                    .arg("-I")
                    .arg(&hip_dir)
                    .args(&extra)
                    .arg(src)
                    .arg("-o")
                    .arg(&out);
                plan.push(Job {
                    label: format!(
                        "nvcc {} sm_{arch}",
                        src.file_name().unwrap().to_string_lossy()
                    ),
                    cmd: c,
                });
            }
        }
    }
    let mut hip_archs = Vec::new();
    if let Some(hipcc) = &hipcc {
        hip_archs = probe_hip_archs(hipcc, out_dir);
        if hip_archs.is_empty() {
            if rocm == Need::Required {
                panic!(
                    "hipcc ({}) accepts none of CAUSAL_CONV1D_HIP_ARCHS",
                    hipcc.display()
                );
            }
            println!("cargo:warning=causal-conv1d: hipcc accepts none of the requested AMD archs: no AMD kernels");
        } else {
            // one translation unit including every kernel file
            let all = out_dir.join("ccv1d_all.hip");
            let mut text = String::from(
                "// generated by build.rs: every kernel file in one translation unit\n",
            );
            for s in &sources {
                text.push_str(&format!("#include \"{}\"\n", s.display()));
            }
            std::fs::write(&all, text).expect("write ccv1d_all.hip");
            let extra = split_flags(&env::var("CAUSAL_CONV1D_HIPCC_FLAGS").unwrap_or_default());
            let mut c = Command::new(hipcc);
            c.args(["-std=c++17", "-O3", "--genco"])
                .args(hip_archs.iter().map(|a| format!("--offload-arch={a}")))
                .arg("-I")
                .arg(&hip_dir)
                .args(&extra)
                .arg(&all)
                .arg("-o")
                .arg(out_dir.join("ccv1d_kernels.hsaco"));
            // the long job first, so it overlaps the CUDA jobs
            plan.insert(
                0,
                Job {
                    label: format!("hipcc {}", hip_archs.join(",")),
                    cmd: c,
                },
            );
        }
    }
    let times = run_parallel(plan, jobs);

    if let Some(nvcc) = &nvcc {
        let bin = nvcc.parent().unwrap();
        let mut images = Vec::new();
        for arch in &cuda_archs {
            let linked = out_dir.join(format!("ccv1d_kernels_sm{arch}.cubin"));
            let mut c = Command::new(bin.join("nvlink"));
            c.arg(format!("-arch=sm_{arch}"));
            for src in &sources {
                let stem = src.file_stem().unwrap().to_string_lossy().to_string();
                c.arg(out_dir.join(format!("ccv1d_{stem}_sm{arch}.cubin")));
            }
            c.arg("-o").arg(&linked);
            run_job(Job {
                label: format!("nvlink sm_{arch}"),
                cmd: c,
            });
            images.push(format!(
                "--image3=kind=elf,sm={arch},file={}",
                linked.display()
            ));
        }
        let fatbin = out_dir.join("ccv1d_kernels.fatbin");
        let mut c = Command::new(bin.join("fatbinary"));
        c.arg(format!("--create={}", fatbin.display()))
            .arg("--64")
            .arg("--compress-all") // about 10x smaller; the driver decompresses at module load
            .args(&images);
        run_job(Job {
            label: "fatbinary".into(),
            cmd: c,
        });
        println!("cargo:rustc-cfg=ccv1d_cuda");
        println!("cargo:rustc-env=CCV1D_FATBIN={}", fatbin.display());
        println!("cargo:rustc-env=CCV1D_CUDA_ARCHS={}", cuda_archs.join(";"));
    }
    if hipcc.is_some() && !hip_archs.is_empty() {
        println!("cargo:rustc-cfg=ccv1d_rocm");
        println!(
            "cargo:rustc-env=CCV1D_HSACO={}",
            out_dir.join("ccv1d_kernels.hsaco").display()
        );
        println!("cargo:rustc-env=CCV1D_HIP_ARCHS={}", hip_archs.join(";"));
    }
    let secs = t_all.elapsed().as_secs_f64();
    if secs > 30.0 {
        let sum = |p: &str| {
            times
                .iter()
                .filter(|(l, _)| l.starts_with(p))
                .map(|(_, s)| s)
                .sum::<f64>()
                + 0.0 // an empty f64 sum is -0.0
        };
        println!(
            "cargo:warning=causal-conv1d: GPU kernels compiled in {secs:.0} s on {jobs} threads (nvcc jobs {:.0} s, hipcc {:.0} s, added up)",
            sum("nvcc"),
            sum("hipcc")
        );
    }
}

struct Job {
    label: String,
    cmd: Command,
}

/// Runs a job; panics with the full command line and its output when it fails. Prints the time
/// as a cargo warning when it took more than 30 s. Returns the seconds it took.
fn run_job(mut job: Job) -> f64 {
    let t = Instant::now();
    let line = format!("{:?}", job.cmd);
    let out = job
        .cmd
        .output()
        .unwrap_or_else(|e| panic!("causal-conv1d: cannot run {line}: {e}"));
    if !out.status.success() {
        panic!(
            "causal-conv1d: {} failed ({}):\n{line}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            job.label,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let secs = t.elapsed().as_secs_f64();
    if secs > 30.0 {
        println!(
            "cargo:warning=causal-conv1d: {} took {secs:.0} s",
            job.label
        );
    }
    secs
}

/// Runs the jobs on `jobs` threads (in list order); the first failure panics after all threads end.
/// Returns (label, seconds) of every job.
fn run_parallel(plan: Vec<Job>, jobs: usize) -> Vec<(String, f64)> {
    let queue = Arc::new(Mutex::new(
        plan.into_iter().collect::<std::collections::VecDeque<_>>(),
    ));
    let failure: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let times: Arc<Mutex<Vec<(String, f64)>>> = Arc::new(Mutex::new(Vec::new()));
    let n = jobs.max(1);
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let q = Arc::clone(&queue);
            let fail = Arc::clone(&failure);
            let tm = Arc::clone(&times);
            std::thread::spawn(move || loop {
                if fail.lock().unwrap().is_some() {
                    return;
                }
                let job = match q.lock().unwrap().pop_front() {
                    Some(j) => j,
                    None => return,
                };
                let label = job.label.clone();
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_job(job))) {
                    Ok(secs) => tm.lock().unwrap().push((label, secs)),
                    Err(e) => {
                        let msg = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "compile job panicked".into());
                        *fail.lock().unwrap() = Some(msg);
                        return;
                    }
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    let msg = failure.lock().unwrap().take();
    if let Some(msg) = msg {
        panic!("{msg}");
    }
    let v = std::mem::take(&mut *times.lock().unwrap());
    v
}

fn split_flags(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn which(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn find_nvcc() -> Option<PathBuf> {
    for v in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(h) = env::var_os(v) {
            let p = PathBuf::from(h).join("bin").join("nvcc");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    which("nvcc")
}

fn find_hipcc() -> Option<PathBuf> {
    if let Some(h) = env::var_os("HIPCC") {
        let p = PathBuf::from(h);
        if p.is_file() {
            return Some(p);
        }
    }
    if let Some(r) = env::var_os("ROCM_PATH") {
        let p = PathBuf::from(r).join("bin").join("hipcc");
        if p.is_file() {
            return Some(p);
        }
    }
    let p = PathBuf::from("/opt/rocm/bin/hipcc");
    if p.is_file() {
        return Some(p);
    }
    which("hipcc")
}

/// "80;90" (also accepts "sm_80", commas, spaces) → ["80", "90"]
fn parse_cuda_archs() -> Vec<String> {
    let s = env::var("CAUSAL_CONV1D_CUDA_ARCHS").unwrap_or_else(|_| "80;90".into());
    let v: Vec<String> = s
        .split([';', ',', ' '])
        .map(|a| {
            a.trim()
                .trim_start_matches("sm_")
                .trim_start_matches("compute_")
                .to_string()
        })
        .filter(|a| !a.is_empty())
        .collect();
    for a in &v {
        if !a.chars().all(|c| c.is_ascii_alphanumeric()) {
            panic!("CAUSAL_CONV1D_CUDA_ARCHS: bad arch {a:?}");
        }
    }
    if v.is_empty() {
        panic!("CAUSAL_CONV1D_CUDA_ARCHS is empty");
    }
    v
}

/// nvcc from a pip wheel (nvidia-cuda-nvcc) finds its own headers, but the runtime/crt headers of
/// the other wheels live in sibling trees: add every `include` dir found next to nvcc's.
fn cuda_include_flags(nvcc: &Path) -> Vec<String> {
    let mut v = Vec::new();
    let home = nvcc.parent().and_then(|b| b.parent());
    if let Some(h) = home {
        let inc = h.join("include");
        if inc.is_dir() {
            v.push(format!("-I{}", inc.display()));
        }
    }
    v
}

/// The AMD archs to build: CAUSAL_CONV1D_HIP_ARCHS (default gfx90a;gfx942), minus those the
/// compiler rejects (probed with a one-line kernel, cached in OUT_DIR per compiler and arch).
fn probe_hip_archs(hipcc: &Path, out_dir: &Path) -> Vec<String> {
    let s = env::var("CAUSAL_CONV1D_HIP_ARCHS").unwrap_or_else(|_| "gfx90a;gfx942".into());
    let want: Vec<String> = s
        .split([';', ',', ' '])
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    let probe = out_dir.join("ccv1d_probe.hip");
    let _ = std::fs::write(&probe, "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void ccv1d_probe(int* p) { p[threadIdx.x] = 1; }\n");
    let mut ok = Vec::new();
    for a in want {
        if !a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '+' || c == '-')
        {
            panic!("CAUSAL_CONV1D_HIP_ARCHS: bad arch {a:?}");
        }
        let out = out_dir.join(format!(
            "ccv1d_probe_{}.hsaco",
            a.replace([':', '+', '-'], "_")
        ));
        let res = Command::new(hipcc)
            .args(["--genco", &format!("--offload-arch={a}")])
            .arg(&probe)
            .arg("-o")
            .arg(&out)
            .output();
        match res {
            Ok(o) if o.status.success() => ok.push(a),
            Ok(o) => {
                let err = String::from_utf8_lossy(&o.stderr);
                let line = err
                    .lines()
                    .find(|l| l.contains("error"))
                    .unwrap_or("")
                    .trim()
                    .to_string();
                println!(
                    "cargo:warning=causal-conv1d: {} rejects {a}, dropped ({line})",
                    hipcc.display()
                );
            }
            Err(e) => println!(
                "cargo:warning=causal-conv1d: cannot run {}: {e}",
                hipcc.display()
            ),
        }
    }
    ok
}
