//! The feed runner: fetch jobs, select those committed to our verifier(s), download the
//! exact-commit archives, extract them safely, hand them to a [`JobExecutor`] (staging and
//! the sandbox), and write candidates and their manifest.
//!
//! Each job is isolated: whatever goes wrong with one (invalid job, hostile archive, digest
//! mismatch, no verdict, executor failure or panic) becomes its report row and the next job
//! runs. Completed verdicts are reused from a local cache when the run's full identity
//! matches, and so are refusals of an archive by rule (it would be refused again); no-verdict
//! results and transient failures are never cached, so they are retried.
//!
//! Deciding is kept apart from doing: [`select`] and [`report`] are pure, [`archive`],
//! [`cache`] and [`output`] touch only the local disk, and [`runner`] drives them with the
//! network client and the executor.

pub mod cache;
pub mod deadline;
pub mod outcome;
pub mod output;
pub mod readiness;
pub mod report;
pub mod runner;
pub mod sandbox_executor;
pub mod select;
pub mod shard;

pub use worker_store::{archive, scratch};

pub use outcome::{JobOutcome, RunCode};
pub use report::{BatchStatus, FeedReport, JobRow, JobStatus, OmittedJobs, REPORT_SCHEMA_VERSION};
pub use runner::{
    ExecutedJob, FeedConfig, FeedError, JobExecutor, JobFailure, JobRun, JobRunner, MAX_VERIFIERS,
    RunVerdict, fetch_feeds, run_feed, write_readiness,
};
pub use sandbox_executor::SandboxJobExecutor;
