//! One guarded buffer holding every tensor of a fuzz case: guard bytes before and after the data
//! region, and a shadow copy of what the buffer must hold unless the library wrote it.

use causal_conv1d::harness::Rng;

/// Canary bytes on each side of the data region.
pub const GUARD: usize = 512;
/// Bytes available for tensors.
pub const INNER: usize = 16384;

pub struct Arena {
    /// u64 storage so the base is 8-byte aligned (elements are placed aligned unless a case
    /// misaligns them on purpose).
    words: Vec<u64>,
    /// What every byte must hold if nothing was written.
    expect: Vec<u8>,
    /// Bump pointer for `alloc`, relative to the start of the buffer.
    next: usize,
}

impl Arena {
    pub fn new(rng: &mut Rng) -> Arena {
        let words: Vec<u64> = (0..(2 * GUARD + INNER) / 8).map(|_| rng.next_u64()).collect();
        let mut a = Arena { words, expect: Vec::new(), next: GUARD };
        a.expect = a.bytes().to_vec();
        a
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: u64 storage viewed as bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.words.len() * 8) }
    }

    pub fn base(&self) -> usize {
        self.words.as_ptr() as usize
    }

    /// Absolute address range of the data region.
    pub fn inner(&self) -> (usize, usize) {
        (self.base() + GUARD, self.base() + GUARD + INNER)
    }

    /// Start a new case: allocations begin again at a random offset.
    pub fn reset(&mut self, rng: &mut Rng) {
        self.next = GUARD + 8 * rng.below(16);
    }

    /// `bytes` inside the data region aligned to `align` (plus `misalign`), after a random gap;
    /// None when the region is full.
    pub fn alloc(&mut self, rng: &mut Rng, bytes: usize, align: usize, misalign: usize) -> Option<usize> {
        let gap = if rng.chance(0.5) { 0 } else { rng.below(40) };
        let start = (self.next + gap).next_multiple_of(align.max(1)) + misalign;
        let end = start + bytes;
        if end > GUARD + INNER {
            return None;
        }
        self.next = end;
        Some(self.base() + start)
    }

    /// Write `data` at absolute address `addr` (inside the data region), in both the buffer and
    /// its shadow.
    pub fn write(&mut self, addr: usize, data: &[u8]) {
        let off = addr - self.base();
        assert!(off >= GUARD && off + data.len() <= GUARD + INNER, "arena write outside the data region");
        // SAFETY: bounds checked above.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (self.base() + off) as *mut u8, data.len()) };
        self.expect[off..off + data.len()].copy_from_slice(data);
    }

    /// Offsets (relative to the buffer start) of every byte that differs from the shadow.
    pub fn changed(&self) -> Vec<usize> {
        let (now, was) = (self.bytes(), &self.expect);
        if now == &was[..] {
            return Vec::new();
        }
        (0..now.len()).filter(|&i| now[i] != was[i]).collect()
    }

    /// Accept the buffer's current contents as the new shadow (after a checked successful call).
    pub fn accept(&mut self, changed: &[usize]) {
        let now = self.bytes().to_vec();
        for &i in changed {
            self.expect[i] = now[i];
        }
    }
}
