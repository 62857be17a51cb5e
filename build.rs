//! Build script: generates the C header (checked against include/ by tests/header.rs) and
//! compiles the GPU kernels (see `gpu_build` below).

use std::env;
use std::path::PathBuf;

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
