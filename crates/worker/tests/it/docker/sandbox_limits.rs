//! Adversarial programs against every limit of the sandbox, each with its exact outcome.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use crate::support;

use std::time::Duration;

use crate::support::{Trees, no_verdict_reason, run, spec};
use verifier_sdk::evidence::RequestFacts;
use worker_sandbox::{Decision, NoVerdictReason, RunReport, StoppedBy};

/// The output cap of the output-limit tests.
const OUTPUT_CAP: u64 = 256 * 1024;

/// Runs `argv` as `name` with the request's limits changed by `limit`.
async fn run_with(
    trees: &Trees,
    name: &str,
    argv: &[&str],
    limit: impl FnOnce(&mut RequestFacts),
) -> RunReport {
    let mut spec = spec(name, argv, trees);
    limit(&mut spec.request);
    run(&spec, trees).await
}

fn run_ms(report: &worker_sandbox::RunReport) -> u64 {
    let t = &report.evidence.timestamps;
    t.finish_ms.unwrap() - t.start_ms.unwrap()
}

#[tokio::test]
async fn fork_loop_hits_the_pids_limit_and_ends_as_the_programs_own_failure() {
    let trees = Trees::new();
    let script = trees.script(
        "forks.sh",
        "n=0; while [ $n -lt 500 ]; do /bin/sleep 30 & n=$((n+1)); echo $n; done",
    );
    let report = run_with(&trees, "forkloop", &[&script], |r| r.pids_limit = 32).await;
    // ash exits 2 on "can't fork": the program's own failure, not a kill by us.
    assert_eq!(report.decision, Decision::Completed { exit_code: 2 });
    assert!(
        report.evidence.stderr.tail.contains("can't fork"),
        "{:?}",
        report.evidence.stderr
    );
    let started: u64 = report
        .evidence
        .stdout
        .tail
        .lines()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    // init + shell + sleeps never exceed the limit.
    assert!(
        started + 2 <= 32,
        "{started} processes started under pids_limit 32"
    );
    assert!(
        started >= 20,
        "only {started} started; the limit was not what stopped it"
    );
}

/// The bomb must not race the script's own process for the pids table: with `b; sleep 60` the
/// script's shell forked up to three times after the bomb began (ash forks each element of the
/// background pipeline `b | b &` itself, then `sleep`), and on a busy machine the bomb's first
/// element sometimes filled the table before the shell's next fork, so the shell's "can't fork"
/// exit 2 (the program's own failure, a correct verdict) ended the run instead of the timeout.
/// Here the shell forks once, while init and itself are all there is (`b &` is one subshell),
/// and then `exec`s its wait, so the run ends at the timeout whichever fork of the bomb wins.
#[tokio::test]
async fn classic_fork_bomb_is_contained_and_ends_at_the_timeout() {
    let trees = Trees::new();
    let script = trees.script("bomb.sh", "b() { b | b & }; b & exec /bin/sleep 60");
    // `run` asserts the container and everything in it are gone.
    let report = run_with(&trees, "forkbomb", &[&script], |r| {
        r.pids_limit = 32;
        r.timeout_ms = 3_000;
    })
    .await;
    eprintln!(
        "decision {:?}, observed {:?}, stderr tail {:?}, stdout tail {:?}",
        report.decision, report.observed, report.evidence.stderr.tail, report.evidence.stdout.tail
    );
    assert_eq!(
        no_verdict_reason(&report.decision),
        NoVerdictReason::Timeout
    );
    assert_eq!(report.evidence.exit.stopped_by, StoppedBy::Timeout);
    assert!(run_ms(&report) < 15_000, "kill took {} ms", run_ms(&report));
    // Contained: never more processes than the limit (the kernel's own high-water mark, where
    // it keeps one).
    if let Some(peak) = report.observed.pids_peak {
        assert!(peak <= 32, "{peak} processes under pids_limit 32");
    }
}

#[tokio::test]
async fn memory_hog_is_oom_with_no_verdict() {
    let trees = Trees::new();
    let script = trees.script(
        "hog.sh",
        "head -c 400000000 /dev/zero | tail -c 400000000 > /dev/null; echo survived",
    );
    let report = run_with(&trees, "hog", &[&script], |r| r.memory_bytes = 64 << 20).await;
    assert_eq!(no_verdict_reason(&report.decision), NoVerdictReason::Oom);
    assert!(report.evidence.exit.oom_killed);
    assert_eq!(report.evidence.exit.stopped_by, StoppedBy::None);
}

#[tokio::test]
async fn endless_stdout_is_killed_at_the_output_cap() {
    let trees = Trees::new();
    let report = run_with(&trees, "yes", &["/bin/yes"], |r| {
        r.max_output_bytes = OUTPUT_CAP
    })
    .await;
    assert_eq!(
        no_verdict_reason(&report.decision),
        NoVerdictReason::OutputLimit
    );
    let ev = &report.evidence;
    assert_eq!(ev.exit.stopped_by, StoppedBy::OutputLimit);
    assert!(ev.stdout.bytes > OUTPUT_CAP);
    // Capture stops right after the cap; the tail stays bounded.
    assert!(
        ev.stdout.bytes < OUTPUT_CAP + 1024 * 1024,
        "{}",
        ev.stdout.bytes
    );
    assert!(ev.stdout.tail.len() <= 32 * 1024 && ev.stdout.tail_truncated);
    assert!(run_ms(&report) < 10_000, "kill took {} ms", run_ms(&report));
}

#[tokio::test]
async fn cap_is_on_combined_stdout_and_stderr() {
    let trees = Trees::new();
    // 150 KiB on each stream: under a 256 KiB cap alone, over it together.
    let script = trees.script(
        "both.sh",
        "head -c 153600 /dev/zero; head -c 153600 /dev/zero >&2; sleep 30",
    );
    let report = run_with(&trees, "combined", &[&script], |r| {
        r.max_output_bytes = OUTPUT_CAP
    })
    .await;
    assert_eq!(
        no_verdict_reason(&report.decision),
        NoVerdictReason::OutputLimit
    );
    assert!(report.evidence.stderr.bytes > 0 && report.evidence.stdout.bytes > 0);

    // Just under the cap, the same program completes.
    let under = trees.script(
        "under.sh",
        "head -c 100000 /dev/zero; head -c 100000 /dev/zero >&2",
    );
    let report = run_with(&trees, "combined-under", &[&under], |r| {
        r.max_output_bytes = OUTPUT_CAP
    })
    .await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(report.evidence.stdout.bytes, 100_000);
    assert_eq!(report.evidence.stderr.bytes, 100_000);
}

#[tokio::test]
async fn sleep_past_the_timeout_is_killed_and_removed() {
    let trees = Trees::new();
    let report = run_with(&trees, "sleep", &["/bin/sleep", "300"], |r| {
        r.timeout_ms = 2_000
    })
    .await;
    assert_eq!(
        no_verdict_reason(&report.decision),
        NoVerdictReason::Timeout
    );
    let ev = &report.evidence;
    assert_eq!(ev.exit.stopped_by, StoppedBy::Timeout);
    assert_eq!(ev.exit.exit_code, Some(137));
    assert!(ev.exit.started && ev.exit.removed);
    let elapsed = run_ms(&report);
    assert!((2_000..10_000).contains(&elapsed), "ran {elapsed} ms");
}

#[tokio::test]
async fn finishing_inside_the_timeout_is_a_verdict() {
    let trees = Trees::new();
    let report = run_with(&trees, "quick", &["/bin/sleep", "1"], |r| {
        r.timeout_ms = 4_000
    })
    .await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
}

/// Runs, waits and output streams longer than the engine client's per-request timeout (here
/// 1 s) must neither be cut short nor lose their deadline.
#[tokio::test]
async fn runs_longer_than_the_client_request_timeout_keep_their_deadline() {
    let trees = Trees::new();
    let executor = support::executor()
        .await
        .with_request_timeout(Duration::from_secs(1));
    let script = trees.script("long.sh", "sleep 3; echo done");
    let hooks = support::DigestHooks::new(&trees);
    let report = executor
        .run(&spec("long-wait", &[&script], &trees), &hooks)
        .await
        .unwrap();
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(report.evidence.stdout.tail, "done\n");
    // A 3 s run spans many readings of its cgroup (or several engine stats samples where the
    // host cannot read the cgroup), so resource use is recorded.
    let resources = &report.evidence.resources;
    assert!(
        resources.peak_memory_bytes.is_some_and(|b| b > 0),
        "{resources:?}"
    );
    assert!(
        resources.cpu_time_ns.is_some_and(|ns| ns > 0),
        "{resources:?}"
    );

    let mut spec = spec("long-timeout", &["/bin/sleep", "120"], &trees);
    spec.request.timeout_ms = 3_000;
    let report = executor.run(&spec, &hooks).await.unwrap();
    assert_eq!(
        no_verdict_reason(&report.decision),
        NoVerdictReason::Timeout
    );
    assert!(run_ms(&report) < 10_000, "ran {} ms", run_ms(&report));
}

#[tokio::test]
async fn two_busy_loops_get_no_more_than_the_cpu_quota() {
    let trees = Trees::new();
    // Under runc the container reads its own cgroup. Under runsc there is none inside (the
    // Sentry's CPU accounting is its own), so the host's cgroup of the whole sandbox is read
    // from outside, through the container's main pid, while the loops run.
    let inside = !support::under_runsc();
    let script = trees.script(
        "cpu.sh",
        if inside {
            r#"(while :; do :; done) &
(while :; do :; done) &
a=$(cat /sys/fs/cgroup/cpuacct/cpuacct.usage)
sleep 2
b=$(cat /sys/fs/cgroup/cpuacct/cpuacct.usage)
echo $(( (b - a) / 1000000 ))"#
        } else {
            r#"(while :; do :; done) &
(while :; do :; done) &
echo started
sleep 6"#
        },
    );
    let mut spec = spec("cpu", &[&script], &trees);
    spec.request.cpu_millis = 250;
    let run_id = spec.run_id.clone();
    let outside =
        (!inside).then(|| std::thread::spawn(move || host_cpu_ms_over_two_seconds(&run_id)));
    let report = run(&spec, &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    let used_ms: u64 = match outside {
        None => report.evidence.stdout.tail.trim().parse().unwrap(),
        Some(thread) => thread.join().unwrap(),
    };
    // A quarter core over 2 s is 500 ms; unthrottled, two loops would take far more.
    assert!(
        used_ms <= 700,
        "used {used_ms} ms of CPU in 2 s at 250 millicores"
    );
    assert!(
        used_ms >= 200,
        "used only {used_ms} ms; the loops did not run"
    );
}

/// The CPU the running container of `run_id` used in two seconds, read from the host's
/// cgroup v1 `cpuacct.usage` of that container (found by its run-id label once it runs).
fn host_cpu_ms_over_two_seconds(run_id: &str) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let id = loop {
        let out = std::process::Command::new("docker")
            .args(["ps", "-q", "--no-trunc", "--filter"])
            .arg(format!("label={}={run_id}", worker_sandbox::LABEL_RUN_ID))
            .output()
            .unwrap();
        let ids = String::from_utf8(out.stdout).unwrap();
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if let [one] = ids.as_slice() {
            break one.to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no running container of {run_id}: {ids:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let usage = || -> u64 {
        std::fs::read_to_string(format!("/sys/fs/cgroup/cpuacct/docker/{id}/cpuacct.usage"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    // Past the sandbox's start, into the loops.
    std::thread::sleep(Duration::from_secs(1));
    let a = usage();
    std::thread::sleep(Duration::from_secs(2));
    let b = usage();
    (b - a) / 1_000_000
}
