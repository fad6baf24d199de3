//! The worker's jobs: which jobs of a feed to run ([`feed::select`]), fetching their public
//! archives and staging their trees ([`feed::runner`], over `worker-store`), the run step from
//! a validated job to its outcome and evidence ([`run`], over `worker-sandbox`'s executor),
//! candidates and their manifest ([`feed::output`]), in-toto statements ([`intoto`]), the
//! result cache ([`feed::cache`]), and a solver's commit run through that same path before
//! they bond ([`preflight`]).
//!
//! It does not pick or name a container engine (it holds a `worker_sandbox::Executor`), does
//! not parse a command line and names no exit code: the binary maps its typed results.

mod evidence_count;
pub mod feed;
pub mod intoto;
pub mod preflight;
pub mod reproduce;
pub mod run;
