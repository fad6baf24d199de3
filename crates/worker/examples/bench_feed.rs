//! A platform stand-in for `scripts/bench-serve.sh`: serves a feed of N small jobs (the bundled
//! example, alternately on its passing and its failing source, each with its own round, solver
//! repository and commit, so every job id differs) and their codeload-style archives on a
//! loopback HTTP server, the way the `worker serve` tests do.
//!
//! The feed is read from `<dir>/feed.json` on every request, so the benchmark can take jobs
//! out of it between cycles (as the platform does once a job is settled). At start it writes
//! every job to `<dir>/all-jobs.json` and `<dir>/feed.json`, the jobs' verifier address to
//! `<dir>/verifier`, then the server's base URL to `<dir>/base`, and serves until killed.
//!
//! Usage: `bench_feed <repository root> <image@sha256:…[,image@sha256:…]> <jobs> <dir>`
//! (with several images, job N runs in image (N - 1) mod their number)
//!
//! With `BENCH_FEED_VERIFIER_SETS` (sets separated by `;`, addresses in a set by `,`), job N
//! commits to set (N - 1) mod the number of sets instead of the fixture's verifier, and each
//! verifier's feed query answers with the jobs that name it, as the platform does (the
//! key-rotation script test, `.github/scripts/tests/setup.sh`).
//!
//! `BENCH_FEED_FIXTURE=python-bounty` serves `fixtures/python-bounty` instead (its harness in
//! the Debian+python3 image, alternately on `solution-good` and `solution-bad`): a job of the
//! size a real bounty has, for `scripts/bench-cost.sh`'s cost per verification.
//!
//! `BENCH_FEED_UNPULLABLE_ROUNDS` (comma-separated rounds, optional) gives those jobs an image
//! digest no registry holds (the image's repository at sha256:00…01), so `worker feed --pull`
//! ends them `no_verdict (image_missing)`: one bounty author's broken image among good jobs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use test_feed::{VERIFIER, codeload_dir, dir_digest, feed_path};
use verifier_sdk::fixtures::{BENCHMARK_COMMIT, JobParams, job_value, sample_manifest};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, image, jobs, dir] = args.as_slice() else {
        eprintln!("usage: bench_feed <repository root> <image@sha256:…> <jobs> <dir>");
        return std::process::ExitCode::from(2);
    };
    let Ok(jobs) = jobs.parse::<u64>() else {
        eprintln!("bench_feed: <jobs> must be a number");
        return std::process::ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench_feed: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match runtime.block_on(serve(Path::new(root), image, jobs, Path::new(dir))) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_feed: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

async fn serve(root: &Path, image: &str, jobs: u64, dir: &Path) -> std::io::Result<()> {
    let fixture = Fixture::from_env()?;
    let example = root.join(fixture.dir);
    let bench = example.join("benchmark");
    let mut routes = std::collections::HashMap::new();
    routes.insert(
        format!("/bounty-org/benchmarks/tar.gz/{BENCHMARK_COMMIT}"),
        codeload_dir(
            &format!("benchmarks-{BENCHMARK_COMMIT}"),
            "suites/parser/",
            &bench,
        ),
    );
    let bench_digest = dir_digest(&bench);
    let sets: Vec<Vec<String>> = std::env::var("BENCH_FEED_VERIFIER_SETS")
        .map(|v| {
            v.split(';')
                .map(|set| set.split(',').map(str::to_owned).collect())
                .collect()
        })
        .unwrap_or_default();
    let unpullable: Vec<u64> = std::env::var("BENCH_FEED_UNPULLABLE_ROUNDS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let missing_image = format!(
        "{}@sha256:{}1",
        image.split('@').next().unwrap_or(image),
        "0".repeat(63)
    );
    let mut all = Vec::new();
    for round in 1..=jobs {
        let tree = example.join(if round % 2 == 1 {
            fixture.passing
        } else {
            fixture.failing
        });
        let repo = format!("bench-{round}");
        let commit = format!("{round:040x}");
        routes.insert(
            format!("/solver-org/{repo}/tar.gz/{commit}"),
            codeload_dir(&format!("{repo}-{commit}"), "", &tree),
        );
        let mut manifest = sample_manifest();
        // Several images (comma-separated, `scripts/bench-images.sh`): job N runs in image
        // (N - 1) mod their number.
        let images: Vec<&str> = image.split(',').collect();
        let index = usize::try_from(round.saturating_sub(1)).unwrap_or(0) % images.len();
        manifest["image"] = json!(if unpullable.contains(&round) {
            missing_image.as_str()
        } else {
            images[index]
        });
        manifest["command"] = json!(fixture.command);
        manifest["benchmark_digest"] = json!(bench_digest.to_string());
        all.push(job_value(&JobParams {
            round,
            artifact_reference: format!("https://github.com/solver-org/{repo}/commit/{commit}"),
            source_snapshot_digest: dir_digest(&tree).to_string(),
            manifest,
            verifiers: usize::try_from(round - 1)
                .ok()
                .and_then(|i| sets.get(i % sets.len().max(1)))
                .cloned()
                .unwrap_or_else(|| JobParams::default().verifiers),
            ..JobParams::default()
        }));
    }
    let all = Value::Array(all);
    let bytes = serde_json::to_vec(&all).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("all-jobs.json"), &bytes)?;
    std::fs::write(dir.join("feed.json"), &bytes)?;

    let routes = Arc::new(routes);
    let feed_file: PathBuf = dir.join("feed.json");
    let feed_prefix = feed_path("");
    let base = test_http::serve(move |request| {
        let target = request.target().to_owned();
        let reply = if let Some(verifier) = target.strip_prefix(&feed_prefix) {
            feed_for(&feed_file, verifier)
                .map(|body| test_http::Response::ok(Vec::new()).json_body(body))
                .unwrap_or_else(|| test_http::Response::status(500))
        } else {
            match routes.get(&target) {
                Some(body) => test_http::Response::ok(body.clone()),
                None => test_http::Response::not_found(Vec::new()),
            }
        };
        async move { Some(reply) }
    })
    .await?;
    std::fs::write(dir.join("verifier"), VERIFIER)?;
    std::fs::write(dir.join("base"), &base)?;
    std::future::pending::<()>().await;
    Ok(())
}

/// Which bundled bounty the jobs run: its folder, the passing and failing source trees in it,
/// and the command its manifest runs.
struct Fixture {
    dir: &'static str,
    passing: &'static str,
    failing: &'static str,
    command: &'static [&'static str],
}

impl Fixture {
    fn from_env() -> std::io::Result<Self> {
        match std::env::var("BENCH_FEED_FIXTURE").as_deref() {
            Err(_) | Ok("example") => Ok(Self {
                dir: "fixtures/example",
                passing: "source-pass",
                failing: "source-fail",
                command: &[
                    "/bin/cmp",
                    "/benchmark/expected.txt",
                    "/workspace/result.txt",
                ],
            }),
            Ok("python-bounty") => Ok(Self {
                dir: "fixtures/python-bounty",
                passing: "solution-good",
                failing: "solution-bad",
                command: &["python3", "-I", "-B", "/benchmark/run_tests.py", "6"],
            }),
            Ok(other) => Err(std::io::Error::other(format!(
                "BENCH_FEED_FIXTURE={other}: expected example or python-bounty"
            ))),
        }
    }
}

/// The jobs of `feed.json` that name `verifier`, as the platform answers one verifier's query.
fn feed_for(feed_file: &Path, verifier: &str) -> Option<Vec<u8>> {
    let jobs: Vec<Value> = serde_json::from_slice(&std::fs::read(feed_file).ok()?).ok()?;
    let named: Vec<&Value> = jobs
        .iter()
        .filter(|job| {
            job["eligible_verifiers"].as_array().is_some_and(|listed| {
                listed
                    .iter()
                    .any(|v| v.as_str().is_some_and(|v| v.eq_ignore_ascii_case(verifier)))
            })
        })
        .collect();
    serde_json::to_vec(&named).ok()
}
