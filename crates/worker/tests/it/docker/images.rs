//! Many images on one host (issue 29 item 3), on the real daemon and the local registry:
//! `worker serve --pull` pulls each image once by digest ahead of its jobs and records it in
//! its pull ledger (STATE/images.json) with the pull's own time; under `--image-budget` it
//! removes an image no listed job needs and never one a listed job needs or one it did not
//! pull; too little free space holds the job back (no attempt counted) instead of losing it;
//! `worker gc --images` applies the same rules from the same ledger.
//!
//! Each test builds its own images (busybox plus a unique label, pushed to 127.0.0.1:5000)
//! and removes them from the engine first, so only the worker's pull brings them back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::example_feed::{ExampleFeed, example};
use crate::feed_support::*;

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

fn unique() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{}-{now}", std::process::id())
}

/// A fresh digest-pinned image in the local registry, absent from the engine.
fn registry_only_image(name: &str) -> String {
    let image =
        crate::support::derived_image(name, &format!("LABEL dev.agent-bounties.test=\"{name}\""));
    let removed = Command::new("docker")
        .args(["image", "rm", "-f"])
        .arg(&image)
        .arg(format!("127.0.0.1:5000/verifier-sandbox-{name}:test"))
        .output()
        .unwrap();
    assert!(removed.status.success(), "{removed:?}");
    assert!(!present(&image), "{image} still present");
    image
}

fn present(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", image])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Removes `image` with every name it has (its tag too: removing the digest reference alone
/// leaves a tagged image behind).
fn remove(image: &str) {
    let id = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&id.stdout).trim().to_owned();
    if !id.is_empty() {
        let _ = Command::new("docker")
            .args(["image", "rm", "-f", &id])
            .output();
    }
}

/// The passing example job, under `id`, in `image`.
fn job(feed: &mut ExampleFeed, round: u64, id: &str, image: &str) -> Value {
    // The manifest is inside the hashed terms, so the image is set before the job is built.
    let busybox = std::mem::replace(&mut feed.image, image.to_owned());
    let tree = example("source-pass");
    let archive = codeload_dir(
        &format!("sol-{round}-{}", crate::example_feed::commit(round)),
        "",
        &tree,
    );
    let mut job = feed.job_running(
        round,
        archive,
        dir_digest(&tree),
        &[
            "/bin/cmp",
            "/benchmark/expected.txt",
            "/workspace/result.txt",
        ],
    );
    feed.image = busybox;
    job["job_id"] = json!(id);
    job
}

fn serve(feed: &ExampleFeed, extra: &[&str]) -> Child {
    feed.serve_command(extra).spawn().unwrap()
}

fn drain(child: &mut Child) -> std::thread::JoinHandle<String> {
    let mut stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    })
}

fn stop(child: &mut Child) -> Option<i32> {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > give_up {
            let _ = child.kill();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ledger(state: &Path) -> Value {
    let out = Command::new(WORKER)
        .args(["ledger", "--json", "--state"])
        .arg(state)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn status(ledger: &Value, id: &str) -> String {
    ledger["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == id)
        .map(|j| j["status"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn pulls(state: &Path) -> Value {
    std::fs::read(state.join("images.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// Waits (generously; every condition is awaited, none assumed) until `done`.
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(180);
    while !done() {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_pulls_each_image_once_by_digest_holds_a_tiny_budget_to_one_image_and_keeps_a_listed_jobs_image()
 {
    let mut feed = ExampleFeed::new(&["work", "staging", "state", "out"]).await;
    let u = unique();
    let a = registry_only_image(&format!("img-a-{u}"));
    let b = registry_only_image(&format!("img-b-{u}"));
    // The operator's own image: never pulled by the worker, so never removed by it.
    let foreign = crate::support::derived_image(&format!("img-f-{u}"), "LABEL foreign=1");
    let jobs = [
        job(&mut feed, 1, "a1", &a),
        job(&mut feed, 2, "a2", &a),
        job(&mut feed, 3, "b1", &b),
    ];
    feed.serve_jobs(&jobs.iter().collect::<Vec<_>>());
    let state = feed.path("state");
    // A budget of one byte: everything the worker pulled is over it at once.
    let mut child = serve(
        &feed,
        &[
            "--pull",
            "--image-budget",
            "1B",
            "--image-keep-recent",
            "0s",
        ],
    );
    let log = drain(&mut child);
    wait_for("the three jobs to complete", || {
        state.join("ledger.sqlite3").exists() && {
            let l = ledger(&state);
            ["a1", "a2", "b1"]
                .iter()
                .all(|id| status(&l, id) == "completed")
        }
    })
    .await;
    // A budget of one byte holds one image at a time (one larger than the budget runs
    // alone): a ran first; b waited and then took its room, a's jobs being done.
    assert!(
        present(&b) && !present(&a),
        "both images on disk under a 1-byte budget"
    );
    let record = pulls(&state);
    assert!(
        record["pulled"][b.as_str()]["pull_ms"].is_u64(),
        "{b} not recorded with its pull time: {record:#}"
    );
    assert!(
        record["pulled"]
            .as_object()
            .unwrap()
            .keys()
            .all(|r| r.contains("@sha256:")),
        "only digests are pulled: {record:#}"
    );
    // The feed lists only b's job: over budget, but a listed job needs b, so it stays.
    feed.serve_jobs(&[&jobs[2]]);
    let polls = ledger(&state)["heartbeat"]["polls"]["ok"]
        .as_i64()
        .unwrap_or(0);
    wait_for("two more polls", || {
        ledger(&state)["heartbeat"]["polls"]["ok"]
            .as_i64()
            .unwrap_or(0)
            >= polls + 2
    })
    .await;
    assert!(present(&b), "an image a listed job needs was removed");
    assert!(
        present(&foreign),
        "an image the worker did not pull was removed"
    );
    assert_eq!(stop(&mut child), Some(0));
    let stderr = log.join().unwrap();
    let pulled_lines = stderr
        .lines()
        .filter(|l| l.contains("pulled by digest ahead of its jobs"))
        .count();
    assert_eq!(
        pulled_lines, 2,
        "one pull per image, not per job:\n{stderr}"
    );
    let record = pulls(&state);
    assert!(record["pulled"].get(&a).is_none(), "{record:#}");
    for image in [&a, &b, &foreign] {
        remove(image);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_a_pull_with_too_little_free_space_holds_the_job_back_and_it_runs_later() {
    let mut feed = ExampleFeed::new(&["work", "staging", "state", "out"]).await;
    let u = unique();
    let a = registry_only_image(&format!("img-space-{u}"));
    let j = job(&mut feed, 1, "space1", &a);
    feed.serve_jobs(&[&j]);
    let state = feed.path("state");
    // More free space than any disk has.
    let mut child = serve(&feed, &["--pull", "--image-min-free", "1000000TiB"]);
    let log = drain(&mut child);
    // Three answered polls: the job was due at each and held back at each.
    wait_for("three polls", || {
        state.join("ledger.sqlite3").exists()
            && ledger(&state)["heartbeat"]["polls"]["ok"].as_i64() >= Some(3)
    })
    .await;
    assert_eq!(stop(&mut child), Some(0));
    let stderr = log.join().unwrap();
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("below the") && l.contains("--image-min-free")),
        "no free-space refusal said:\n{stderr}"
    );
    assert!(!present(&a), "pulled despite too little free space");
    let l = ledger(&state);
    assert!(
        l["runs"].as_array().unwrap().is_empty(),
        "a held-back job was started (an attempt counted): {l:#}"
    );
    assert_ne!(status(&l, "space1"), "completed");
    // With the reserve met, the same job runs: it was not lost.
    let mut child = serve(&feed, &["--pull"]);
    let log = drain(&mut child);
    wait_for("the held-back job to complete", || {
        status(&ledger(&state), "space1") == "completed"
    })
    .await;
    assert_eq!(stop(&mut child), Some(0));
    drop(log);
    remove(&a);
}

/// `worker gc --images` from serve's pull ledger: the needed image stays whatever the budget,
/// the operator's own image stays, a dry run removes nothing, and only the unneeded pulled
/// image goes. (`--gc-foreign-images` is exercised on the policy's fake engine only: on a
/// shared daemon it would remove every image no listed job needs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_images_never_removes_a_needed_or_foreign_image_and_a_dry_run_removes_nothing() {
    let u = unique();
    let needed = crate::support::derived_image(&format!("gc-needed-{u}"), "LABEL n=1");
    let unneeded = crate::support::derived_image(&format!("gc-unneeded-{u}"), "LABEL n=2");
    let foreign = crate::support::derived_image(&format!("gc-foreign-{u}"), "LABEL n=3");
    let state = tempfile::tempdir().unwrap();
    let pulled = |image: &str| {
        json!({"id": "sha256:recorded", "size_bytes": 1, "pulled_at_ms": 0, "pull_ms": 1, "last_used_ms": 0})
            .as_object()
            .map(|o| (image.to_owned(), Value::Object(o.clone())))
            .unwrap()
    };
    let record = json!({
        "version": 1,
        "pulled": serde_json::Map::from_iter([pulled(&needed), pulled(&unneeded)]),
        "needed": [needed],
    });
    std::fs::write(state.path().join("images.json"), record.to_string()).unwrap();
    let gc = |extra: &[&str]| {
        let out = Command::new(WORKER)
            .args([
                "gc",
                "--images",
                "--image-budget",
                "1B",
                "--image-keep-recent",
                "0s",
                "--json",
                "--state",
            ])
            .arg(state.path())
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let dry = gc(&["--dry-run"]);
    assert_eq!(dry["schema_version"], "agent-bounties/worker-gc-images-v1");
    let refs = |report: &Value| -> Vec<String> {
        report["removed"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|e| {
                e["references"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r.as_str().unwrap().to_owned())
            })
            .collect()
    };
    assert_eq!(refs(&dry), std::slice::from_ref(&unneeded), "{dry:#}");
    assert!(present(&unneeded), "a dry run removed an image");
    let done = gc(&[]);
    assert_eq!(refs(&done), std::slice::from_ref(&unneeded), "{done:#}");
    assert!(!present(&unneeded));
    assert!(present(&needed), "an image a queued job needs was removed");
    assert!(
        present(&foreign),
        "an image the worker did not pull was removed"
    );
    let after: Value =
        serde_json::from_slice(&std::fs::read(state.path().join("images.json")).unwrap()).unwrap();
    assert!(after["pulled"].get(&unneeded).is_none(), "{after:#}");
    for image in [&needed, &unneeded, &foreign] {
        remove(image);
    }
}
