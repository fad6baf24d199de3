//! The worker's integration tests, one binary with a module per area (linking one test binary
//! instead of a dozen is most of a build on a small machine). Modules whose tests start
//! containers live under [`docker`], which `.config/nextest.toml` serialises as a whole.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// tests may unwrap (clippy.toml)
// A test reads as one scenario from setup to assertions; splitting it to a line count hides
// the story.
#![allow(clippy::too_many_lines)]

mod chain_readiness;
mod cli_conventions;
mod docker;
mod example_feed;
mod ledger_cli;
mod staging;
mod support;
mod validate_candidate;

// The feed stand-in is a crate of its own, since the libraries' tests use it too; the alias
// keeps this binary's `crate::feed_support` paths.
use test_feed as feed_support;
