//! The one clock of the worker (today read by `worker serve`, re-exported as
//! `worker_serve::clock`): a monotonic reading for every age and deadline the
//! service decides by (poll staleness, heartbeat age, host back-off), and the wall clock only
//! for what is stored or shown (ledger times, retry times that must survive a restart).
//!
//! Injected, not read from `SystemTime::now()` in each module, so that a test can step the
//! wall clock (back an hour, as NTP or an operator may) and move time forward without sleeping.

use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where the service reads the time.
pub trait Clock: Send + Sync + Debug {
    /// Time since a fixed origin in this process; never goes back, whatever the wall clock does.
    fn monotonic(&self) -> Duration;
    /// The wall clock, in unix milliseconds (for what is stored or shown, never for an age).
    fn wall_ms(&self) -> i64;
}

/// `clock`'s wall time in unix seconds: the time a job's window, a request's expiry and a
/// candidate's liveness are checked at.
pub fn unix_secs(clock: &dyn Clock) -> u64 {
    u64::try_from(clock.wall_ms() / 1000).unwrap_or(0)
}

/// The system's clocks: [`Instant`] and [`SystemTime`].
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose monotonic origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wall_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock moved by hand (tests): [`ManualClock::advance`] moves both readings, as time
/// passing does; [`ManualClock::step_wall`] moves the wall clock alone, as a clock step does.
#[derive(Debug)]
pub struct ManualClock {
    monotonic_ms: AtomicU64,
    wall_ms: AtomicI64,
}

impl ManualClock {
    /// Monotonic 0, the wall clock at `wall_ms`.
    pub fn new(wall_ms: i64) -> Self {
        Self {
            monotonic_ms: AtomicU64::new(0),
            wall_ms: AtomicI64::new(wall_ms),
        }
    }

    /// Time passes.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.monotonic_ms.fetch_add(ms, Ordering::SeqCst);
        self.wall_ms
            .fetch_add(i64::try_from(ms).unwrap_or(i64::MAX), Ordering::SeqCst);
    }

    /// The wall clock steps by `by_ms` (negative: back); the monotonic clock does not move.
    pub fn step_wall(&self, by_ms: i64) {
        self.wall_ms.fetch_add(by_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn monotonic(&self) -> Duration {
        Duration::from_millis(self.monotonic_ms.load(Ordering::SeqCst))
    }

    fn wall_ms(&self) -> i64 {
        self.wall_ms.load(Ordering::SeqCst)
    }
}
