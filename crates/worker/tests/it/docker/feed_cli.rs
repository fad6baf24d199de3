//! `worker feed` end to end: the real binary, the real Docker sandbox (busybox image from the
//! local registry, digest-pinned in `.work/images.json`), and a job feed plus codeload-style
//! archives served by a real HTTP server on loopback. The jobs are the bundled example
//! (fixtures/example): `cmp` of the benchmark's expected output with the solver's result.
//!
//! Needs the Docker daemon on the default socket and `scripts/services.sh` to have run; fails
//! loudly otherwise.

// Test scaffolding outside #[test] fns (builders, runners): failures should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::example_feed::{ExampleFeed, commit, example, feed_args, with_folders};
use crate::feed_support::*;
use serde_json::{Value, json};
use verifier_sdk::{Candidate, CandidateManifest, Sha256Digest, candidate_file_name};

const REPORT_SCHEMA: &str = "agent-bounties/regression-feed-report-v1";

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The shared example feed, with the directories `worker feed` uses.
struct World(ExampleFeed);

impl std::ops::Deref for World {
    type Target = ExampleFeed;
    fn deref(&self) -> &ExampleFeed {
        &self.0
    }
}

impl World {
    async fn new() -> Self {
        Self(ExampleFeed::new(&["work", "staging", "cache"]).await)
    }

    /// Serves `archive` as `solver-org/sol-<round>@<commit(round)>` and returns a job for it
    /// committed to `source_digest`, running the example's `cmp` in busybox.
    fn job(&self, round: u64, archive: Vec<u8>, source_digest: Sha256Digest) -> Value {
        self.job_running(
            round,
            archive,
            source_digest,
            &[
                "/bin/cmp",
                "/benchmark/expected.txt",
                "/workspace/result.txt",
            ],
        )
    }

    /// A job whose source is the example tree `name`, committed to that tree's digest.
    fn example_job(&self, round: u64, name: &str) -> Value {
        let tree = example(name);
        let top = format!("sol-{round}-{}", commit(round));
        self.job(round, codeload_dir(&top, "", &tree), dir_digest(&tree))
    }

    /// `worker feed --json` into `out` with the cache, work dir and staging root of this
    /// world; `env` is added to the child's environment.
    async fn feed(&self, out: &str, env: &[(&str, &str)]) -> Outcome {
        self.feed_staged(out, env, &self.path("staging")).await
    }

    /// As [`World::feed`], with `staging` as the staging root.
    async fn feed_staged(&self, out: &str, env: &[(&str, &str)], staging: &Path) -> Outcome {
        let mut cmd = self.command(out, staging);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let output = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        Outcome {
            code: output.status.code(),
            report,
            stderr,
        }
    }

    /// The `worker feed --json` command line of this world.
    fn command(&self, out: &str, staging: &Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
        feed_args(
            &mut cmd,
            &self.server.base,
            &self.path(out),
            &self.path("work"),
            staging,
        )
        .arg("--cache-dir")
        .arg(self.path("cache"))
        .arg("--json")
        .env_remove("GITHUB_SHA");
        cmd
    }

    /// A valid job (round 1, the passing example) and, beside it, round 2 serving the archive
    /// `archive` makes for its top folder while committing to the passing example's digest.
    fn valid_and_bad_jobs(&self, archive: impl FnOnce(&str) -> Vec<u8>) -> (Value, Value) {
        let good = self.example_job(1, "source-pass");
        let top = format!("sol-2-{}", commit(2));
        let bad = self.job(2, archive(&top), dir_digest(&example("source-pass")));
        (good, bad)
    }

    /// Checks that of `run` into `out` only `good` ran, passed and left a candidate; returns
    /// the signable candidates.
    fn assert_only_the_valid_job_ran(
        &self,
        run: &Outcome,
        good: &Value,
        out: &str,
    ) -> BTreeMap<String, (String, Vec<u8>)> {
        assert_eq!(run.row(good)["status"], "completed_passed");
        let candidates = signable_candidates(&self.path(out));
        assert_eq!(candidates.keys().collect::<Vec<_>>(), [&id(good)]);
        assert_eq!(self.evidence_files().len(), 1, "the bad job ran");
        candidates
    }

    /// Evidence records the executor has written into the store.
    fn evidence_files(&self) -> Vec<PathBuf> {
        let dir = self.path("staging/evidence/sha256");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
        files.sort();
        files
    }
}

struct Outcome {
    code: Option<i32>,
    report: Value,
    stderr: String,
}

impl Outcome {
    fn row(&self, job: &Value) -> &Value {
        let id = &job["job_id"];
        self.report["jobs"]
            .as_array()
            .unwrap_or_else(|| panic!("no report; stderr:\n{}", self.stderr))
            .iter()
            .find(|r| &r["job_id"] == id)
            .unwrap_or_else(|| panic!("no row for {id}; stderr:\n{}", self.stderr))
    }

    fn assert_code(&self, want: i32) {
        assert_eq!(
            self.code,
            Some(want),
            "exit status; report {}\nstderr:\n{}",
            self.report,
            self.stderr
        );
    }
}

/// Reads `out`'s manifest and candidates with the sdk's strict readers and re-validates every
/// candidate as the signer does (job unchanged, outcome and evidence record consistent).
/// Returns job id → (verdict status, candidate file bytes).
fn signable_candidates(out: &Path) -> BTreeMap<String, (String, Vec<u8>)> {
    let raw: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let manifest = CandidateManifest::from_value(&raw).unwrap();
    assert_eq!(manifest.network, "base-mainnet");
    let mut found = BTreeMap::new();
    for entry in &manifest.candidates {
        assert_eq!(entry.file, candidate_file_name(&entry.job_id));
        let bytes = std::fs::read(out.join(&entry.file)).unwrap();
        let c = Candidate::from_value(&serde_json::from_slice(&bytes).unwrap()).unwrap();
        let evidence = c.evidence.as_ref();
        assert!(evidence.is_some(), "candidate without evidence");
        let checked =
            verifier_sdk::revalidate_candidate(&c.job, &c.job, &c.outcome, evidence, now_unix())
                .unwrap_or_else(|e| panic!("the signer would refuse {}: {e}", entry.job_id));
        assert_eq!(checked.job.job_id(), entry.job_id);
        let status = c.outcome["verdict"].as_str().unwrap().to_owned();
        found.insert(entry.job_id.clone(), (status, bytes));
    }
    found
}

fn id(job: &Value) -> String {
    job["job_id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_example_jobs_yield_signable_verdicts_and_the_cache_reruns_nothing() {
    let w = World::new().await;
    let pass = w.example_job(1, "source-pass");
    let fail = w.example_job(2, "source-fail");
    w.serve_jobs(&[&pass, &fail]);

    let first = w.feed("out1", &[]).await;
    first.assert_code(0);
    assert_eq!(first.report["schema_version"], REPORT_SCHEMA);
    assert_eq!(first.report["executed"], 2);
    assert_eq!(first.row(&pass)["status"], "completed_passed");
    assert_eq!(first.row(&fail)["status"], "completed_failed");
    for job in [&pass, &fail] {
        assert_eq!(first.row(job)["reused_from_cache"], false);
        assert_eq!(
            first.row(job)["candidate_file"],
            candidate_file_name(&id(job))
        );
    }
    let candidates = signable_candidates(&w.path("out1"));
    assert_eq!(candidates.len(), 2);
    assert_eq!(candidates[&id(&pass)].0, "passed");
    assert_eq!(candidates[&id(&fail)].0, "failed");
    // One evidence record per container run, each the one its candidate carries.
    let evidence = w.evidence_files();
    assert_eq!(evidence.len(), 2, "evidence store: {evidence:?}");
    for (_, bytes) in candidates.values() {
        let c: Value = serde_json::from_slice(bytes).unwrap();
        let on_disk = evidence
            .iter()
            .map(|p| serde_json::from_slice::<Value>(&std::fs::read(p).unwrap()).unwrap())
            .any(|e| e == c["evidence"]);
        assert!(on_disk, "candidate evidence is not a record in the store");
    }

    let second = w.feed("out2", &[]).await;
    second.assert_code(0);
    assert_eq!(second.report["executed"], 0);
    for job in [&pass, &fail] {
        assert_eq!(second.row(job)["reused_from_cache"], true);
    }
    // Every run writes an evidence record with a fresh run id: none means no container ran.
    assert_eq!(w.evidence_files(), evidence);
    assert_eq!(signable_candidates(&w.path("out2")), candidates);
}

/// A job whose manifest pins another digest under the name of an image this host holds:
/// the sandbox's image check refuses it before create (the runner no longer compares an
/// image digest the executor could only echo from the manifest), so no container runs on
/// the local image and no candidate is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_pinning_another_digest_of_a_local_image_runs_nothing_and_yields_no_candidate() {
    let mut w = World::new().await;
    let (name, _) = w.image.rsplit_once("@sha256:").unwrap();
    w.0.image = format!("{name}@sha256:{}", "0".repeat(64));
    let job = w.example_job(1, "source-pass");
    w.serve_jobs(&[&job]);

    let out = w.feed("out", &[]).await;
    out.assert_code(3);
    assert_eq!(out.row(&job)["status"], "no_verdict");
    assert_eq!(out.row(&job)["reason_code"], "image_missing");
    assert_eq!(out.row(&job)["candidate_file"], Value::Null);
    assert!(signable_candidates(&w.path("out")).is_empty());
    let evidence = w.evidence_files();
    assert_eq!(evidence.len(), 1, "evidence store: {evidence:?}");
    let record: Value = serde_json::from_slice(&std::fs::read(&evidence[0]).unwrap()).unwrap();
    assert_eq!(record["container"], Value::Null, "a container was created");
    assert_eq!(record["image"], Value::Null, "the engine resolved an image");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_from_outside_is_no_verdict_and_never_cached() {
    let w = World::new().await;
    let tree = example("source-pass");
    let top = format!("sol-1-{}", commit(1));
    let job = w.job_running(
        1,
        codeload_dir(&top, "", &tree),
        dir_digest(&tree),
        &["/bin/sleep", "30"],
    );
    w.serve_jobs(&[&job]);

    // Other processes may run sandbox containers on the same engine, so the killer picks the
    // one whose bind mounts come from this world's staging root, never just any sandbox.
    let staging = w.path("staging").to_string_lossy().into_owned();
    let killer = tokio::spawn(async move {
        let executor = support::executor().await;
        let filters = std::collections::HashMap::from([
            (
                "label",
                vec![format!("{}=1", worker_sandbox::LABEL_VERIFIER)],
            ),
            ("status", vec!["running".to_string()]),
        ]);
        for _ in 0..600 {
            let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
                .filters(&filters)
                .build();
            let running = executor.client().list_containers(Some(options)).await;
            let ours = running.unwrap().into_iter().find(|c| {
                c.mounts.iter().flatten().any(|m| {
                    m.source
                        .as_deref()
                        .is_some_and(|source| source.starts_with(&staging))
                })
            });
            if let Some(id) = ours.and_then(|c| c.id) {
                let status = Command::new("docker")
                    .args(["kill", "--signal", "KILL", &id])
                    .stdout(std::process::Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success(), "docker kill failed");
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("the feed's container never ran");
    });
    let first = w.feed("out1", &[]).await;
    killer.await.unwrap();
    first.assert_code(3);
    assert_eq!(first.row(&job)["status"], "no_verdict");
    assert_eq!(first.row(&job)["reason_code"], "externally_stopped");
    assert_eq!(first.row(&job)["candidate_file"], Value::Null);
    assert!(signable_candidates(&w.path("out1")).is_empty());
    let cached: Vec<_> = std::fs::read_dir(w.path("cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        cached.is_empty(),
        "an externally killed run was cached: {cached:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_digest_mismatch_is_no_verdict_retried_and_does_not_block_the_valid_job() {
    let w = World::new().await;
    // The archive holds the failing tree, the job commits to the passing tree's digest.
    let (good, mismatched) =
        w.valid_and_bad_jobs(|top| codeload_dir(top, "", &example("source-fail")));
    w.serve_jobs(&[&good, &mismatched]);

    let first = w.feed("out1", &[]).await;
    first.assert_code(3);
    assert_eq!(first.row(&mismatched)["status"], "no_verdict");
    assert_eq!(first.row(&mismatched)["reason_code"], "input_mismatch");
    assert_eq!(first.row(&mismatched)["candidate_file"], Value::Null);
    let candidates = w.assert_only_the_valid_job_ran(&first, &good, "out1");

    let second = w.feed("out2", &[]).await;
    second.assert_code(3);
    assert_eq!(second.row(&good)["reused_from_cache"], true);
    assert_eq!(w.evidence_files().len(), 1, "the cached job ran again");
    assert_eq!(second.row(&mismatched)["status"], "no_verdict");
    assert_eq!(second.row(&mismatched)["reason_code"], "input_mismatch");
    assert_eq!(second.row(&mismatched)["reused_from_cache"], false);
    // Retried means fetched again, not answered from a cached no-verdict.
    assert_eq!(
        w.server
            .hits(&format!("/solver-org/sol-2/tar.gz/{}", commit(2))),
        2
    );
    assert_eq!(signable_candidates(&w.path("out2")), candidates);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_traversal_archive_is_rejected_and_the_valid_job_still_runs() {
    let w = World::new().await;
    let marker = b"feed-cli traversal payload";
    let (good, evil) = w.valid_and_bad_jobs(|top| {
        tar_gz(&[
            dir(&format!("{top}/")),
            file(&format!("{top}/result.txt"), b"expected-output\n"),
            file(&format!("{top}/../../escaped.txt"), marker),
        ])
    });
    w.serve_jobs(&[&evil, &good]);

    let run = w.feed("out", &[]).await;
    run.assert_code(0);
    assert_eq!(run.row(&evil)["status"], "rejected");
    assert_eq!(run.row(&evil)["reason_code"], "archive_rejected");
    assert!(
        run.row(&evil)["reason"]
            .as_str()
            .unwrap()
            .starts_with("source archive"),
        "{}",
        run.row(&evil)
    );
    assert_eq!(run.row(&evil)["candidate_file"], Value::Null);
    w.assert_only_the_valid_job_ran(&run, &good, "out");
    // Nothing landed outside the extraction folder, anywhere in this test's tree.
    let leaked: Vec<_> = read_tree(w.tmp.path())
        .into_iter()
        .filter(|(_, data)| data == marker)
        .collect();
    assert!(leaked.is_empty(), "traversal wrote {leaked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_engine_exits_runtime_unavailable() {
    let w = World::new().await;
    let job = w.example_job(1, "source-pass");
    w.serve_jobs(&[&job]);

    let run = w
        .feed("out", &[("DOCKER_HOST", "unix:///nonexistent.sock")])
        .await;
    run.assert_code(5);
    assert!(
        run.stderr.contains("worker: error:"),
        "stderr: {}",
        run.stderr
    );
    assert!(!w.path("out").join(candidate_file_name(&id(&job))).exists());
    assert!(w.evidence_files().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_staging_root_is_a_configuration_error_not_a_retry() {
    let w = World::new().await;
    let job = w.example_job(1, "source-pass");
    w.serve_jobs(&[&job]);
    let not_a_dir = w.path("staging-file");
    std::fs::write(&not_a_dir, b"a file where the staging root should be").unwrap();

    let run = w.feed_staged("out", &[], &not_a_dir).await;
    // 3 would tell the scheduled workflow "retry next time" and pass it, forever.
    run.assert_code(78);
    assert!(
        run.stderr.contains("staging root"),
        "stderr: {}",
        run.stderr
    );
    assert_eq!(
        w.server.hits(&feed_path(VERIFIER)),
        0,
        "ran with a broken store"
    );
}

/// Most resident memory `worker feed` may use on a hostile feed.
const FEED_RSS_BOUND: u64 = 128 << 20;

/// What a memory-watched `worker feed` run ended with.
struct Watched {
    outcome: Outcome,
    peak_rss: u64,
}

/// Runs `worker feed --json` against `api` under GNU time, watching its resident memory: the
/// worker is SIGKILLed (and the test fails) as soon as it crosses [`FEED_RSS_BOUND`] or runs
/// for a minute, so an unbounded run cannot take the machine down. The peak is the kernel's
/// `ru_maxrss` of the worker as GNU time reports it.
fn feed_watched(api: &str, tmp: &Path) -> Watched {
    use std::io::Read as _;
    use std::process::Stdio;
    for d in ["work", "staging"] {
        std::fs::create_dir_all(tmp.join(d)).unwrap();
    }
    let rss_file = tmp.join("maxrss");
    let mut time = Command::new("/usr/bin/time");
    time.args(["-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(env!("CARGO_BIN_EXE_worker"));
    let mut child = feed_args(
        &mut time,
        api,
        &tmp.join("out"),
        &tmp.join("work"),
        &tmp.join("staging"),
    )
    .arg("--json")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("GNU time at /usr/bin/time measures the worker's peak memory");
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let time_pid = child.id();
    let started = std::time::Instant::now();
    let mut killed = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let worker_pid =
            std::fs::read_to_string(format!("/proc/{time_pid}/task/{time_pid}/children"))
                .ok()
                .and_then(|s| s.split_whitespace().next().map(str::to_owned));
        if let Some(pid) = worker_pid {
            let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmRSS:"))
                        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                })
                .unwrap_or(0)
                * 1024;
            let too_long = started.elapsed() > std::time::Duration::from_secs(60);
            if killed.is_none() && (rss > FEED_RSS_BOUND || too_long) {
                killed = Some(format!(
                    "resident {} MiB after {:?}",
                    rss >> 20,
                    started.elapsed()
                ));
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let stderr = String::from_utf8_lossy(&stderr.join().unwrap()).into_owned();
    let stdout = stdout.join().unwrap();
    let measured = std::fs::read_to_string(&rss_file).unwrap();
    let peak_rss = measured
        .lines()
        .last()
        .and_then(|l| l.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("GNU time wrote {measured:?}"))
        * 1024;
    if let Some(why) = killed {
        panic!(
            "worker feed was killed over the {} MiB bound: {why}; peak {} MiB\nstderr: {}",
            FEED_RSS_BOUND >> 20,
            peak_rss >> 20,
            stderr.chars().take(2000).collect::<String>()
        );
    }
    Watched {
        outcome: Outcome {
            code: status.code(),
            report: serde_json::from_slice(&stdout).unwrap_or(Value::Null),
            stderr,
        },
        peak_rss,
    }
}

/// [`feed_watched`] of a feed serving `body`, in a fresh temporary folder.
async fn feed_watched_serving(body: Vec<u8>) -> Watched {
    let server = TestServer::start().await;
    server.route(&feed_path(VERIFIER), Reply::ok(body));
    let tmp = tempfile::tempdir().unwrap();
    let api = server.base.clone();
    let dir = tmp.path().to_path_buf();
    tokio::task::spawn_blocking(move || feed_watched(&api, &dir))
        .await
        .unwrap()
}

/// Serves `body` as the feed, runs `worker feed` under the memory watch and checks the whole
/// feed was refused for its entry count, in bounded memory.
async fn assert_oversized_feed_refused(body: Vec<u8>) {
    assert!(
        body.len() as u64 <= 16 << 20,
        "within the client's byte cap"
    );
    let run = feed_watched_serving(body).await;
    eprintln!(
        "peak rss {} MiB; exit {:?}; stderr:\n{}",
        run.peak_rss >> 20,
        run.outcome.code,
        run.outcome.stderr
    );
    assert!(
        run.peak_rss <= FEED_RSS_BOUND,
        "peak {} MiB",
        run.peak_rss >> 20
    );
    // The feed breaks its contract: invalid input, nothing run, nothing listed.
    run.outcome.assert_code(4);
    let failure = &run.outcome.report["fetch_failures"][0];
    assert_eq!(failure["kind"], "too_many_jobs", "{}", run.outcome.report);
    assert!(
        failure["message"].as_str().unwrap().contains("10000"),
        "{failure}"
    );
    assert_eq!(run.outcome.report["jobs"], json!([]));
    assert!(
        run.outcome.stderr.contains("too_many_jobs"),
        "{}",
        run.outcome.stderr
    );
}

/// A JSON array of `item` repeated to just under 16 MiB.
fn feed_of(item: &str) -> Vec<u8> {
    let count = ((16 << 20) - 2) / (item.len() + 1);
    let mut body = Vec::with_capacity(16 << 20);
    body.push(b'[');
    for i in 0..count {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item.as_bytes());
    }
    body.push(b']');
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mib_feed_of_empty_objects_is_refused_in_bounded_memory() {
    assert_oversized_feed_refused(feed_of("{}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mib_feed_of_zeros_is_refused_in_bounded_memory() {
    assert_oversized_feed_refused(feed_of("0")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_of_ten_thousand_nameless_entries_is_reported_as_five_rows_and_a_count() {
    let body = format!("[{}]", vec!["{}"; 10_000].join(","));
    let run = feed_watched_serving(body.into_bytes()).await;
    let out = &run.outcome;
    eprintln!(
        "peak rss {} MiB; stderr:\n{}",
        run.peak_rss >> 20,
        out.stderr
    );
    // Every entry is rejected (no job id); a rejected job does not fail the scheduled run.
    out.assert_code(0);
    let rows = out.report["jobs"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "{}", out.report);
    assert!(rows.iter().all(|r| r["reason_code"] == "missing_job_id"));
    assert_eq!(
        out.report["omitted_jobs"],
        json!([{"status": "rejected", "reason_code": "missing_job_id", "count": 9995}])
    );
    assert!(
        out.stderr.contains("10000 job(s)") && out.stderr.contains("10000 rejected"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("9995 more rejected: missing_job_id"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.lines().count() < 20, "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_download_leaves_a_scratch_dir_that_the_next_run_removes() {
    let w = World::new().await;
    let job = w.example_job(1, "source-pass");
    // The source download never completes.
    w.server.route(
        &format!("/solver-org/sol-1/tar.gz/{}", commit(1)),
        Reply {
            stall: true,
            ..Reply::ok(Vec::new())
        },
    );
    w.serve_jobs(&[&job]);
    let mut cmd = w.command("out1", &w.path("staging"));
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let work = w.path("work");
    let started = std::time::Instant::now();
    let scratch = loop {
        let found = std::fs::read_dir(&work)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.join("job-0/source.tar.gz").exists());
        if let Some(dir) = found {
            break dir;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the worker never started the download"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(scratch.exists(), "SIGKILL leaves the scratch dir behind");

    w.serve_jobs(&[]);
    let run = w.feed("out2", &[]).await;
    run.assert_code(0);
    assert!(
        !scratch.exists(),
        "the killed worker's scratch dir {scratch:?} survived the next run"
    );
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

/// `job` as the platform serves its other verification mode to every verifier: an on-chain
/// verifier module decides it, no quorum signs it. `listed` is what its verifier fields say
/// (the platform's module jobs name no quorum; one listing ours must not make it ours).
fn deterministic_module_job(job: &Value, round: u64, listed: &[&str]) -> Value {
    let mut job = job.clone();
    job["job_id"] = json!(format!("base-mainnet:0xmodule:{round}"));
    job["verification_mode"] = json!("deterministic_module");
    job["verifier_module"] = json!("0x3333333333333333333333333333333333333333");
    job["eligible_verifiers"] = json!(listed);
    job["threshold"] = json!(listed.len());
    job
}

/// #41 item 4: since the key-rotation change a `deterministic_module` job (valid, the
/// platform's other mode, not ours) was `rejected` / `invalid_job` ("verification_mode must be
/// signed_quorum"); the runner judge counted it, and a batch of two or more of them read as
/// every job failing the same way. It is skipped, with its own reason, before validation;
/// the signed-quorum job beside it still runs in the real sandbox, and the runner's judge
/// (.github/scripts/runner-judge.sh) keeps the batch green.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_skips_a_deterministic_module_job_instead_of_rejecting_it() {
    let w = World::new().await;
    let ours = w.example_job(1, "source-pass");
    let modules = [
        deterministic_module_job(&ours, 2, &[]),
        deterministic_module_job(&ours, 3, &[VERIFIER]),
    ];
    w.serve_jobs(&[&ours, &modules[0], &modules[1]]);

    let run = w.feed("out", &[]).await;
    run.assert_code(0);
    assert_eq!(run.row(&ours)["status"], "completed_passed");
    for module in &modules {
        let row = run.row(module);
        assert_eq!(row["status"], "skipped", "{row}");
        assert_eq!(row["reason_code"], "other_verification_mode", "{row}");
        assert!(
            row["reason"]
                .as_str()
                .unwrap()
                .contains("deterministic_module"),
            "{row}"
        );
    }
    assert_eq!(run.report["executed"], 1);

    // A batch of nothing but module jobs: nothing runs, nothing failed, the judge is green.
    w.serve_jobs(&[&modules[0], &modules[1]]);
    let only = w.feed("out-only", &[]).await;
    only.assert_code(0);
    assert_eq!(only.report["executed"], 0);
    let report = w.path("only-report.json");
    std::fs::write(&report, serde_json::to_vec(&only.report).unwrap()).unwrap();
    let summary = w.path("summary.md");
    let judge = Command::new("bash")
        .arg(support::workspace_root().join(".github/scripts/runner-judge.sh"))
        .arg("0")
        .arg(&report)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&judge.stdout).into_owned()
        + &String::from_utf8_lossy(&judge.stderr);
    assert!(judge.status.success(), "the runner judge failed:\n{said}");
    assert!(!said.contains("::error::"), "{said}");
    assert!(!said.contains("::warning::"), "{said}");
}

/// #41 item 4, `worker reproduce --job-id`: a `deterministic_module` job read from the feed
/// was "the job is invalid: verification_mode must be signed_quorum". It is named for what it
/// is, the platform's other mode with nothing of ours to reproduce, and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reproduce_names_a_deterministic_module_job_instead_of_calling_it_invalid() {
    let w = World::new().await;
    let ours = w.example_job(1, "source-pass");
    let module = deterministic_module_job(&ours, 2, &[]);
    w.serve_jobs(&[&ours, &module]);
    let mut reproduce = Command::new(env!("CARGO_BIN_EXE_worker"));
    reproduce
        .args(["reproduce", "--api", &w.server.base, "--verifier", VERIFIER])
        .args(["--job-id", &id(&module), "--archive-base", &w.server.base]);
    let out = with_folders(
        &mut reproduce,
        &w.path("reproduced"),
        &w.path("work"),
        &w.path("staging"),
    )
    .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("other verification mode") && stderr.contains("deterministic_module"),
        "{stderr}"
    );
    assert!(!stderr.contains("must be signed_quorum"), "{stderr}");
    assert!(w.evidence_files().is_empty(), "something ran");
}
