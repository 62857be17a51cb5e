//! Comparing outputs with the oracle: the per-case [`CaseReport`] (every output's errors and
//! tolerance, every failure), the `check_*` functions the tests call directly, and the worst
//! errors seen per key (`record`, `take_stats`).

use std::cell::RefCell;

use super::tensor::Tensor;
use crate::oracle::{self, ErrStats, Tol};
use crate::plan::DType;

thread_local! {
    static STATS: RefCell<Vec<(String, ErrStats)>> = const { RefCell::new(Vec::new()) };
}

/// Remember the worst errors seen under `key` (printed at the end of a sweep).
pub fn record(key: &str, e: &ErrStats) {
    STATS.with(|s| {
        let mut s = s.borrow_mut();
        match s.iter_mut().find(|(k, _)| k == key) {
            Some((_, x)) => {
                x.rel = x.rel.max(e.rel);
                x.max_elem = x.max_elem.max(e.max_elem);
                x.max_abs = x.max_abs.max(e.max_abs);
                x.n += e.n;
            }
            None => s.push((key.to_string(), *e)),
        }
    });
}

/// The worst errors recorded since the last call, by key.
pub fn take_stats() -> Vec<(String, ErrStats)> {
    STATS.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// Elementwise output with a tolerance.
pub fn check_tensor(name: &str, t: &Tensor, want: &[f64], mag: &[f64], tol: Tol, key: &str) -> Result<ErrStats, String> {
    let e = oracle::check(name, &t.to_f64(), want, mag, &tol)?;
    record(key, &e);
    Ok(e)
}

/// A state pool `[slots, dim, k]`: slots in `written` compared with `want` (exactly when
/// `exact`: states are copies of stored inputs), every other slot's bytes unchanged since
/// `before`.
/// `mag`: the oracle's error magnitudes (unused when `exact`).
#[allow(clippy::too_many_arguments)]
pub fn check_pool(name: &'static str, t: &Tensor, before: &[u8], want: &[f64], mag: &[f64], written: &[bool], exact: bool, tol: Tol, key: &str) -> Result<(), String> {
    let mut r = CaseReport::default();
    r.pool(name, t, before, want, mag, written, exact, tol, key);
    r.into_result().map(drop)
}

/// Every byte of `t`'s allocation equal to `before` (an input the call must not write).
pub fn check_unchanged(name: &str, t: &Tensor, before: &[u8]) -> Result<(), String> {
    let now = t.snapshot();
    if let Some(i) = (0..now.len()).find(|&i| now[i] != before[i]) {
        return Err(format!("{name}: input memory changed (byte {i} of {})", now.len()));
    }
    Ok(())
}

pub fn check_gaps(name: &str, views: &[&Tensor], before: &[u8]) -> Result<(), String> {
    let n = Tensor::gaps_changed(views, before);
    if n > 0 {
        return Err(format!("{name}: {n} bytes outside the view were written"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Per-case report
// ---------------------------------------------------------------------------------------------

/// How one output of a case compared with the oracle.
#[derive(Clone, Debug)]
pub struct OutCheck {
    pub name: &'static str,
    /// Storage dtype of the output.
    pub dt: DType,
    /// Errors against the oracle (max_abs and rel are NaN when the output holds NaN).
    pub stats: ErrStats,
    /// The tolerance it was judged with; `None`: must be a bit-exact copy (states).
    pub tol: Option<Tol>,
    pub ok: bool,
}

/// Everything one case found: each compared output, and every failure (an error status, an
/// output out of tolerance, an input or a byte outside a view written). Passed = no failure.
#[derive(Clone, Debug, Default)]
pub struct CaseReport {
    pub outputs: Vec<OutCheck>,
    pub failures: Vec<String>,
}

impl CaseReport {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    pub fn fail(&mut self, msg: impl Into<String>) {
        self.failures.push(msg.into());
    }

    /// Record `r`'s error (if any) as a failure; true when it was Ok.
    pub fn ok<T>(&mut self, r: Result<T, String>) -> bool {
        match r {
            Ok(_) => true,
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    /// The output compared under `name`, if any.
    pub fn output(&self, name: &str) -> Option<&OutCheck> {
        self.outputs.iter().find(|o| o.name == name)
    }

    /// `Ok(summary)` (each output's relative error) or `Err(every failure)`: the form the
    /// integration tests use.
    pub fn into_result(self) -> Result<String, String> {
        if self.failures.is_empty() {
            let v: Vec<String> = self.outputs.iter().filter(|o| o.tol.is_some()).map(|o| format!("{} rel {:.2e}", o.name, o.stats.rel)).collect();
            Ok(v.join(" "))
        } else {
            Err(self.failures.join("\n    "))
        }
    }

    /// Compare an elementwise or reduction output with the oracle (see [`oracle::check`]); on
    /// success its errors are also [`record`]ed under `key`.
    pub fn tensor(&mut self, name: &'static str, t: &Tensor, want: &[f64], mag: &[f64], tol: Tol, key: &str) {
        let got = t.to_f64();
        self.values(name, &got, want, mag, tol, key);
    }

    fn values(&mut self, name: &'static str, got: &[f64], want: &[f64], mag: &[f64], tol: Tol, key: &str) {
        let (stats, ok) = match oracle::check(name, got, want, mag, &tol) {
            Ok(e) => {
                record(key, &e);
                (e, true)
            }
            Err(msg) => {
                self.fail(msg);
                let e = if got.len() == want.len() && mag.len() == want.len() { oracle::err_stats(got, want, mag, &tol) } else { ErrStats::default() };
                (e, false)
            }
        };
        self.outputs.push(OutCheck { name, dt: tol.dt, stats, tol: Some(tol), ok });
    }

    /// A state pool `[slots, dim, k]`: slots in `written` compared with `want` (bit-exactly when
    /// `exact`: states are copies of stored inputs; else with `tol` against `mag`), every other
    /// slot's bytes unchanged since `before`.
    #[allow(clippy::too_many_arguments)]
    pub fn pool(&mut self, name: &'static str, t: &Tensor, before: &[u8], want: &[f64], mag: &[f64], written: &[bool], exact: bool, tol: Tol, key: &str) {
        let per = t.shape[1] * t.shape[2];
        if per == 0 {
            return;
        }
        let got = t.to_f64();
        let changed = t.elems_changed(before);
        let (mut g, mut w, mut m) = (Vec::new(), Vec::new(), Vec::new());
        let mut untouched_ok = true;
        for i in 0..got.len() {
            let slot = i / per;
            if written[slot] {
                g.push(got[i]);
                w.push(want[i]);
                m.push(if exact { 0.0 } else { mag[i] });
            } else if changed[i] && untouched_ok {
                untouched_ok = false;
                self.fail(format!("{name}: slot {slot} (element {}) must be untouched but changed to {}", i % per, got[i]));
            }
        }
        if !exact {
            self.values(name, &g, &w, &m, tol, key);
            return;
        }
        // Exact copies: report the plain error statistics, fail on any difference.
        let ones = vec![1.0; g.len()];
        let stats = oracle::err_stats(&g, &w, &ones, &tol);
        let bad = (0..g.len()).find(|&i| g[i] != w[i]);
        if let Some(i) = bad {
            self.fail(format!("{name}: written element {i} is {} but must be exactly {} (a copy)", g[i], w[i]));
        }
        self.outputs.push(OutCheck { name, dt: tol.dt, stats, tol: None, ok: bad.is_none() && untouched_ok });
    }

    /// Every byte of an input's allocation unchanged.
    pub fn unchanged(&mut self, name: &str, t: &Tensor, before: &[u8]) {
        let r = check_unchanged(name, t, before);
        self.ok(r);
    }

    /// No byte of the allocation outside `views` written.
    pub fn gaps(&mut self, name: &str, views: &[&Tensor], before: &[u8]) {
        let r = check_gaps(name, views, before);
        self.ok(r);
    }
}
