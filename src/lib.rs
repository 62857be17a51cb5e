//! causal-conv1d: the causal depthwise conv1d of Mamba-style models (forward, backward, decode
//! update) behind a C ABI, with a CPU backend and GPU kernels for NVIDIA and AMD.
//!
//! Layout of the crate: `params` (the public `#[repr(C)]` structs) → `validate` (the only place
//! that checks anything) → `plan` (what backends receive) → `cpu` / `gpu`. `capi` holds every
//! `extern "C"` function. `oracle` is an independent f64 reference used by tests and `ccv1d`.

#[macro_use]
pub mod error;
pub mod params;
pub mod plan;
pub mod validate;
pub mod cpu;
pub mod gpu;
pub mod oracle;
pub mod capi;

pub use error::{Error, Result};
