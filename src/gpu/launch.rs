//! The contract between kernel selection (`kernels/`: pure, no driver calls) and the driver
//! layer (`driver.rs`: dlopen, contexts, modules, launches, memory).

/// Facts about the device the call runs on, queried once per context by the driver layer.
#[derive(Clone, Copy, Debug)]
pub struct DeviceInfo {
    pub vendor: Vendor,
    /// 32 on NVIDIA and RDNA, 64 on CDNA: queried from the device, never assumed.
    pub warp_size: u32,
    pub multiprocessors: u32,
    pub max_threads_per_block: u32,
    pub max_shared_mem_per_block: u32,
    /// `major*10 + minor` on NVIDIA; the gfx number (e.g. 942) on AMD.
    pub arch: u32,
    /// Peak DRAM bandwidth in GB/s from the memory clock and bus width the driver reports (2
    /// transfers a clock), 0 where it reports neither. Kernel rules that depend on how many bytes
    /// must be in flight read it (`kernels::fast_memory`): an H200 (about 4900) wants other
    /// kernels than an H100 (about 3350) at the same multiprocessor count.
    pub mem_gbps: u32,
}

/// Peak DRAM GB/s from a memory clock in kHz and a bus width in bits (double data rate); 0 when
/// either is unknown.
pub fn peak_mem_gbps(clock_khz: i32, bus_bits: i32) -> u32 {
    if clock_khz <= 0 || bus_bits <= 0 {
        return 0;
    }
    (2 * clock_khz as u64 * 1000 * (bus_bits as u64 / 8) / 1_000_000_000) as u32
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Nvidia,
    Amd,
}

/// One kernel launch: extern "C" kernel name, geometry, and the by-value argument block
/// (passed as the kernel's single parameter: `void* args[] = { params.as_ptr() }`).
#[derive(Clone, Debug)]
pub struct Launch {
    pub kernel: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
    /// Bytes of the kernel's parameter struct (`hip/kparams.h`), 8-byte aligned content.
    pub params: Vec<u8>,
    /// Programmatic dependent launch: the kernel may start before the previous kernel in the
    /// stream has finished, and waits for it in its first instruction (`ccv_wait_previous`,
    /// hip/compat.h). Set only for kernels that make that wait and only on NVIDIA sm_90+; a
    /// driver without the launch attribute launches it plainly (the stream orders it then).
    pub overlap_previous: bool,
}
