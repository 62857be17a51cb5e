//! Device-side timing for `ccv1d bench` (not used by the library's own calls): timing events of
//! the first driver with a device — the one `ccv1d_malloc` uses — created and recorded in the
//! context `ccv1d_malloc` uses (the thread's current one, else device 0's primary context), so
//! they time work on that device's default stream (or a caller's stream of that context).
//!
//! The event entry points are optional in the driver tables (`cuEvent*` / `hipEvent*`): without
//! them `Events::new` fails and the caller falls back to host clocks.

use super::driver::Driver;
use crate::error::*;

/// A set of timing events.
pub struct Events {
    drv: &'static dyn Driver,
    evs: Vec<usize>,
}

impl Events {
    /// `n` events in the current context (else device 0's primary context).
    pub fn new(n: usize) -> Result<Events> {
        let drv = super::drivers()?[0];
        let _scope = drv.enter(None, 0)?;
        let mut ev = Events { drv, evs: Vec::with_capacity(n) };
        for _ in 0..n {
            let e = drv.event_create()?;
            ev.evs.push(e);
        }
        Ok(ev)
    }

    pub fn len(&self) -> usize {
        self.evs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.evs.is_empty()
    }

    /// "CUDA" or "HIP".
    pub fn api(&self) -> &'static str {
        self.drv.api()
    }

    /// Record event `i` on `stream` (0 = the default stream).
    pub fn record(&self, i: usize, stream: usize) -> Result<()> {
        let _scope = self.drv.enter(None, stream)?;
        self.drv.event_record(self.evs[i], stream)
    }

    /// Milliseconds from event `a` to event `b`, waiting for `b` to complete.
    pub fn elapsed_ms(&self, a: usize, b: usize) -> Result<f32> {
        let _scope = self.drv.enter(None, 0)?;
        self.drv.event_synchronize(self.evs[b])?;
        self.drv.event_elapsed_ms(self.evs[a], self.evs[b])
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        if let Ok(_scope) = self.drv.enter(None, 0) {
            for &e in &self.evs {
                self.drv.event_destroy(e);
            }
        }
    }
}

/// A stream of its own and, once captured, an executable graph of the calls made on it: replaying
/// the graph times the calls without the host's per-call launch cost (`ccv1d bench`).
pub struct Graph {
    drv: &'static dyn Driver,
    stream: usize,
    exec: Option<usize>,
}

impl Graph {
    /// A new stream in the context `Events::new` uses.
    pub fn new() -> Result<Graph> {
        let drv = super::drivers()?[0];
        let _scope = drv.enter(None, 0)?;
        Ok(Graph { drv, stream: drv.stream_create()?, exec: None })
    }

    /// The stream to make the calls on (pass it as the calls' `stream`).
    pub fn stream(&self) -> usize {
        self.stream
    }

    /// Capture what `calls` puts on the stream into the graph (replacing an earlier one). The
    /// capture is ended even when `calls` fails. Errors as text (the bench's currency).
    pub fn capture(&mut self, calls: impl FnOnce(usize) -> std::result::Result<(), String>) -> std::result::Result<(), String> {
        let _scope = self.drv.enter(None, self.stream).map_err(|e| e.msg)?;
        if let Some(g) = self.exec.take() {
            self.drv.graph_destroy(g);
        }
        self.drv.capture_begin(self.stream).map_err(|e| e.msg)?;
        let r = calls(self.stream);
        let g = self.drv.capture_end(self.stream);
        r?;
        self.exec = Some(g.map_err(|e| e.msg)?);
        Ok(())
    }

    /// Launch the captured graph on the stream.
    pub fn replay(&self) -> Result<()> {
        let Some(g) = self.exec else { bail!(CCV1D_ERR_INTERNAL, "no graph captured") };
        let _scope = self.drv.enter(None, self.stream)?;
        self.drv.graph_launch(g, self.stream)
    }

    /// Wait for the stream.
    pub fn synchronize(&self) -> Result<()> {
        let _scope = self.drv.enter(None, self.stream)?;
        self.drv.stream_synchronize(self.stream)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if let Ok(_scope) = self.drv.enter(None, self.stream) {
            if let Some(g) = self.exec.take() {
                self.drv.graph_destroy(g);
            }
            let _ = self.drv.stream_synchronize(self.stream);
            self.drv.stream_destroy(self.stream);
        }
    }
}
