//! causal-conv1d: the causal depthwise conv1d of Mamba-style models (forward, backward, decode
//! update) behind a C ABI, with a CPU backend and GPU kernels for NVIDIA and AMD.
//!
//! Layout of the crate: `params` (the public `#[repr(C)]` structs) → `validate` (the only place
//! that checks anything) → `plan` (what backends receive) → `cpu` / `gpu`. `capi` holds every
//! `extern "C"` function. `oracle` is an independent f64 reference used by tests and `ccv1d`;
//! `harness` the test harness they share (hidden, not an API).

#[macro_use]
pub mod error;
pub mod params;
pub mod plan;
pub mod validate;
pub mod cpu;
pub mod gpu;
pub mod oracle;
pub mod capi;
// The test harness shared by tests/ and the ccv1d binary (tensors, case builders, comparison
// with the oracle); not part of the C API nor a stable Rust API.
#[doc(hidden)]
pub mod harness;

pub use error::{Error, Result};
