//! GPU backend (stub until the real one lands): every call answers NO_DEVICE.
pub mod launch;
pub mod kernels;
use crate::error::*;
use crate::plan::*;
fn none<T>() -> Result<T> { Err(Error::new(CCV1D_ERR_NO_DEVICE, "no GPU backend compiled into this build")) }
pub fn fwd(_p: &FwdPlan) -> Result<()> { none() }
pub fn bwd(_p: &BwdPlan) -> Result<()> { none() }
pub fn bwd_workspace_size(_p: &BwdPlan) -> Result<usize> { none() }
pub fn update(_p: &UpdatePlan) -> Result<()> { none() }
pub fn compiled_backends() -> u32 { 0 }
pub fn device_count() -> Result<i32> { none() }
pub fn malloc(_bytes: usize) -> Result<usize> { none() }
pub fn free(_ptr: usize) -> Result<()> { none() }
pub fn memcpy(_dst: usize, _src: usize, _bytes: usize, _stream: usize) -> Result<()> { none() }
pub fn synchronize(_stream: usize) -> Result<()> { none() }
/// True when `addr` is device memory of a GPU this build can drive.
pub fn is_device_pointer(_addr: usize) -> bool { false }
