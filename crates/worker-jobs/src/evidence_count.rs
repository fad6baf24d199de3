//! Test-only tallies of how often one evidence record is serialised (a `serde_json` call on
//! the typed record) and hashed (SHA-256 over its canonical bytes) on a run's way up, so that
//! a test can pin "once each" (issue #48). Outside tests the calls compile to nothing.

#[cfg(test)]
use std::cell::Cell;

#[cfg(test)]
thread_local! {
    static SERIALISED: Cell<usize> = const { Cell::new(0) };
    static HASHED: Cell<usize> = const { Cell::new(0) };
}

/// One serialisation of an evidence record.
pub(crate) fn serialised() {
    #[cfg(test)]
    SERIALISED.with(|c| c.set(c.get() + 1));
}

/// One hash of an evidence record's bytes.
pub(crate) fn hashed() {
    #[cfg(test)]
    HASHED.with(|c| c.set(c.get() + 1));
}

/// `(serialised, hashed)` on this thread since the last call; resets both.
#[cfg(test)]
pub(crate) fn take() -> (usize, usize) {
    (
        SERIALISED.with(|c| c.replace(0)),
        HASHED.with(|c| c.replace(0)),
    )
}
