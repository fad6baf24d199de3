//! The lifecycle both fake-engine test files rehearse over: worker-sandbox's scripted engine
//! holds one container, so this gives each run a fresh one and counts the runs in flight, to
//! show how many containers a rehearsal keeps alive at once.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use std::path::Path;

use verifier_sdk::fixtures::sample_manifest;
use verifier_sdk::oci_runtime::RUNC;
use worker_rehearse::RehearseOptions;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::lifecycle::fake::{EachRun, Fake, FreshEachRun, Script};
use worker_sandbox::{RunHooks, RunReport, SandboxError, SandboxSpec};

/// Scheduler turns a run waits for company before it goes on alone (a count of turns, not a
/// time, so code that never runs two containers together still ends, and is seen to).
const TURNS_ALONE: usize = 20_000;

/// What one run's container does: its script, the scheduler turns it is held after its
/// company came, and the name recorded when it ends.
pub struct Plan {
    pub script: Script,
    pub hold: usize,
    pub name: String,
}

type Planner = dyn Fn(&SandboxSpec) -> Plan + Send + Sync;

/// A fresh scripted container per run, planned from the run's spec. A run waits for
/// `company` runs in flight before its program may end (so overlap, where the code allows
/// it, is seen), then is held its plan's turns.
pub struct FreshRuns {
    plan: Box<Planner>,
    company: usize,
    in_flight: AtomicUsize,
    /// The most runs that were in flight together.
    pub most: Arc<AtomicUsize>,
    /// The plans' names, in the order their containers ended.
    pub ended: Arc<Mutex<Vec<String>>>,
    /// The plans' names of the runs whose company never came: each ran alone.
    pub alone: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for FreshRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshRuns")
            .field("company", &self.company)
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl FreshRuns {
    /// The runs, with the batch's own calls going to worker-sandbox's default fake.
    pub async fn new(
        company: usize,
        plan: impl Fn(&SandboxSpec) -> Plan + Send + Sync + 'static,
    ) -> FreshEachRun<Self> {
        FreshEachRun::new(Self {
            plan: Box::new(plan),
            company,
            in_flight: 0.into(),
            most: Arc::default(),
            ended: Arc::default(),
            alone: Arc::default(),
        })
        .await
        .unwrap()
    }
}

#[async_trait::async_trait]
impl EachRun for FreshRuns {
    async fn run(
        &self,
        spec: &SandboxSpec,
        hooks: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError> {
        let Plan { script, hold, name } = (self.plan)(spec);
        let fresh = Lifecycle::connect(Fake::new(script), RUNC).await?;
        // A run counts from its admission (right before its start) until its container
        // stopped, as the rehearsal's capacity counts it (RunHooks::admit, ::stopped).
        let counted = Counted {
            inner: hooks,
            runs: self,
            name: &name,
            hold,
            state: Mutex::new(State::Created),
        };
        let report = fresh.run(spec, &counted).await;
        self.ended.lock().unwrap().push(name.clone());
        counted.stopped();
        report
    }
}

/// Where a run stands in the count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Created,
    Running,
    Stopped,
}

/// The caller's hooks, counting a run from its admission until its container stopped, and
/// holding its program until it has company.
struct Counted<'a> {
    inner: &'a dyn RunHooks,
    runs: &'a FreshRuns,
    name: &'a str,
    hold: usize,
    state: Mutex<State>,
}

impl RunHooks for Counted<'_> {
    fn check_inputs(&self, phase: worker_sandbox::InputPhase) -> worker_sandbox::InputCheck {
        self.inner.check_inputs(phase)
    }

    fn executable_cache(&self) -> Option<std::path::PathBuf> {
        self.inner.executable_cache()
    }

    fn image_memo(&self) -> Option<&worker_sandbox::ImageMemo> {
        self.inner.image_memo()
    }

    fn admit(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            self.inner.admit().await;
            *self.state.lock().unwrap() = State::Running;
            let runs = self.runs;
            let now = runs.in_flight.fetch_add(1, SeqCst) + 1;
            runs.most.fetch_max(now, SeqCst);
            let mut company = false;
            for _ in 0..TURNS_ALONE {
                if runs.in_flight.load(SeqCst) >= runs.company {
                    company = true;
                    break;
                }
                tokio::task::yield_now().await;
            }
            if !company {
                runs.alone.lock().unwrap().push(self.name.to_owned());
            }
            for _ in 0..self.hold {
                tokio::task::yield_now().await;
            }
        })
    }

    fn stopped(&self) {
        let was = std::mem::replace(&mut *self.state.lock().unwrap(), State::Stopped);
        if was == State::Running {
            self.runs.in_flight.fetch_sub(1, SeqCst);
        }
        self.inner.stopped();
    }
}

/// The options of a one-run rehearsal under `dir`: a one-file Rust source and benchmark (trees
/// made here), the sample manifest with the placeholder benchmark digest (an author's first
/// rehearsal: filled in from the staged tree), a staging root of its own.
// The batch tests write a tasks file instead.
#[allow(dead_code)]
pub fn options(dir: &Path) -> RehearseOptions {
    let (source, benchmark, staging) = (
        dir.join("source"),
        dir.join("benchmark"),
        dir.join("staging"),
    );
    for tree in [&source, &benchmark, &staging] {
        std::fs::create_dir_all(tree).unwrap();
    }
    std::fs::write(source.join("lib.rs"), "pub fn answer() -> u32 { 42 }\n").unwrap();
    std::fs::write(benchmark.join("test.rs"), "#[test] fn t() {}\n").unwrap();
    let manifest = dir.join("manifest.json");
    let mut value = sample_manifest();
    value["benchmark_digest"] = format!("sha256:{}", "0".repeat(64)).into();
    std::fs::write(&manifest, serde_json::to_vec(&value).unwrap()).unwrap();
    RehearseOptions {
        source,
        benchmark,
        manifest,
        repeat: 1,
        base: None,
        staging_root: staging,
        pull: false,
        rev: "HEAD".into(),
        rev_explicit: false,
        base_rev: None,
        worktree: true,
        quiet: true,
        log_dir: None,
        oci_runtime: RUNC.into(),
        task: None,
    }
}
