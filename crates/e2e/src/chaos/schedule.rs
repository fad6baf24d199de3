//! The fault schedule: a pure function of (seed, bounties, faults, options). The same inputs
//! always give the same bounty mix and the same faults in the same cycles, so a run that
//! breaks an invariant is replayed by its seed alone.
//!
//! A run is a sequence of *cycles*, each what one scheduled workflow run (or one systemd
//! restart) does: `worker feed`, `signer sign` as each verifier, `keeper relay`. Faults are
//! placed in the first [`Schedule::chaos_cycles`] cycles; after them the driver keeps running
//! clean cycles until every bounty that can settle has (the drain), then checks.

use std::fmt;

use super::rng::SplitMix64;

/// What the solver of one bounty submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BountyKind {
    /// `solution-good`: passes; must be paid exactly once.
    Good,
    /// `solution-bad`: fails a test; must never be paid.
    Bad,
    /// A good solution, but the bounty's author pinned an image digest that does not exist:
    /// no run can produce a verdict, so it must stay unsettled (and keep retrying).
    WrongImage,
}

impl BountyKind {
    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Good => "good",
            Self::Bad => "bad",
            Self::WrongImage => "wrong-image",
        }
    }
}

/// One bounty of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BountySpec {
    /// The submission.
    pub kind: BountyKind,
    /// Attestations needed (1 or 2 of the two verifiers).
    pub threshold: u8,
}

/// What runs a lane's jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Runner {
    /// `worker feed`, one fresh run per cycle (the scheduled runner workflow).
    Feed,
    /// `worker serve`, the long-running service of a dedicated host, with its ledger.
    Serve,
}

/// The runners of a schedule's two lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunnerMode {
    /// Both lanes run `worker feed`.
    Feed,
    /// Both lanes run `worker serve`.
    Serve,
    /// The pair lane (threshold 2) runs `worker serve`, the solo lane `worker feed`: both
    /// at once in one schedule.
    Mixed,
}

impl RunnerMode {
    /// Every mode, in the order `--runner` names them.
    pub const ALL: [Self; 3] = [Self::Feed, Self::Serve, Self::Mixed];

    /// The name `--runner` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Feed => "feed",
            Self::Serve => "serve",
            Self::Mixed => "mixed",
        }
    }

    /// The mode named `name` (`feed`, `serve`, `mixed`).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The runner of the pair lane (`pair`) or the solo lane.
    pub fn lane(self, pair: bool) -> Runner {
        match (self, pair) {
            (Self::Feed, _) | (Self::Mixed, false) => Runner::Feed,
            (Self::Serve, _) | (Self::Mixed, true) => Runner::Serve,
        }
    }
}

/// A process the driver runs (and restarts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The lane's runner: `worker feed`, or `worker serve` in a serve lane.
    Worker,
    /// `signer sign` as verifier 1.
    Signer1,
    /// `signer sign` as verifier 2.
    Signer2,
    /// `keeper relay`.
    Keeper,
}

impl Target {
    /// Name in the schedule listing.
    pub fn name(self) -> &'static str {
        match self {
            Self::Worker => "worker",
            Self::Signer1 => "signer-1",
            Self::Signer2 => "signer-2",
            Self::Keeper => "keeper",
        }
    }
}

/// Which signal ends the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sig {
    /// SIGKILL: no cleanup at all (power loss, OOM killer).
    Kill,
    /// SIGTERM: the orderly stop systemd and Actions cancellation send.
    Term,
}

/// When a kill fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KillAt {
    /// This many milliseconds after the process started.
    AfterMs(u64),
    /// When the worker's first sandbox container of the cycle is running (between container
    /// start and evidence write).
    ContainerRunning,
    /// When the worker's first candidate file appears (between candidate write and the rest:
    /// the manifest, the other jobs).
    CandidateWritten,
    /// When the keeper's `eth_sendRawTransaction` has reached the node, before the keeper
    /// sees the answer (between broadcast and record write).
    Broadcast,
}

/// How the feed/archive server misbehaves for a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FeedMode {
    /// Every connection is closed without an answer.
    Down,
    /// Every answer waits this long.
    SlowMs(u64),
    /// Every answer is this 5xx status.
    Status(u16),
    /// This percentage of requests get a 503, the rest are served.
    FlakyPercent(u64),
}

/// How the RPC proxy in front of the node misbehaves for a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RpcMode {
    /// This percentage of calls is dropped: half before reaching the node, half after (the
    /// call took effect but its answer is lost).
    DropPercent(u64),
    /// Every answer waits this long.
    DelayMs(u64),
    /// On about half the calls the proxy answers as a node one block behind: the block number
    /// minus one, a receipt of the latest block not yet known, a nonce as of the block before.
    LagOneBlock,
    /// Receipts and state from a node that stays at the block before the cycle's first call,
    /// the nonce from a current one (two load-balanced nodes that disagree), on every call:
    /// that block's number, no receipt of a later block, balance, code, `eth_call` and
    /// "latest" block as of that block, `eth_getTransactionCount` current.
    SplitLag,
    /// Answers are held a random 0..=400 ms so concurrent calls complete out of order, and
    /// batch answers come back in reverse order (both legal JSON-RPC).
    Reorder,
}

/// Which filesystem fills up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Disk {
    /// The worker's staging root (a small tmpfs of the driver's).
    Staging,
    /// The state directories: keeper records and the worker's verdict cache (a small tmpfs).
    State,
}

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// A signal to one of the processes at a chosen point; it is restarted next cycle.
    Kill {
        /// The process.
        target: Target,
        /// The signal.
        sig: Sig,
        /// When.
        at: KillAt,
    },
    /// `docker kill` of the worker's sandbox container from outside, this long after it runs.
    DockerKill {
        /// Delay after the container is seen running.
        after_ms: u64,
    },
    /// The feed and archive server misbehaves for the whole cycle.
    Feed(FeedMode),
    /// The RPC proxy misbehaves for the whole cycle.
    Rpc(RpcMode),
    /// A filesystem is full for the whole cycle.
    DiskFull(Disk),
    /// `systemctl restart docker` (or, without systemd, dockerd stopped and started again)
    /// while the worker runs. Off unless the options allow it: it stops every other user's
    /// containers on a shared daemon.
    DockerRestart,
    /// The wall clock of every process of the cycle (worker, signers, keeper; libfaketime)
    /// steps forward by `forward_s` seconds `after_ms` after the cycle starts, then `hold_ms`
    /// later back to `back_s` seconds behind the real time, and to the real time when the
    /// cycle ends (another step forward). The monotonic clock is left alone, as an NTP step
    /// leaves it.
    ClockStep {
        /// Delay from the cycle's start to the forward step.
        after_ms: u64,
        /// How far forward.
        forward_s: u64,
        /// How long the clock stays ahead.
        hold_ms: u64,
        /// How far behind the real time it then is.
        back_s: u64,
    },
}

impl FaultKind {
    /// The kind's family, for the summary table.
    pub fn family(&self) -> &'static str {
        match self {
            Self::Kill { sig: Sig::Kill, .. } => "sigkill",
            Self::Kill { sig: Sig::Term, .. } => "sigterm",
            Self::DockerKill { .. } => "docker-kill",
            Self::Feed(_) => "feed",
            Self::Rpc(RpcMode::LagOneBlock | RpcMode::SplitLag) => "rpc-lag",
            Self::Rpc(_) => "rpc",
            Self::DiskFull(_) => "disk-full",
            Self::DockerRestart => "docker-restart",
            Self::ClockStep { .. } => "clock-step",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kill { target, sig, at } => {
                let sig = match sig {
                    Sig::Kill => "SIGKILL",
                    Sig::Term => "SIGTERM",
                };
                let at = match at {
                    KillAt::AfterMs(ms) => format!("{ms} ms after start"),
                    KillAt::ContainerRunning => "when its sandbox container runs".into(),
                    KillAt::CandidateWritten => "when its first candidate is written".into(),
                    KillAt::Broadcast => "right after its transaction is broadcast".into(),
                };
                write!(f, "{sig} {} {at}", target.name())
            }
            Self::DockerKill { after_ms } => {
                write!(
                    f,
                    "docker kill the sandbox container {after_ms} ms after it runs"
                )
            }
            Self::Feed(m) => match m {
                FeedMode::Down => write!(f, "feed/archive server down"),
                FeedMode::SlowMs(ms) => write!(f, "feed/archive server slow ({ms} ms)"),
                FeedMode::Status(c) => write!(f, "feed/archive server answers {c}"),
                FeedMode::FlakyPercent(p) => write!(f, "feed/archive server 503 on {p}%"),
            },
            Self::Rpc(m) => match m {
                RpcMode::DropPercent(p) => write!(f, "rpc proxy drops {p}% of calls"),
                RpcMode::DelayMs(ms) => write!(f, "rpc proxy delays every call {ms} ms"),
                RpcMode::LagOneBlock => write!(f, "rpc proxy lags one block behind on some calls"),
                RpcMode::SplitLag => write!(
                    f,
                    "rpc proxy: receipts and state from a stale node, nonce current"
                ),
                RpcMode::Reorder => write!(f, "rpc proxy reorders answers"),
            },
            Self::DiskFull(Disk::Staging) => write!(f, "staging root full"),
            Self::DiskFull(Disk::State) => write!(f, "state dir full"),
            Self::DockerRestart => write!(f, "docker daemon restart while the worker runs"),
            Self::ClockStep {
                after_ms,
                forward_s,
                hold_ms,
                back_s,
            } => write!(
                f,
                "wall clock steps {forward_s} s forward {after_ms} ms into the cycle, \
                 {hold_ms} ms later to {back_s} s behind"
            ),
        }
    }
}

/// A fault and the cycle it is injected in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// 0-based cycle.
    pub cycle: u32,
    /// What.
    pub kind: FaultKind,
}

/// What the generator may draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleOptions {
    /// Cycles that carry faults (at least 1).
    pub chaos_cycles: u32,
    /// Draw `DiskFull` faults (needs `mount -t tmpfs`, i.e. root).
    pub disk: bool,
    /// Draw `DockerRestart` faults. Off by default: it stops every container on the daemon.
    pub docker_restart: bool,
    /// Draw a `ClockStep` (needs libfaketime). On by default.
    pub clock: bool,
    /// The runners; `None` draws them from the seed.
    pub runner: Option<RunnerMode>,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        Self {
            chaos_cycles: 2,
            disk: true,
            docker_restart: false,
            clock: true,
            runner: None,
        }
    }
}

/// The second stream's seed: the runner and the clock step are drawn from
/// `SplitMix64::new(seed ^ EXTRA_STREAM)`, not from the stream of the bounties and the
/// `faults` faults, so adding them left every earlier seed's bounties and faults as they were
/// (the seeds in `CI_SEEDS` still replay the faults that found their bugs).
const EXTRA_STREAM: u64 = 0x5e7e_c10c_0fa1_7ed5;

/// Percent of schedules (with at least one fault) that get a clock step.
const CLOCK_STEP_PERCENT: u64 = 40;

/// Everything a run does, derived from the seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The seed.
    pub seed: u64,
    /// The bounties, in feed order.
    pub bounties: Vec<BountySpec>,
    /// The faults, sorted by cycle.
    pub faults: Vec<Fault>,
    /// Cycles that carry faults.
    pub chaos_cycles: u32,
    /// What runs each lane's jobs.
    pub runner: RunnerMode,
}

/// Draws the bounty mix and `faults` faults from `seed`. With 3 or more bounties the first
/// three are one good, one bad and one wrong-image bounty, so every schedule checks every
/// kind; the rest are drawn (good twice as likely as each other kind). Thresholds alternate
/// 1/2 from a seeded start so both appear for every kind over a soak.
pub fn generate(seed: u64, bounties: usize, faults: usize, opts: ScheduleOptions) -> Schedule {
    let mut rng = SplitMix64::new(seed);
    let fixed = [BountyKind::Good, BountyKind::Bad, BountyKind::WrongImage];
    let first_threshold = rng.range(1, 2);
    // Bounty i is posted in cycle i mod chaos_cycles (see the driver).
    let specs = (0..bounties)
        .map(|i| {
            let kind = match fixed.get(i) {
                Some(k) if bounties >= 3 || i < 2 => *k,
                _ => rng
                    .pick(&[
                        BountyKind::Good,
                        BountyKind::Good,
                        BountyKind::Bad,
                        BountyKind::WrongImage,
                    ])
                    .unwrap_or(BountyKind::Good),
            };
            let threshold = if (i as u64 + first_threshold).is_multiple_of(2) {
                2
            } else {
                1
            };
            BountySpec { kind, threshold }
        })
        .collect();
    let chaos_cycles = opts.chaos_cycles.max(1);
    let mut list: Vec<Fault> = (0..faults)
        .map(|_| Fault {
            cycle: u32::try_from(rng.below(u64::from(chaos_cycles))).unwrap_or(0),
            kind: draw_kind(&mut rng, opts),
        })
        .collect();
    // The second stream (see EXTRA_STREAM): always drawn in the same order, whatever the
    // options, so `--runner` or `--no-clock` change nothing else.
    let mut extra = SplitMix64::new(seed ^ EXTRA_STREAM);
    let drawn_runner = extra.pick(&RunnerMode::ALL).unwrap_or(RunnerMode::Feed);
    let clock_step = extra.chance(CLOCK_STEP_PERCENT);
    let clock_fault = Fault {
        cycle: u32::try_from(extra.below(u64::from(chaos_cycles))).unwrap_or(0),
        kind: FaultKind::ClockStep {
            // Early in the cycle, so it lands while its processes run (a cycle takes seconds).
            after_ms: extra.range(0, 1500),
            // 1-30 minutes: an NTP step after a host slept or a VM was restored; far more
            // than the clocks of two healthy hosts ever disagree, well inside a job's hour.
            forward_s: extra.range(60, 1800),
            hold_ms: extra.range(300, 4000),
            back_s: extra.range(60, 1800),
        },
    };
    if opts.clock && clock_step && faults > 0 {
        list.push(clock_fault);
    }
    // Stable: within a cycle the main stream's faults keep their order.
    list.sort_by_key(|f| f.cycle);
    Schedule {
        seed,
        bounties: specs,
        faults: list,
        chaos_cycles,
        runner: opts.runner.unwrap_or(drawn_runner),
    }
}

fn draw_kind(rng: &mut SplitMix64, opts: ScheduleOptions) -> FaultKind {
    // Weights: kills are the commonest fault in production and the richest in boundaries.
    let mut families: Vec<u8> = vec![0, 0, 0, 0, 1, 2, 3, 3];
    if opts.disk {
        families.push(4);
    }
    if opts.docker_restart {
        families.push(5);
    }
    match rng.pick(&families).unwrap_or(0) {
        0 => {
            let target = rng
                .pick(&[
                    Target::Worker,
                    Target::Worker,
                    Target::Signer1,
                    Target::Signer2,
                    Target::Keeper,
                    Target::Keeper,
                ])
                .unwrap_or(Target::Worker);
            let sig = if rng.chance(60) { Sig::Kill } else { Sig::Term };
            let at = match (target, rng.below(3)) {
                (Target::Worker, 0) => KillAt::ContainerRunning,
                (Target::Worker, 1) => KillAt::CandidateWritten,
                (Target::Keeper, 0 | 1) => KillAt::Broadcast,
                (Target::Worker, _) => KillAt::AfterMs(rng.range(200, 8000)),
                // Signer and keeper runs take well under a second or two on loopback.
                _ => KillAt::AfterMs(rng.range(20, 700)),
            };
            FaultKind::Kill { target, sig, at }
        }
        1 => FaultKind::DockerKill {
            after_ms: rng.range(0, 400),
        },
        2 => FaultKind::Feed(match rng.below(4) {
            0 => FeedMode::Down,
            1 => FeedMode::SlowMs(rng.range(200, 2000)),
            2 => FeedMode::Status(rng.pick(&[500, 502, 503]).unwrap_or(500)),
            _ => FeedMode::FlakyPercent(rng.range(20, 60)),
        }),
        3 => FaultKind::Rpc(match rng.below(5) {
            0 => RpcMode::DropPercent(rng.range(10, 40)),
            1 => RpcMode::DelayMs(rng.range(50, 800)),
            2 => RpcMode::LagOneBlock,
            3 => RpcMode::SplitLag,
            _ => RpcMode::Reorder,
        }),
        4 => FaultKind::DiskFull(if rng.chance(50) {
            Disk::Staging
        } else {
            Disk::State
        }),
        _ => FaultKind::DockerRestart,
    }
}

impl Schedule {
    /// The faults of cycle `cycle`.
    pub fn faults_in(&self, cycle: u32) -> impl Iterator<Item = &Fault> {
        self.faults.iter().filter(move |f| f.cycle == cycle)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} ({} chaos cycles, runner {})",
            self.seed,
            self.chaos_cycles,
            self.runner.name()
        )?;
        for (i, b) in self.bounties.iter().enumerate() {
            writeln!(
                f,
                "  bounty {i}: {} threshold {}",
                b.kind.name(),
                b.threshold
            )?;
        }
        for fault in &self.faults {
            writeln!(f, "  cycle {}: {}", fault.cycle, fault.kind)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_the_same_schedule() {
        for seed in [0, 1, 42, u64::MAX] {
            let a = generate(seed, 6, 8, ScheduleOptions::default());
            let b = generate(seed, 6, 8, ScheduleOptions::default());
            assert_eq!(a, b);
            assert_eq!(a.to_string(), b.to_string());
        }
    }

    #[test]
    fn different_seeds_give_different_schedules() {
        let a = generate(1, 6, 8, ScheduleOptions::default());
        let b = generate(2, 6, 8, ScheduleOptions::default());
        assert_ne!(a.faults, b.faults);
    }

    #[test]
    fn every_schedule_has_each_kind_and_faults_in_chaos_cycles() {
        for seed in 0..200 {
            let s = generate(seed, 6, 5, ScheduleOptions::default());
            assert_eq!(s.bounties.len(), 6);
            // The `faults` drawn, plus at most one clock step from the second stream.
            let main = s
                .faults
                .iter()
                .filter(|f| !matches!(f.kind, FaultKind::ClockStep { .. }))
                .count();
            assert_eq!(main, 5);
            assert!(s.faults.len() <= 6);
            for k in [BountyKind::Good, BountyKind::Bad, BountyKind::WrongImage] {
                assert!(s.bounties.iter().any(|b| b.kind == k), "{s}");
            }
            assert!(
                s.bounties
                    .iter()
                    .all(|b| b.threshold == 1 || b.threshold == 2)
            );
            assert!(s.bounties.iter().any(|b| b.threshold == 1));
            assert!(s.bounties.iter().any(|b| b.threshold == 2));
            assert!(s.faults.iter().all(|f| f.cycle < s.chaos_cycles));
            assert!(s.faults.windows(2).all(|w| w[0].cycle <= w[1].cycle));
        }
    }

    #[test]
    fn docker_restart_and_disk_faults_only_when_allowed() {
        let off = ScheduleOptions {
            disk: false,
            ..ScheduleOptions::default()
        };
        for seed in 0..300 {
            let s = generate(seed, 3, 10, off);
            assert!(
                s.faults
                    .iter()
                    .all(|f| !matches!(f.kind, FaultKind::DockerRestart | FaultKind::DiskFull(_)))
            );
        }
        let on = ScheduleOptions {
            docker_restart: true,
            ..ScheduleOptions::default()
        };
        assert!((0..300).any(|seed| {
            generate(seed, 3, 10, on)
                .faults
                .iter()
                .any(|f| f.kind == FaultKind::DockerRestart)
        }));
    }

    #[test]
    fn the_second_stream_leaves_earlier_seeds_bounties_and_faults_unchanged() {
        // Seed 57 as `bounty-e2e chaos --seed 57 --dry-run` printed it before the runner and
        // the clock step were drawn: the schedule that found the keeper's double send.
        let s = generate(57, 6, 4, ScheduleOptions::default());
        let main: Vec<String> = s
            .faults
            .iter()
            .filter(|f| !matches!(f.kind, FaultKind::ClockStep { .. }))
            .map(|f| format!("cycle {}: {}", f.cycle, f.kind))
            .collect();
        assert_eq!(
            main,
            [
                "cycle 0: SIGTERM keeper right after its transaction is broadcast",
                "cycle 0: rpc proxy: receipts and state from a stale node, nonce current",
                "cycle 0: feed/archive server 503 on 28%",
                "cycle 1: SIGKILL worker when its sandbox container runs",
            ]
        );
        let kinds: Vec<&str> = s.bounties.iter().map(|b| b.kind.name()).collect();
        assert_eq!(kinds, ["good", "bad", "wrong-image", "bad", "good", "good"]);
        // The options change only what they name.
        let forced = generate(
            57,
            6,
            4,
            ScheduleOptions {
                runner: Some(RunnerMode::Serve),
                clock: false,
                ..ScheduleOptions::default()
            },
        );
        assert_eq!(forced.runner, RunnerMode::Serve);
        assert_eq!(forced.bounties, s.bounties);
        let no_clock: Vec<Fault> = s
            .faults
            .iter()
            .copied()
            .filter(|f| !matches!(f.kind, FaultKind::ClockStep { .. }))
            .collect();
        assert_eq!(forced.faults, no_clock);
    }

    #[test]
    fn runners_and_clock_steps_are_drawn_over_a_soak() {
        let mut modes = std::collections::BTreeSet::new();
        let mut clocks = 0;
        for seed in 0..200 {
            let s = generate(seed, 6, 4, ScheduleOptions::default());
            modes.insert(s.runner);
            let c = s
                .faults
                .iter()
                .filter(|f| matches!(f.kind, FaultKind::ClockStep { .. }))
                .count();
            assert!(c <= 1, "{s}");
            clocks += c;
            assert!(s.faults.iter().all(|f| f.cycle < s.chaos_cycles));
            assert!(s.faults.windows(2).all(|w| w[0].cycle <= w[1].cycle));
            assert_eq!(
                generate(seed, 6, 0, ScheduleOptions::default()).faults,
                vec![],
                "--faults 0 means no fault at all"
            );
        }
        assert_eq!(modes.len(), 3);
        assert!(
            (40..120).contains(&clocks),
            "{clocks} clock steps in 200 schedules"
        );
        assert_eq!(RunnerMode::parse("mixed"), Some(RunnerMode::Mixed));
        assert_eq!(RunnerMode::parse("both"), None);
        assert_eq!(RunnerMode::Mixed.lane(true), Runner::Serve);
        assert_eq!(RunnerMode::Mixed.lane(false), Runner::Feed);
    }
}
