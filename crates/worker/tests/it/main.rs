//! The worker's integration tests, one binary with a module per area (linking one test binary
//! instead of a dozen is most of a build on a small machine). Modules whose tests start
//! containers are serialised by name in `.config/nextest.toml`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// tests may unwrap (COMMON.md)
// A test reads as one scenario from setup to assertions; splitting it to a line count hides
// the story.
#![allow(clippy::too_many_lines)]

mod cli_conventions;
mod cli_json;
mod example_feed;
mod feed_archive;
mod feed_cli;
mod feed_client;
mod feed_run;
mod feed_support;
mod gc;
mod in_toto;
mod per_test;
mod rehearse;
mod request;
mod run_regression;
mod sandbox_limits;
mod sandbox_profile;
mod sandbox_stale;
mod sandbox_verdict;
mod serve;
mod signals;
mod staging;
mod support;
mod validate_candidate;
