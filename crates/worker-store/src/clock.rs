//! The one clock of the worker (today read by `worker serve`, re-exported as
//! `worker_serve::clock`): a monotonic reading for every age and deadline the
//! service decides by (poll staleness, heartbeat age, host back-off), and the wall clock only
//! for what is stored or shown (ledger times, retry times that must survive a restart).
//!
//! Injected, not read from `SystemTime::now()` in each module, so that a test can step the
//! wall clock (back an hour, as NTP or an operator may) and move time forward without sleeping.

use std::fmt::Debug;
use std::sync::Arc;
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

/// The host's clock, moved forward by as much as a chain's latest block was seen ahead of it
/// (issue #43). A verification window is chain time: the signer refuses `deadline_too_close`
/// by the latest block's timestamp and the contract settles by its block's. When the chain runs
/// ahead of this host (a host clock running late, a development chain someone warped), a window
/// judged on the host clock looks longer than the signer will allow, and the worker would start
/// a job whose candidate gets refused. Never moved back behind the host: a latest block behind
/// it is an idle or lagging node (the next block carries at least the real time), and judging
/// by it would start jobs the contract refuses. The monotonic reading stays the host's.
#[derive(Debug)]
pub struct ChainAligned {
    host: Arc<dyn Clock>,
    ahead_ms: AtomicI64,
}

impl ChainAligned {
    /// The host's clock, not moved until a chain reading says so.
    pub fn new(host: Arc<dyn Clock>) -> Self {
        Self {
            host,
            ahead_ms: AtomicI64::new(0),
        }
    }

    /// Records the latest block's timestamp (unix seconds) read just now; returns how far the
    /// wall reading is now moved ahead of the host's, in milliseconds (0 when the block is not
    /// ahead). Each reading replaces the last: a chain that stops running ahead stops moving it.
    pub fn observe_chain(&self, block_secs: u64) -> i64 {
        let block_ms = i64::try_from(block_secs)
            .unwrap_or(i64::MAX)
            .saturating_mul(1000);
        let ahead = block_ms.saturating_sub(self.host.wall_ms()).max(0);
        self.ahead_ms.store(ahead, Ordering::SeqCst);
        ahead
    }

    /// How far the wall reading is moved ahead of the host's, in milliseconds.
    pub fn ahead_ms(&self) -> i64 {
        self.ahead_ms.load(Ordering::SeqCst)
    }
}

impl Clock for ChainAligned {
    fn monotonic(&self) -> Duration {
        self.host.monotonic()
    }

    fn wall_ms(&self) -> i64 {
        self.host.wall_ms().saturating_add(self.ahead_ms())
    }
}

#[cfg(test)]
mod chain_aligned_tests {
    use super::*;

    const HOST_MS: i64 = 1_900_000_000_000;

    fn aligned() -> (Arc<ManualClock>, ChainAligned) {
        let host = Arc::new(ManualClock::new(HOST_MS));
        let aligned = ChainAligned::new(host.clone());
        (host, aligned)
    }

    #[test]
    fn a_chain_ahead_of_the_host_moves_the_window_clock_ahead_and_time_keeps_passing() {
        let (host, clock) = aligned();
        assert_eq!(unix_secs(&clock), 1_900_000_000);
        assert_eq!(clock.observe_chain(1_900_000_300), 300_000);
        assert_eq!(unix_secs(&clock), 1_900_000_300);
        host.advance(Duration::from_secs(10));
        assert_eq!(unix_secs(&clock), 1_900_000_310);
        assert_eq!(clock.monotonic(), Duration::from_secs(10));
    }

    #[test]
    fn a_chain_behind_the_host_an_idle_or_lagging_node_never_moves_it_back() {
        let (_host, clock) = aligned();
        assert_eq!(clock.observe_chain(1_899_999_000), 0);
        assert_eq!(unix_secs(&clock), 1_900_000_000);
    }

    #[test]
    fn a_chain_that_stops_running_ahead_stops_moving_it() {
        let (_host, clock) = aligned();
        clock.observe_chain(1_900_000_300);
        clock.observe_chain(1_900_000_000);
        assert_eq!(clock.ahead_ms(), 0);
        assert_eq!(unix_secs(&clock), 1_900_000_000);
    }
}
