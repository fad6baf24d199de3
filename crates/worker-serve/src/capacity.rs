//! The default of `worker serve --parallel`: how many jobs fit on the engine at once.
//!
//! Each job's container gets the cpu quota and memory limit its runner manifest asks for
//! (`cpu_millis`, `memory_bytes`; the `/tmp` tmpfs is charged to the same memory limit).
//! Before each batch, with `L` the largest `cpu_millis` and `M` the largest `memory_bytes`
//! among the jobs due (each taken separately, so any `n` of them fit together):
//!
//! ```text
//! cpus   = min(engine NCPU, this host's available cores)      (engine /info)
//! memory = engine MemTotal - min(1 GiB, MemTotal / 4)         (kept for the host)
//! n      = clamp(min(floor(cpus * 1000 / L), floor(memory / M)), 1, 64)
//! ```
//!
//! At least one job runs even when a manifest asks more than the host has (the engine then
//! enforces what it can, as for a single `worker feed` run); never more than the memory
//! limits fit. An engine that reports no cpus or memory gets 1.
//!
//! The engine's latency ([`auto_parallel_after`]): a job in flight is not all the time in its
//! command. Create, start, the checks around them, wait and remove are the engine's work,
//! latency-bound and largely idle on the job's cpu quota (issue 29: the Engine API driven
//! directly runs the bundled example at 26k jobs/hour with 1 in flight, 33–36k with 2 and
//! 41.5k with 4 on a 2-core machine). So once the recent runs are short (the median of the
//! last [`RECENT_RUNS`] executions under [`SHORT_RUN`], at least two seen), the cpu bound
//! admits [`LATENCY_OVERLAP`] times the quotas: `n = clamp(min(floor(cpus * 1000 / L) * 2,
//! floor(memory / M)), 1, 64)`. Memory is never overlapped: a memory limit is what the
//! container may really hold at once. Long runs keep the quota busy, so they keep the plain
//! bound (and cpu-bound commands their timing); until two runs are seen, the plain bound too.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::time::Duration;

/// Most jobs the default ever runs at once, however large the host.
pub const MAX_AUTO_PARALLEL: usize = 64;

/// Memory kept for the host (the worker's downloads and staging, the engine itself).
pub const HOST_RESERVE_BYTES: u64 = 1 << 30;

/// What the engine can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    /// Cores.
    pub cpus: u64,
    /// Memory in bytes.
    pub memory_bytes: u64,
}

impl Host {
    /// From the engine's `/info` (`NCPU`, `MemTotal`, either of which may be missing or
    /// nonsense) and this host's available cores.
    pub fn from_info(ncpu: Option<i64>, mem_total: Option<i64>, local_cpus: Option<usize>) -> Self {
        let engine_cpus = ncpu.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
        let cpus = match local_cpus.and_then(|n| u64::try_from(n).ok()) {
            Some(local) => engine_cpus.min(local),
            None => engine_cpus,
        };
        Self {
            cpus,
            memory_bytes: mem_total.and_then(|m| u64::try_from(m).ok()).unwrap_or(0),
        }
    }
}

/// The largest limits among the jobs of a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobSize {
    /// Thousandths of a core.
    pub cpu_millis: u64,
    /// Bytes.
    pub memory_bytes: u64,
}

impl JobSize {
    /// The component-wise maximum of `self` and `other`.
    #[must_use]
    pub fn max(self, other: Self) -> Self {
        Self {
            cpu_millis: self.cpu_millis.max(other.cpu_millis),
            memory_bytes: self.memory_bytes.max(other.memory_bytes),
        }
    }
}

/// The chosen number and why, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Jobs at once.
    pub parallel: NonZeroUsize,
    /// How it was derived.
    pub why: String,
}

/// How many jobs of at most `largest` fit on `host` at once (the module's formula).
pub fn auto_parallel(host: Host, largest: JobSize) -> Choice {
    if host.cpus == 0 || host.memory_bytes == 0 {
        return Choice {
            parallel: NonZeroUsize::MIN,
            why: format!(
                "the engine reported {} cpu(s) and {} bytes of memory: running one job at a time",
                host.cpus, host.memory_bytes
            ),
        };
    }
    // A manifest cannot ask for 0 (the protocol's bounds start at 100 millis and 64 MiB);
    // the guard keeps a bad value from dividing by zero all the same.
    let cpu_millis = largest.cpu_millis.max(1);
    let memory_bytes = largest.memory_bytes.max(1);
    let usable = host
        .memory_bytes
        .saturating_sub(HOST_RESERVE_BYTES.min(host.memory_bytes / 4));
    let by_cpu = host.cpus.saturating_mul(1000) / cpu_millis;
    let by_memory = usable / memory_bytes;
    let cap = u64::try_from(MAX_AUTO_PARALLEL).unwrap_or(u64::MAX);
    let n = by_cpu.min(by_memory).clamp(1, cap);
    let parallel = usize::try_from(n)
        .ok()
        .and_then(NonZeroUsize::new)
        .unwrap_or(NonZeroUsize::MIN);
    Choice {
        parallel,
        why: format!(
            "{} cpu(s) / {cpu_millis} millis per job = {by_cpu}; {usable} usable bytes / \
             {memory_bytes} per job = {by_memory}; clamped to 1..={MAX_AUTO_PARALLEL}",
            host.cpus
        ),
    }
}

/// Runs whose median execution (staging and the sandbox run, container included) is under
/// this leave much of their time in flight to the engine's latency: a quiet engine's
/// create/start/remove alone is ~0.1–0.3 s, and the lifecycle's checks add to it.
pub const SHORT_RUN: Duration = Duration::from_secs(2);

/// How many times the cpu quotas the default runs at once when the runs are short.
pub const LATENCY_OVERLAP: u64 = 2;

/// How many recent executions the short-run test looks at.
pub const RECENT_RUNS: usize = 8;

/// The durations of the last [`RECENT_RUNS`] executions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecentRuns {
    last: VecDeque<Duration>,
}

impl RecentRuns {
    /// Records one execution's duration (a run that executed: a cached or refused job says
    /// nothing of the engine).
    pub fn push(&mut self, took: Duration) {
        if self.last.len() == RECENT_RUNS {
            self.last.pop_front();
        }
        self.last.push_back(took);
    }

    /// Whether at least two runs were seen and their median is under [`SHORT_RUN`] (the upper
    /// median of an even count: the longer of the middle two, the cautious side).
    pub fn short(&self) -> bool {
        if self.last.len() < 2 {
            return false;
        }
        let mut sorted: Vec<Duration> = self.last.iter().copied().collect();
        sorted.sort();
        sorted.get(sorted.len() / 2).is_some_and(|m| *m < SHORT_RUN)
    }
}

/// [`auto_parallel`], with the cpu bound overlapped [`LATENCY_OVERLAP`] times when `recent`
/// runs are short (the module's second formula).
pub fn auto_parallel_after(host: Host, largest: JobSize, recent: &RecentRuns) -> Choice {
    if !recent.short() {
        return auto_parallel(host, largest);
    }
    let overlapped = Host {
        cpus: host.cpus.saturating_mul(LATENCY_OVERLAP),
        ..host
    };
    let choice = auto_parallel(overlapped, largest);
    Choice {
        why: format!(
            "recent runs short (median under {}s): engine latency overlapped, cpu counted {LATENCY_OVERLAP}x: {}",
            SHORT_RUN.as_secs(),
            choice.why
        ),
        ..choice
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn n(host: Host, largest: JobSize) -> usize {
        auto_parallel(host, largest).parallel.get()
    }

    fn host(cpus: u64, memory_bytes: u64) -> Host {
        Host { cpus, memory_bytes }
    }

    fn job(cpu_millis: u64, memory_bytes: u64) -> JobSize {
        JobSize {
            cpu_millis,
            memory_bytes,
        }
    }

    #[test]
    fn serve_parallel_default_fits_cpu_and_memory() {
        // 2 cores, 8 GiB: cpu allows 2 one-core jobs, memory (7 GiB usable) 13 of 512 MiB.
        assert_eq!(n(host(2, 8 * GIB), job(1000, 512 * MIB)), 2);
        // 16 cores, 8 GiB: memory is the bound, 7 GiB / 2 GiB = 3.
        assert_eq!(n(host(16, 8 * GIB), job(1000, 2 * GIB)), 3);
        // Half-core jobs: 2 cores hold 4.
        assert_eq!(n(host(2, 64 * GIB), job(500, 64 * MIB)), 4);
        // Small host: the reserve is a quarter of memory.
        assert_eq!(n(host(4, 2 * GIB), job(100, 512 * MIB)), 3);
    }

    #[test]
    fn serve_parallel_default_is_1_when_the_engine_reports_nothing() {
        assert_eq!(n(host(0, 8 * GIB), job(1000, 512 * MIB)), 1);
        assert_eq!(n(host(8, 0), job(1000, 512 * MIB)), 1);
        assert_eq!(n(host(0, 0), job(0, 0)), 1);
        let h = Host::from_info(Some(-4), Some(-1), Some(8));
        assert_eq!(h, host(0, 0));
        assert_eq!(n(h, job(100, 64 * MIB)), 1);
        assert_eq!(Host::from_info(None, None, None), host(0, 0));
    }

    #[test]
    fn serve_parallel_default_is_1_when_a_manifest_asks_more_than_the_host() {
        assert_eq!(n(host(2, 8 * GIB), job(4000, 512 * MIB)), 1);
        assert_eq!(n(host(64, 2 * GIB), job(100, 4 * GIB)), 1);
        assert_eq!(n(host(1, GIB), job(u64::MAX, u64::MAX)), 1);
    }

    #[test]
    fn serve_parallel_default_survives_huge_values_and_zero_limits() {
        assert_eq!(n(host(u64::MAX, u64::MAX), job(0, 0)), MAX_AUTO_PARALLEL);
        assert_eq!(
            n(host(u64::MAX, u64::MAX), job(u64::MAX, 1)),
            1,
            "u64::MAX cores * 1000 saturates, / u64::MAX millis = 1"
        );
        assert_eq!(
            n(host(1024, 1 << 50), job(100, 64 * MIB)),
            MAX_AUTO_PARALLEL
        );
        // The engine's cores are capped by this host's, and the other way round.
        assert_eq!(
            Host::from_info(Some(64), Some(i64::MAX), Some(2)),
            host(2, i64::MAX.unsigned_abs())
        );
        assert_eq!(Host::from_info(Some(2), Some(1), Some(64)).cpus, 2);
        assert_eq!(
            Host::from_info(Some(i64::MAX), Some(1), None).cpus,
            i64::MAX.unsigned_abs()
        );
    }

    #[test]
    fn serve_parallel_default_uses_the_largest_limits_of_the_batch() {
        let largest = job(500, 4 * GIB).max(job(2000, 64 * MIB));
        assert_eq!(largest, job(2000, 4 * GIB));
        // 8 cores / 2 cores = 4, but 15 GiB / 4 GiB = 3.
        assert_eq!(n(host(8, 16 * GIB), largest), 3);
        let c = auto_parallel(host(8, 16 * GIB), largest);
        assert!(c.why.contains("2000 millis"), "{}", c.why);
    }

    fn runs(took_ms: &[u64]) -> RecentRuns {
        let mut recent = RecentRuns::default();
        for ms in took_ms {
            recent.push(std::time::Duration::from_millis(*ms));
        }
        recent
    }

    #[test]
    fn serve_parallel_default_overlaps_the_engine_latency_of_short_runs() {
        // 2 cores, one-core jobs: the cpu quotas fit 2, but runs of under a second spend
        // much of their time in the engine's create/start/remove, where the quota is idle.
        let (h, j) = (host(2, 8 * GIB), job(1000, 512 * MIB));
        assert_eq!(
            auto_parallel_after(h, j, &runs(&[300, 450, 280]))
                .parallel
                .get(),
            4
        );
        let c = auto_parallel_after(h, j, &runs(&[300, 450, 280]));
        assert!(c.why.contains("engine latency"), "{}", c.why);
        // No run seen yet, or runs that keep the quota busy: the quotas as they are.
        assert_eq!(auto_parallel_after(h, j, &runs(&[])).parallel.get(), 2);
        assert_eq!(
            auto_parallel_after(h, j, &runs(&[9_000, 12_000, 300]))
                .parallel
                .get(),
            2
        );
        // One short run is not yet a pattern.
        assert_eq!(auto_parallel_after(h, j, &runs(&[300])).parallel.get(), 2);
    }

    #[test]
    fn serve_parallel_default_overlap_stays_bounded_by_memory() {
        // 7 GiB usable / 2 GiB = 3: memory is a hard limit, the overlap never passes it.
        let j = job(1000, 2 * GIB);
        assert_eq!(
            auto_parallel_after(host(2, 8 * GIB), j, &runs(&[200, 200]))
                .parallel
                .get(),
            3
        );
        // The cap holds too.
        assert_eq!(
            auto_parallel_after(host(1024, 1 << 50), job(100, 64 * MIB), &runs(&[200, 200]))
                .parallel
                .get(),
            MAX_AUTO_PARALLEL
        );
        // An engine that reports nothing still gets one.
        assert_eq!(
            auto_parallel_after(host(0, 0), j, &runs(&[200, 200]))
                .parallel
                .get(),
            1
        );
    }

    #[test]
    fn serve_parallel_recent_runs_forget_old_ones() {
        // Long runs long ago, short ones since: the window holds only the last RECENT_RUNS.
        let mut took = vec![60_000; RECENT_RUNS];
        took.extend(std::iter::repeat_n(200, RECENT_RUNS));
        assert!(runs(&took).short());
        took.extend(std::iter::repeat_n(60_000, RECENT_RUNS / 2 + 1));
        assert!(!runs(&took).short());
    }
}
