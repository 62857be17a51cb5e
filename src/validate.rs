//! Stub.
use crate::error::*;
use crate::params::*;
use crate::plan::*;
pub unsafe fn fwd(_p: *const ccv1d_fwd_params, _stream: usize) -> Result<FwdPlan> { todo!() }
pub unsafe fn bwd(_p: *const ccv1d_bwd_params, _stream: usize) -> Result<BwdPlan> { todo!() }
pub unsafe fn bwd_for_workspace(_p: *const ccv1d_bwd_params) -> Result<BwdPlan> { todo!() }
pub unsafe fn update(_p: *const ccv1d_update_params, _stream: usize) -> Result<UpdatePlan> { todo!() }
