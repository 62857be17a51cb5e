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
    for f in ["src/params.rs", "src/capi.rs", "src/error.rs", "src/lib.rs", "cbindgen.toml"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let config = cbindgen::Config::from_file(manifest.join("cbindgen.toml")).expect("cbindgen.toml");
    let header = out_dir.join("causal_conv1d.h");
    match cbindgen::Builder::new().with_crate(manifest).with_config(config).generate() {
        Ok(b) => {
            b.write_to_file(&header);
        }
        Err(e) => panic!("cbindgen failed to generate the C header: {e}"),
    }
    println!("cargo:rustc-env=CCV1D_GENERATED_HEADER={}", header.display());
}
