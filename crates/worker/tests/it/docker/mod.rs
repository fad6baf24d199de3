//! Tests that start containers on the one Docker Engine. They run one at a time: the
//! `.config/nextest.toml` group `docker` takes every test under `docker::`, so a new module
//! that starts containers goes here and is serialised without editing any list.

mod authoring;
mod build_identity;
mod chain_clock;
mod cli_json;
mod doctor;
mod engine_host;
mod example_run;
mod feed_cli;
mod fleet;
mod gc;
mod images;
mod in_toto;
mod junit_stdout;
mod per_test;
mod preflight;
mod ran;
mod rehearse;
mod rehearse_batch_report;
mod rehearse_live_checker;
mod rehearse_mutants;
mod rehearse_stubs;
mod rehearse_support;
mod request;
mod run_regression;
mod sandbox_limits;
mod sandbox_neighbours;
mod sandbox_profile;
mod sandbox_runtime;
mod sandbox_stale;
mod sandbox_verdict;
mod serve;
mod signals;
