//! STAND-IN for kernel selection, so the driver layer (branch `gpud`) builds on its own.
//! The real file comes from the kernel engineer's branch (`gpuk`); the integrator takes that one.
//! Same signatures; every launch list is an error here.

use super::launch::{DeviceInfo, Launch};
use crate::error::*;
use crate::plan::*;

fn not_merged<T>() -> Result<T> {
    Err(Error::new(CCV1D_ERR_INTERNAL, "GPU kernel selection is not in this build (src/gpu/kernels.rs is a stand-in)"))
}

pub fn fwd_launches(_p: &FwdPlan, _dev: &DeviceInfo) -> Result<Vec<Launch>> {
    not_merged()
}

pub fn bwd_workspace_bytes(_p: &BwdPlan, _dev: &DeviceInfo) -> usize {
    0
}

pub fn bwd_launches(_p: &BwdPlan, _dev: &DeviceInfo, _workspace: usize) -> Result<Vec<Launch>> {
    not_merged()
}

pub fn update_launches(_p: &UpdatePlan, _dev: &DeviceInfo) -> Result<Vec<Launch>> {
    not_merged()
}
