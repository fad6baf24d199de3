//! Fault injection over the whole money path (issue 30): a pure, seed-driven schedule
//! ([`schedule`]), the injectors ([`inject`]: processes, Docker, the feed server, an RPC proxy,
//! full disks), the driver that plays the real binaries through it ([`driver`]) and the
//! invariant checker, pure over the observations ([`check`]). `bounty-e2e chaos` runs one
//! seed or, with `--soak K`, K seeds and a summary table. docs/chaos.md has the details.

pub mod check;
pub mod clock;
pub mod driver;
pub mod inject;
pub mod rng;
pub mod schedule;
pub mod serve;
pub mod workdir;

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use driver::{ChaosOptions, RunResult, run};

/// The seeds CI plays (tests/chaos.rs), in one place. Each is run with [`ChaosOptions::new`]
/// (6 bounties, 4 faults, 2 chaos cycles). 1-8 are the first schedules; 12, 41, 57, 66, 69 and
/// 93 are the ones the 100-schedule soak of docs/chaos.md found breaking
/// `no_reverted_keeper_tx` (behind an RPC whose receipts and state lag while the nonce is
/// current, a restarted keeper judged its paying transaction dropped and sent a second
/// settlement: issue 21 item 3). They pass since the keeper proves a drop from blocks read by
/// number, and stay here as that fix's regression schedules.
pub const CI_SEEDS: &[u64] = &[1, 2, 3, 4, 5, 6, 7, 8, 12, 41, 57, 66, 69, 93];

/// Seeds that break an invariant on today's code because of a bug not yet fixed, with what
/// they break. Move a seed into [`CI_SEEDS`] once its fix is on main. None today.
pub const SEEDS_AWAITING_FIXES: &[(u64, &str)] = &[];

/// The soak summary: per schedule one row, then faults by kind (drawn and fired) and
/// violations by invariant.
pub fn summary_table(results: &[Result<RunResult, String>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| seed | cycles | faults fired/drawn | violations | seconds |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---|---:|");
    let mut drawn: BTreeMap<&'static str, (u32, u32)> = BTreeMap::new();
    let mut broken: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut errors = 0;
    for r in results {
        match r {
            Ok(r) => {
                for (f, fired) in &r.fired {
                    let e = drawn.entry(f.kind.family()).or_default();
                    e.0 += 1;
                    e.1 += u32::from(*fired);
                }
                for v in &r.violations {
                    *broken.entry(v.invariant).or_default() += 1;
                }
                let names: Vec<&str> = r.violations.iter().map(|v| v.invariant).collect();
                let _ = writeln!(
                    out,
                    "| {} | {} | {}/{} | {} | {:.0} |",
                    r.schedule.seed,
                    r.cycles,
                    r.fired.iter().filter(|(_, f)| *f).count(),
                    r.fired.len(),
                    if names.is_empty() {
                        "-".to_owned()
                    } else {
                        names.join(", ")
                    },
                    r.elapsed.as_secs_f64()
                );
            }
            Err(e) => {
                errors += 1;
                let _ = writeln!(out, "| ? | - | - | driver error: {e} | - |");
            }
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "schedules run: {} ({} with a violation, {errors} driver errors)",
        results.len(),
        results
            .iter()
            .filter(|r| r.as_ref().is_ok_and(|r| !r.violations.is_empty()))
            .count()
    );
    let _ = writeln!(out, "\n| fault kind | drawn | fired |\n|---|---:|---:|");
    for (k, (d, f)) in &drawn {
        let _ = writeln!(out, "| {k} | {d} | {f} |");
    }
    let _ = writeln!(out, "\n| invariant | schedules broken |\n|---|---:|");
    if broken.is_empty() {
        let _ = writeln!(out, "| (none) | 0 |");
    }
    for (k, n) in &broken {
        let _ = writeln!(out, "| {k} | {n} |");
    }
    out
}
