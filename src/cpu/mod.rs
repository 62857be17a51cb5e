//! CPU backend (stub until the real one lands).
use crate::error::*;
use crate::plan::*;
pub fn fwd(_p: &FwdPlan) -> Result<()> { Err(Error::new(CCV1D_ERR_INTERNAL, "cpu fwd not built yet")) }
pub fn bwd(_p: &BwdPlan) -> Result<()> { Err(Error::new(CCV1D_ERR_INTERNAL, "cpu bwd not built yet")) }
pub fn update(_p: &UpdatePlan) -> Result<()> { Err(Error::new(CCV1D_ERR_INTERNAL, "cpu update not built yet")) }
