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
//! enforces what it can, as for a single `worker feed` run); never more than the cpu quotas
//! and memory limits fit. An engine that reports no cpus or memory gets 1.

use std::num::NonZeroUsize;

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
}
