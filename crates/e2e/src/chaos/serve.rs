//! `worker serve` under chaos: the long-running service of a dedicated host, started for a
//! serve lane at its turn in each cycle and stopped (SIGTERM) when the cycle ends, as
//! `systemctl restart` would. A kill fault hits it at a random point (a time after start,
//! its sandbox container running, its first new candidate); it is started again at once,
//! and one that exits by itself is restarted as `Restart=on-failure` does (not after exit
//! 78, `RestartPreventExitStatus=78`: that stop is for good, and an invariant). The driver
//! waits on the service's ledger (`worker ledger --json`) until the lane's jobs are done,
//! snapshots `--out` as `pull-candidates.sh` would, and the signers and the keeper work on
//! the snapshot while the service keeps running.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::check::LedgerJob;
use super::inject::{docker_kill, restart_docker, running_container_of, sigterm};
use super::schedule::{BountyKind, Sig};
use super::trigger::{Trigger, trigger_future};
use crate::{E2eError, io};

/// How long a SIGTERMed service may take to exit (the same bound as for the other steps).
const TERM_GRACE: Duration = Duration::from_secs(40);
/// The pause before a crashed service is started again (the unit's `RestartSec=10`, shorter:
/// the cycle is short).
const RESTART_AFTER: Duration = Duration::from_secs(1);
/// Starts of one service per cycle before the supervisor stops restarting it.
const MAX_STARTS: u32 = 30;

/// What to run.
pub(super) struct ServeSpec {
    /// Log file stem, e.g. `c0-pair-serve`; each start adds `-N`.
    pub label: String,
    /// The `worker` binary.
    pub program: PathBuf,
    /// `serve …`.
    pub args: Vec<String>,
    /// Extra environment (the fake clock).
    pub env: Vec<(&'static str, String)>,
    /// The log directory.
    pub logs: PathBuf,
    /// The service runs at least this long before the cycle's stop reaches it: a kill drawn
    /// for a time after start still lands when the lane's jobs were done before it.
    pub min_run: Duration,
}

/// What the service did in one cycle.
#[derive(Debug, Default)]
pub(super) struct ServeOut {
    /// The kill fault fired.
    pub fired: bool,
    /// Exit of the killed process, when it fired.
    pub killed_code: Option<i32>,
    /// Exits the service made by itself (crashes), in order.
    pub crashes: Vec<Option<i32>>,
    /// Exit after the cycle's final SIGTERM (`None`: killed, or it had stopped already).
    pub stop_code: Option<i32>,
    /// A process that did not exit within its grace after a signal.
    pub hung: Option<String>,
    /// Per outside `docker kill`, whether it hit a running container.
    pub docker_kills_fired: Vec<bool>,
    /// The daemon restart, when asked for: whether it came back.
    pub docker_restart_fired: Option<bool>,
    /// Every pid the service had.
    pub pids: Vec<u32>,
    /// It exited 78 (a configuration a restart cannot fix): systemd leaves it stopped.
    pub stopped_for_good: bool,
}

/// A supervised service; [`Supervised::stop`] ends it.
pub(super) struct Supervised {
    stop: Arc<Notify>,
    task: JoinHandle<Result<ServeOut, E2eError>>,
    not_before: tokio::time::Instant,
    crashes: Arc<std::sync::atomic::AtomicU32>,
    pid: Arc<std::sync::atomic::AtomicU32>,
}

impl Supervised {
    /// Starts the service under supervision.
    pub fn start(
        spec: ServeSpec,
        kill: Option<(Sig, Trigger)>,
        docker_kills: Vec<u64>,
        docker_restart: Option<PathBuf>,
    ) -> Self {
        let stop = Arc::new(Notify::new());
        let not_before = tokio::time::Instant::now() + spec.min_run;
        let crashes = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let pid = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let task = tokio::spawn(supervise(
            spec,
            kill,
            docker_kills,
            docker_restart,
            stop.clone(),
            (crashes.clone(), pid.clone()),
        ));
        Self {
            stop,
            task,
            not_before,
            crashes,
            pid,
        }
    }

    /// Whether the supervisor has ended (the service stopped for good, or too many crashes).
    pub fn ended(&self) -> bool {
        self.task.is_finished()
    }

    /// Exits the service made by itself so far this cycle.
    pub fn crashes(&self) -> u32 {
        self.crashes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The pid of the service's current process (0 before the first start).
    pub fn pid(&self) -> u32 {
        self.pid.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// SIGTERMs the service and waits for it and the supervisor to end.
    pub async fn stop(self) -> Result<ServeOut, E2eError> {
        tokio::time::sleep_until(self.not_before).await;
        self.stop.notify_one();
        self.task.await.map_err(|e| E2eError::Setup {
            what: "supervise worker serve",
            detail: e.to_string(),
        })?
    }
}

fn spawn(spec: &ServeSpec, n: u32) -> Result<tokio::process::Child, E2eError> {
    let out_path = spec.logs.join(format!("{}-{n}.stdout", spec.label));
    let err_path = spec.logs.join(format!("{}-{n}.stderr", spec.label));
    let stdout = std::fs::File::create(&out_path).map_err(io("create a log", &out_path))?;
    let stderr = std::fs::File::create(&err_path).map_err(io("create a log", &err_path))?;
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .envs(crate::logscan::JSON_LOG_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    cmd.spawn().map_err(io("start worker serve", &spec.program))
}

/// Waits up to `grace` for `child`; kills it (and reports the hang) when it does not exit.
async fn reap(
    child: &mut tokio::process::Child,
    grace: Duration,
    what: String,
    hung: &mut Option<String>,
) -> Option<i32> {
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(r) => r.ok().and_then(|s| s.code()),
        Err(_) => {
            hung.get_or_insert(format!(
                "{what} did not exit within {grace:?} of its signal"
            ));
            let _ = child.start_kill();
            let _ = child.wait().await;
            None
        }
    }
}

// One function on purpose: start, the race of exit, fault and stop, and the restart read as
// the one loop systemd runs.
#[allow(clippy::too_many_lines)]
async fn supervise(
    spec: ServeSpec,
    mut kill: Option<(Sig, Trigger)>,
    docker_kills: Vec<u64>,
    docker_restart: Option<PathBuf>,
    stop: Arc<Notify>,
    (crashes, current): (
        Arc<std::sync::atomic::AtomicU32>,
        Arc<std::sync::atomic::AtomicU32>,
    ),
) -> Result<ServeOut, E2eError> {
    let mut out = ServeOut::default();
    let mut side_tasks = Vec::new();
    let mut restart_task = None;
    let mut n = 0;
    loop {
        n += 1;
        let mut child = spawn(&spec, n)?;
        let pid = child.id().unwrap_or(0);
        out.pids.push(pid);
        current.store(pid, std::sync::atomic::Ordering::Relaxed);
        if n == 1 {
            side_tasks = docker_kills
                .iter()
                .map(|&ms| {
                    tokio::spawn(async move {
                        let id = running_container_of(pid).await;
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        docker_kill(&id).await
                    })
                })
                .collect();
            restart_task = docker_restart.clone().map(|log| {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    restart_docker(&log).await
                })
            });
        }
        // The fault is armed on the first start only; a start that ended before it fired
        // (a crash) takes it along unfired.
        let (sig, trigger) = match kill.take() {
            Some((sig, t)) => (Some(sig), Some(t)),
            None => (None, None),
        };
        let fire = trigger_future(pid, trigger);
        enum Ended {
            Exited(Option<i32>),
            Fire,
            Stop,
        }
        let ended = tokio::select! {
            r = child.wait() => Ended::Exited(r.ok().and_then(|s| s.code())),
            () = fire => Ended::Fire,
            () = stop.notified() => Ended::Stop,
        };
        let label = format!("{}-{n}", spec.label);
        match ended {
            Ended::Fire => {
                out.fired = true;
                let grace = if sig == Some(Sig::Term) {
                    sigterm(pid);
                    TERM_GRACE
                } else {
                    let _ = child.start_kill();
                    Duration::from_secs(10)
                };
                out.killed_code = reap(&mut child, grace, label, &mut out.hung).await;
                // Restart=on-failure, or the operator's restart after a clean stop: at once.
            }
            Ended::Exited(code) => {
                out.crashes.push(code);
                crashes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if code == Some(78) {
                    out.stopped_for_good = true;
                    stop.notified().await;
                    break;
                }
                if n >= MAX_STARTS {
                    stop.notified().await;
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep(RESTART_AFTER) => {}
                    () = stop.notified() => break,
                }
            }
            Ended::Stop => {
                sigterm(pid);
                out.stop_code = reap(&mut child, TERM_GRACE, label, &mut out.hung).await;
                break;
            }
        }
    }
    for t in side_tasks {
        if t.is_finished() {
            out.docker_kills_fired.push(t.await.unwrap_or(false));
        } else {
            t.abort();
            out.docker_kills_fired.push(false);
        }
    }
    if let Some(t) = restart_task {
        out.docker_restart_fired = Some(t.await.unwrap_or(false));
    }
    Ok(out)
}

/// One job of a serve lane, as the driver knows it.
pub(super) struct LaneJob<'a> {
    /// Its id.
    pub job_id: &'a str,
    /// Its submission.
    pub kind: BountyKind,
}

/// Ledger statuses after which a job is not run again.
const TERMINAL: &[&str] = &["completed", "rejected", "exhausted", "conflicting"];

fn rows<'v>(ledger: &'v Value, table: &str, job_id: &str) -> Vec<&'v Value> {
    ledger
        .get(table)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|r| r.get("job_id").and_then(Value::as_str) == Some(job_id))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the service has done what it can this cycle: every listed good or bad job is
/// done in the ledger (and a completed one is listed by `out/manifest.json`, which the
/// service writes after the batch), and every wrong-image job has had a run end (it cannot
/// get further).
pub(super) fn lane_done(ledger: &Value, out: &Path, jobs: &[LaneJob<'_>]) -> bool {
    jobs.iter().all(|j| {
        let job_rows = rows(ledger, "jobs", j.job_id);
        match j.kind {
            BountyKind::WrongImage => rows(ledger, "runs", j.job_id)
                .iter()
                .any(|r| r.get("ended_at").is_some_and(|e| !e.is_null())),
            BountyKind::Good | BountyKind::Bad => job_rows.iter().any(|r| {
                let st = r.get("status").and_then(Value::as_str).unwrap_or("");
                TERMINAL.contains(&st)
                    && (st != "completed" || crate::dedicated::manifest_lists(out, j.job_id))
            }),
        }
    })
}

/// Whether the feed has answered no poll of process `pid` (the service's current one: the
/// heartbeat of an earlier process says nothing of this cycle's feed) while at least `n`
/// failed (the feed is down or answers 5xx for the whole cycle: nothing to wait for).
pub(super) fn feed_dead(ledger: &Value, pid: u32, n: u64) -> bool {
    if ledger.pointer("/heartbeat/pid").and_then(Value::as_u64) != Some(u64::from(pid)) {
        return false;
    }
    let polls = ledger.pointer("/heartbeat/polls");
    let ok = polls
        .and_then(|p| p.get("ok"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let failed = polls
        .and_then(|p| p.get("failed"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    ok == 0 && failed >= n
}

/// The highest run id in the ledger (0 when none).
pub(super) fn last_run_id(ledger: &Value) -> i64 {
    ledger
        .get("runs")
        .and_then(Value::as_array)
        .and_then(|r| {
            r.iter()
                .filter_map(|r| r.get("run_id").and_then(Value::as_i64))
                .max()
        })
        .unwrap_or(0)
}

/// Whether at least `n` runs after run `after` ended for a host cause (a full staging root,
/// the engine gone, an absent image without `--pull`): the host backs off and nothing more
/// happens for the lane's jobs this cycle.
pub(super) fn host_failing(ledger: &Value, after: i64, n: usize) -> bool {
    ledger
        .get("runs")
        .and_then(Value::as_array)
        .is_some_and(|r| {
            r.iter()
                .filter(|r| {
                    r.get("run_id").and_then(Value::as_i64).unwrap_or(0) > after
                        && r.get("cause").and_then(Value::as_str) == Some("host")
                })
                .count()
                >= n
        })
}

/// The ledger's account of `job_id` (every row of that id: rounds and contents alike).
pub fn ledger_job(ledger: &Value, job_id: &str) -> LedgerJob {
    let jobs = rows(ledger, "jobs", job_id);
    let status = match jobs.as_slice() {
        [] => None,
        [one] => one.get("status").and_then(Value::as_str).map(str::to_owned),
        // Two rows of one id (a second content): the worst is what counts.
        many => Some(
            many.iter()
                .filter_map(|r| r.get("status").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("+"),
        ),
    };
    let mut runs: Vec<(i64, Option<&str>)> = rows(ledger, "runs", job_id)
        .iter()
        .map(|r| {
            (
                r.get("run_id").and_then(Value::as_i64).unwrap_or(0),
                r.get("outcome").and_then(Value::as_str),
            )
        })
        .collect();
    // Run ids grow with each run (AUTOINCREMENT): the order even when the wall clock stepped.
    runs.sort_by_key(|(id, _)| *id);
    let verdict_of = |o: Option<&str>| match o {
        Some("completed_passed") => Some("passed"),
        Some("completed_failed") => Some("failed"),
        _ => None,
    };
    let verdicts: Vec<String> = runs
        .iter()
        .filter_map(|(_, o)| verdict_of(*o).map(str::to_owned))
        .collect();
    let first_verdict = runs.iter().position(|(_, o)| verdict_of(*o).is_some());
    LedgerJob {
        status,
        verdict_runs: u32::try_from(verdicts.len()).unwrap_or(u32::MAX),
        verdicts,
        runs_after_verdict: first_verdict.map_or(0, |i| {
            u32::try_from(runs.len().saturating_sub(i + 1)).unwrap_or(u32::MAX)
        }),
        candidates: u32::try_from(rows(ledger, "candidates", job_id).len()).unwrap_or(u32::MAX),
    }
}

/// Copies the regular files of `out` into `to` (created), as `pull-candidates.sh` pulls a
/// live `--out`: the manifest first, then what it lists may be newer, never older.
pub(super) fn snapshot(out: &Path, to: &Path) -> Result<(), E2eError> {
    std::fs::create_dir_all(to).map_err(io("create a snapshot directory", to))?;
    let mut names: Vec<String> = std::fs::read_dir(out)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort_by_key(|n| n != "manifest.json");
    for n in names {
        let from = out.join(&n);
        let dest = to.join(&n);
        // A file the service replaced in between is simply newer; one it removed is gone.
        let _ = std::fs::copy(&from, &dest);
    }
    Ok(())
}

/// Pids of a [`ServeOut`] into the run's set.
pub(super) fn add_pids(out: &ServeOut, pids: &mut HashSet<u32>) {
    pids.extend(out.pids.iter().copied());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn ledger() -> Value {
        json!({
            "heartbeat": {"pid": 77, "polls": {"ok": 0, "failed": 5}},
            "jobs": [
                {"job_id": "g", "status": "completed"},
                {"job_id": "w", "status": "pending"},
                {"job_id": "twice", "status": "completed"},
            ],
            "runs": [
                {"run_id": 1, "job_id": "g", "outcome": "interrupted", "ended_at": "x"},
                {"run_id": 2, "job_id": "g", "outcome": "completed_passed", "ended_at": "x"},
                {"run_id": 3, "job_id": "w", "outcome": "no_verdict", "cause": "host", "ended_at": "x"},
                {"run_id": 4, "job_id": "twice", "outcome": "completed_failed", "ended_at": "x"},
                {"run_id": 6, "job_id": "twice", "outcome": "completed_failed", "ended_at": "x"},
                {"run_id": 5, "job_id": "twice", "outcome": "interrupted", "cause": "host", "ended_at": "x"},
            ],
            "candidates": [{"job_id": "g"}, {"job_id": "twice"}, {"job_id": "twice"}],
        })
    }

    #[test]
    fn the_ledger_account_counts_verdict_runs_and_reruns_by_run_id() {
        let l = ledger();
        let g = ledger_job(&l, "g");
        assert_eq!(g.status.as_deref(), Some("completed"));
        assert_eq!(g.verdicts, vec!["passed"]);
        assert_eq!(
            (g.verdict_runs, g.runs_after_verdict, g.candidates),
            (1, 0, 1)
        );
        let t = ledger_job(&l, "twice");
        assert_eq!(
            (t.verdict_runs, t.runs_after_verdict, t.candidates),
            (2, 2, 2)
        );
        let missing = ledger_job(&l, "nobody");
        assert_eq!(missing, LedgerJob::default());
        assert!(feed_dead(&l, 77, 4));
        assert!(!feed_dead(&l, 77, 6));
        // Another process's heartbeat says nothing of this one's feed.
        assert!(!feed_dead(&l, 78, 4));
        assert_eq!(last_run_id(&l), 6);
        assert!(host_failing(&l, 2, 2));
        assert!(!host_failing(&l, 2, 3));
        assert!(!host_failing(&l, 5, 1));
    }

    #[test]
    fn a_lane_is_done_only_when_its_jobs_are() {
        let dir = std::env::temp_dir().join(format!("chaos-serve-done-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let l = ledger();
        let jobs = [
            LaneJob {
                job_id: "g",
                kind: BountyKind::Good,
            },
            LaneJob {
                job_id: "w",
                kind: BountyKind::WrongImage,
            },
        ];
        // Completed in the ledger, but the manifest does not list it yet.
        assert!(!lane_done(&l, &dir, &jobs));
        std::fs::write(dir.join("candidate-g.json"), "{}").unwrap();
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"candidates":[{"job_id":"g","file":"candidate-g.json"}]}"#,
        )
        .unwrap();
        assert!(lane_done(&l, &dir, &jobs));
        let not_run = [LaneJob {
            job_id: "nobody",
            kind: BountyKind::WrongImage,
        }];
        assert!(!lane_done(&l, &dir, &not_run));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
