//! `worker preflight` against `worker feed` on the same local stand-in (the feed's loopback
//! server serving the job feed and codeload-style archives) and the real Docker sandbox: the
//! two must agree on acceptance, the reason of a refusal, the source digest and the response
//! hash (issue #43 item 4).
//!
//! Needs the Docker daemon on the default socket and `scripts/services.sh` to have run; fails
//! loudly otherwise.

// Test scaffolding outside #[test] fns (builders, runners): failures should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use crate::example_feed::{ExampleFeed, commit, example};
use crate::feed_support::*;
use serde_json::{Value, json};
use verifier_sdk::fixtures::rehash;
use verifier_sdk::{Candidate, Sha256Digest, candidate_file_name};

const CMP: &[&str] = &[
    "/bin/cmp",
    "/benchmark/expected.txt",
    "/workspace/result.txt",
];

fn reference(job: &Value) -> String {
    job["submission_evidence"]["artifact_reference"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The bounty's job as the feed listed it for an earlier submission of another repository:
/// `submission`'s job with another artifact and digest, so nothing of the solver's commit is
/// in it.
fn earlier_submission(submission: &Value) -> Value {
    let mut job = submission.clone();
    job["submission_evidence"]["artifact_reference"] = json!(format!(
        "https://github.com/someone-else/attempt/commit/{}",
        "f".repeat(40)
    ));
    job["submission_evidence"]["evidence"]["source_snapshot_digest"] =
        json!(format!("sha256:{}", "c".repeat(64)));
    rehash(&mut job);
    job
}

struct Run {
    code: Option<i32>,
    json: Value,
    stderr: String,
}

async fn run(mut cmd: Command) -> Run {
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    Run {
        code: output.status.code(),
        json: serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn worker(w: &ExampleFeed, sub: &str, out: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
    cmd.args([sub, "--quiet", "--api", &w.server.base])
        .args(["--verifier", VERIFIER, "--network", "base-mainnet"])
        .arg("--out")
        .arg(w.path(out))
        .arg("--work-dir")
        .arg(w.path("work"))
        .arg("--staging-root")
        .arg(w.path("staging"))
        .args(["--archive-base", &w.server.base, "--json"])
        .env_remove("GITHUB_SHA")
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT");
    cmd
}

/// `worker preflight` of `submission`'s commit against the bounty's job listed under its id.
async fn preflight(w: &ExampleFeed, submission: &Value) -> Run {
    w.serve_jobs(&[&earlier_submission(submission)]);
    let mut cmd = worker(w, "preflight", "out-preflight");
    cmd.args(["--job-id", submission["job_id"].as_str().unwrap()])
        .args(["--commit", &reference(submission)]);
    run(cmd).await
}

/// `worker feed` with `submission` listed.
async fn feed(w: &ExampleFeed, submission: &Value) -> Run {
    w.serve_jobs(&[submission]);
    run(worker(w, "feed", "out-feed")).await
}

fn feed_row(feed: &Run) -> &Value {
    feed.json["jobs"]
        .as_array()
        .and_then(|rows| rows.first())
        .unwrap_or_else(|| panic!("no feed row: {}\n{}", feed.json, feed.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_refuses_an_archive_over_the_cap_with_the_feeds_reason() {
    let w = ExampleFeed::new(&["work", "staging", "out-preflight", "out-feed"]).await;
    let submission = w.job_running(7, Vec::new(), tree_digest(&[]), CMP);
    // One byte over the 256 MiB compressed cap, the bytes themselves sent (the downloader
    // counts what arrives, not what is announced).
    let over = usize::try_from(worker_jobs::feed::archive::SOURCE_MAX_COMPRESSED + 1).unwrap();
    w.server.route(
        &format!("/solver-org/sol-7/tar.gz/{}", commit(7)),
        Reply::ok(vec![0; over]),
    );

    let pre = preflight(&w, &submission).await;
    let fed = feed(&w, &submission).await;

    let row = feed_row(&fed);
    assert_eq!(row["status"], "rejected", "{}", fed.json);
    assert_eq!(row["reason_code"], "download_too_large", "{}", fed.json);
    assert_eq!(pre.code, Some(4), "{}\n{}", pre.json, pre.stderr);
    assert_eq!(pre.json["answer"], "refused", "{}", pre.json);
    assert_eq!(pre.json["reason_code"], row["reason_code"], "{}", pre.json);
    assert_eq!(
        pre.json["schema_version"],
        "agent-bounties/regression-preflight-v1"
    );
    assert_eq!(pre.json["source_snapshot_digest"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_passes_preflight_passes_the_feed_with_the_same_digest_and_response_hash() {
    let w = ExampleFeed::new(&["work", "staging", "out-preflight", "out-feed"]).await;
    let tree = example("source-pass");
    let digest = dir_digest(&tree);
    let archive = codeload_dir(&format!("sol-8-{}", commit(8)), "", &tree);
    let submission = w.job_running(8, archive, digest, CMP);

    let pre = preflight(&w, &submission).await;
    assert_eq!(pre.code, Some(0), "{}\n{}", pre.json, pre.stderr);
    assert_eq!(pre.json["answer"], "verdict", "{}", pre.json);
    assert_eq!(pre.json["verdict"], "passed", "{}", pre.json);
    let pre_digest: Sha256Digest = pre.json["source_snapshot_digest"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(pre_digest, digest);

    let candidate = feed_passes_as_preflight_said(&w, &submission, &pre).await;
    assert_eq!(candidate.outcome["verdict"], "passed");
}

/// Feeds `submission` and checks that it passes with the response hash and source digest
/// preflight `pre` answered; returns the candidate.
async fn feed_passes_as_preflight_said(
    w: &ExampleFeed,
    submission: &Value,
    pre: &Run,
) -> Candidate {
    let fed = feed(w, submission).await;
    assert_eq!(
        feed_row(&fed)["status"],
        "completed_passed",
        "{}\n{}",
        fed.json,
        fed.stderr
    );
    let file = w
        .path("out-feed")
        .join(candidate_file_name(submission["job_id"].as_str().unwrap()));
    let candidate =
        Candidate::from_value(&serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap())
            .unwrap();
    assert_eq!(
        candidate.outcome["response_hash"], pre.json["response_hash"],
        "preflight {}",
        pre.json
    );
    assert_eq!(
        candidate.job["submission_evidence"]["evidence"]["source_snapshot_digest"],
        pre.json["source_snapshot_digest"]
    );
    candidate
}

fn git(dir: &std::path::Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "solver")
        .env("GIT_AUTHOR_EMAIL", "solver@example.invalid")
        .env("GIT_COMMITTER_NAME", "solver")
        .env("GIT_COMMITTER_EMAIL", "solver@example.invalid")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {:?}", out);
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_revision_is_judged_as_the_feed_judges_the_same_commit_from_github() {
    let w = ExampleFeed::new(&["work", "staging", "out-preflight", "out-feed", "repo"]).await;
    let repo = w.path("repo");
    for (path, data) in read_tree(&example("source-pass")) {
        let p = repo.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "the fix"]);
    let sha = String::from_utf8(git(&repo, &["rev-parse", "HEAD"]))
        .unwrap()
        .trim()
        .to_owned();
    // What GitHub would serve for the pushed commit: `git archive`'s own bytes.
    let archive = git(
        &repo,
        &[
            "archive",
            "--format=tar.gz",
            &format!("--prefix=sol-9-{sha}/"),
            &sha,
        ],
    );
    w.server.route(
        &format!("/solver-org/sol-9/tar.gz/{sha}"),
        Reply::ok(archive),
    );
    let mut submission = w.job_running(9, Vec::new(), dir_digest(&example("source-pass")), CMP);
    submission["submission_evidence"]["artifact_reference"] =
        json!(format!("https://github.com/solver-org/sol-9/commit/{sha}"));
    rehash(&mut submission);

    w.serve_jobs(&[&earlier_submission(&submission)]);
    let mut cmd = worker(&w, "preflight", "out-preflight");
    cmd.args(["--job-id", submission["job_id"].as_str().unwrap()])
        .arg("--source")
        .arg(&repo)
        .args(["--rev", "HEAD", "--repo", "solver-org/sol-9"]);
    let pre = run(cmd).await;
    assert_eq!(pre.code, Some(0), "{}\n{}", pre.json, pre.stderr);
    assert_eq!(pre.json["verdict"], "passed", "{}", pre.json);
    assert_eq!(
        pre.json["artifact_reference"],
        json!(reference(&submission))
    );
    // The local archive came from preflight's loopback stand-in, never from the GitHub
    // stand-in; the benchmark was passed through from --archive-base.
    assert_eq!(w.server.hits(&format!("/solver-org/sol-9/tar.gz/{sha}")), 0);
    let bench_path = format!(
        "/bounty-org/benchmarks/tar.gz/{}",
        verifier_sdk::fixtures::BENCHMARK_COMMIT
    );
    assert!(w.server.hits(&bench_path) >= 1);

    feed_passes_as_preflight_said(&w, &submission, &pre).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_from_a_job_file_refuses_a_path_traversal_archive_as_archive_rejected_like_the_feed()
 {
    let w = ExampleFeed::new(&["work", "staging", "out-preflight", "out-feed"]).await;
    let top = format!("sol-3-{}", commit(3));
    let evil = tar_gz(&[
        dir(&format!("{top}/")),
        file(&format!("{top}/result.txt"), b"expected-output\n"),
        file(
            &format!("{top}/../../escaped.txt"),
            b"preflight traversal payload",
        ),
    ]);
    let submission = w.job_running(3, evil, dir_digest(&example("source-pass")), CMP);
    let job_file = w.path("job.json");
    std::fs::write(
        &job_file,
        serde_json::to_vec(&earlier_submission(&submission)).unwrap(),
    )
    .unwrap();

    let mut cmd = worker(&w, "preflight", "out-preflight");
    cmd.arg("--job")
        .arg(&job_file)
        .args(["--commit", &reference(&submission)]);
    let pre = run(cmd).await;
    let fed = feed(&w, &submission).await;

    let row = feed_row(&fed);
    assert_eq!(row["reason_code"], "archive_rejected", "{}", fed.json);
    assert_eq!(pre.code, Some(4), "{}\n{}", pre.json, pre.stderr);
    assert_eq!(pre.json["answer"], "refused", "{}", pre.json);
    assert_eq!(pre.json["reason_code"], row["reason_code"]);
    let leaked: Vec<_> = read_tree(w.tmp.path())
        .into_iter()
        .filter(|(_, data)| data == b"preflight traversal payload")
        .collect();
    assert!(leaked.is_empty(), "traversal wrote {leaked:?}");
}
