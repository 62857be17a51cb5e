//! The configuration tables of the seed reports (/work/shared/seeds): used by `tests/seeds.rs`,
//! `ccv1d test` and `ccv1d bench`. Width 4 everywhere.
//!
//! - 000 (HIP channel-last backward test): six configs, fp32, channel-last `[batch, length, dim]`.
//! - 003 (HIP backward performance report): ten configs × fp32/fp16, channel-first.

/// One row of a seed report's configuration table.
#[derive(Clone, Copy, Debug)]
pub struct SeedConfig {
    pub name: &'static str,
    pub batch: usize,
    pub dim: usize,
    pub seqlen: usize,
    pub bias: bool,
    pub silu: bool,
}

const fn s(name: &'static str, batch: usize, dim: usize, seqlen: usize, bias: bool, silu: bool) -> SeedConfig {
    SeedConfig { name, batch, dim, seqlen, bias, silu }
}

/// Seed 000's table (channel-last).
pub const SEED_000: [SeedConfig; 6] = [
    s("Tiny", 1, 32, 64, true, false),
    s("Small", 2, 64, 256, true, false),
    s("Medium", 4, 64, 512, true, false),
    s("Large", 4, 64, 1024, true, false),
    s("No Bias", 2, 64, 256, false, false),
    s("With SiLU", 2, 64, 256, true, true),
];

/// Seed 003's table (channel-first; run there in fp32 and fp16).
pub const SEED_003: [SeedConfig; 10] = [
    s("Small - Width 4", 2, 64, 128, true, false),
    s("Small + SiLU", 2, 64, 128, true, true),
    s("Medium - Standard", 4, 256, 512, true, false),
    s("Medium + SiLU", 4, 256, 512, true, true),
    s("Large - Mamba-like", 8, 2048, 1024, true, false),
    s("Large + SiLU", 8, 2048, 1024, true, true),
    s("Long Sequence", 4, 256, 4096, true, false),
    s("Long Sequence + SiLU", 4, 256, 4096, true, true),
    s("Wide Channel", 4, 4096, 512, true, false),
    s("Wide Channel + SiLU", 4, 4096, 512, true, true),
];

/// Width of every seed configuration.
pub const SEED_WIDTH: usize = 4;
