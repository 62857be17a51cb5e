//! f64 oracle (stub until the real one lands).
