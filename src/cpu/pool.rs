//! Threads and scratch memory.

use std::sync::{Mutex, OnceLock};

use crate::error::*;

/// Problems with fewer elements than this run on the calling thread (spawning costs more).
pub(crate) const MIN_PARALLEL_WORK: usize = 1 << 16;

/// Worker threads: `CCV1D_NUM_THREADS` when set to a positive integer, else the machine's
/// available parallelism. Read once.
pub fn num_threads() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("CCV1D_NUM_THREADS")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
    })
}

/// Threads to use for `work` elements: 1 for small problems.
pub fn threads_for(work: usize) -> usize {
    if work < MIN_PARALLEL_WORK {
        1
    } else {
        num_threads()
    }
}

pub fn oom(what: &str, n: usize) -> Error {
    Error::new(CCV1D_ERR_OUT_OF_MEMORY, format!("cpu backend: cannot allocate {n} elements of scratch for {what}"))
}

/// A zero-filled vector, or OUT_OF_MEMORY.
pub fn zeroed<T: Copy + Default>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| oom(what, n))?;
    v.resize(n, T::default());
    Ok(v)
}

/// Make `v` at least `n` long (new elements default), or OUT_OF_MEMORY.
pub fn grow<T: Copy + Default>(v: &mut Vec<T>, n: usize, what: &str) -> Result<()> {
    if v.len() < n {
        v.try_reserve(n - v.len()).map_err(|_| oom(what, n))?;
        v.resize(n, T::default());
    }
    Ok(())
}

/// Run every job, each exactly once, on up to `threads` threads (the caller's included), each
/// thread with its own scratch from `scratch` (all allocated before any job runs, so running out
/// of memory there writes nothing). Jobs are handed out in order from a shared queue; results
/// never depend on which thread ran a job. The first job error is returned (remaining jobs are
/// then skipped).
pub fn run<J, S, MK, F>(jobs: Vec<J>, threads: usize, scratch: MK, work: F) -> Result<()>
where
    J: Send,
    S: Send,
    MK: Fn() -> Result<S>,
    F: Fn(&mut S, J) -> Result<()> + Sync,
{
    // No jobs (an empty problem): allocate no scratch either, its size may come from a dim that
    // is huge while another is 0 (update with dim 0 and state_len 2^40 is a valid no-op).
    if jobs.is_empty() {
        return Ok(());
    }
    let threads = threads.clamp(1, jobs.len());
    if threads == 1 {
        let mut s = scratch()?;
        for j in jobs {
            work(&mut s, j)?;
        }
        return Ok(());
    }
    let mut scratches = Vec::new();
    scratches.try_reserve_exact(threads).map_err(|_| oom("thread scratch", threads))?;
    for _ in 0..threads {
        scratches.push(scratch()?);
    }
    let queue = Mutex::new(jobs.into_iter());
    let first_err: Mutex<Option<Error>> = Mutex::new(None);
    let worker = |mut s: S| loop {
        if first_err.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            return;
        }
        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
        let Some(job) = job else { return };
        if let Err(e) = work(&mut s, job) {
            first_err.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
            return;
        }
    };
    std::thread::scope(|sc| {
        let worker = &worker;
        let mine = scratches.pop();
        for s in scratches {
            // A thread that cannot be spawned just leaves its share to the others.
            let _ = std::thread::Builder::new().spawn_scoped(sc, move || worker(s));
        }
        if let Some(s) = mine {
            worker(s);
        }
    });
    match first_err.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
