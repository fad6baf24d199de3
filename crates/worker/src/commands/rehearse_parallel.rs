//! How many containers a rehearsal, or a batch of them, runs at once: shared by `worker
//! rehearse` and `worker rehearse --batch`, so neither command module imports the other's.

/// The size of one run of `manifest`, as `worker serve` sizes a job: its cpu quota and memory
/// limit.
pub(super) fn job_size(manifest: &verifier_sdk::RunnerManifest) -> worker_serve::capacity::JobSize {
    worker_serve::capacity::JobSize {
        cpu_millis: manifest.cpu_millis(),
        memory_bytes: manifest.memory_bytes(),
    }
}

/// How many containers run at once (of one rehearsal: repeats, base, stubs, mutants; of a
/// batch: every task's, under one limit): what `worker serve`'s default `--parallel` would run
/// of jobs of at most `size` ([`worker_serve::capacity::auto_parallel`]) on this engine; one
/// when the engine does not say.
pub(super) async fn host_parallel(
    executor: &worker_sandbox::Executor,
    size: worker_serve::capacity::JobSize,
) -> std::num::NonZeroUsize {
    use worker_serve::capacity::{Host, auto_parallel};
    let local = std::thread::available_parallelism()
        .ok()
        .map(std::num::NonZeroUsize::get);
    let host = match executor.host_resources().await {
        Ok(info) => Host::from_info(info.cpus, info.memory_bytes, local),
        Err(_) => Host::from_info(None, None, local),
    };
    auto_parallel(host, size).parallel
}
