//! `bounty-e2e`: plays the "settled" and "rejected" bounties on the local services and prints
//! each step (see the library docs). Exit 0 only when both end on chain as they must.
//!
//!   bounty-e2e [--repo DIR] [--bin-dir DIR] [--work-dir DIR] [settled|rejected]...
//!
//!   bounty-e2e [--repo DIR] [--bin-dir DIR] [--work-dir DIR] chaos --seed S [--bounties N]
//!              [--faults F] [--chaos-cycles C] [--soak K] [--runner feed|serve|mixed] [--no-disk]
//!              [--no-clock] [--serve-no-pull] [--failing-rpc down|forbidden|rate-limited] [--liveness short-window|late-image [--first-seen-order]] [--fleet N] [--allow-docker-restart] [--verbose] [--dry-run]
//!
//! Defaults: the repository is the current directory, the binaries sit next to this one,
//! the work directory is `<repo>/.work/e2e` (`<repo>/.work/chaos` for `chaos`). `chaos` plays
//! one fault schedule (or K consecutive seeds from S with `--soak K`) and exits 1 when an
//! invariant broke; docs/chaos.md describes it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use e2e::chaos::{ChaosOptions, summary_table};
use e2e::{E2eConfig, Scenario, run_scenario};

fn usage(msg: &str) -> ExitCode {
    eprintln!("bounty-e2e: {msg}");
    eprintln!(
        "usage: bounty-e2e [--repo DIR] [--bin-dir DIR] [--work-dir DIR] [settled|rejected]..."
    );
    eprintln!(
        "       bounty-e2e [--repo DIR] [--bin-dir DIR] [--work-dir DIR] chaos --seed S [--bounties N] \
         [--faults F] [--chaos-cycles C] [--soak K] [--runner feed|serve|mixed] [--no-disk] [--no-clock] \
         [--serve-no-pull] [--failing-rpc down|forbidden|rate-limited] [--liveness short-window|late-image [--first-seen-order]] [--fleet N] [--allow-docker-restart] [--verbose] [--dry-run]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut repo = PathBuf::from(".");
    let mut bin_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from));
    let mut work_dir = None;
    let mut scenarios = Vec::new();
    let mut chaos: Option<(ChaosOptions, u64)> = None;
    let mut verbose = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if let Some((opts, soak)) = chaos.as_mut() {
            if let Err(msg) = chaos_arg(opts, soak, &mut verbose, &arg, &mut args) {
                return usage(&msg);
            }
            continue;
        }
        match arg.as_str() {
            "chaos" => chaos = Some((ChaosOptions::new(1), 1)),
            "--repo" | "--bin-dir" | "--work-dir" => {
                let Some(value) = args.next() else {
                    return usage(&format!("{arg} takes a value"));
                };
                let value = PathBuf::from(value);
                match arg.as_str() {
                    "--repo" => repo = value,
                    "--bin-dir" => bin_dir = Some(value),
                    _ => work_dir = Some(value),
                }
            }
            "settled" => scenarios.push(Scenario::Settled),
            "rejected" => scenarios.push(Scenario::Rejected),
            other => return usage(&format!("unknown argument {other:?}")),
        }
    }
    if scenarios.is_empty() {
        scenarios = vec![Scenario::Settled, Scenario::Rejected];
    }
    let Some(bin_dir) = bin_dir else {
        return usage("cannot locate the binaries; pass --bin-dir");
    };
    let work_dir = work_dir.unwrap_or_else(|| {
        repo.join(if chaos.is_some() {
            ".work/chaos"
        } else {
            ".work/e2e"
        })
    });
    let cfg = match E2eConfig::from_repo(&repo, &bin_dir, &work_dir) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("bounty-e2e: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bounty-e2e: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some((opts, soak)) = chaos.filter(|(o, _)| o.dry_run) {
        // The schedules only: what a run of these seeds would inject (nothing is started).
        for i in 0..soak {
            let seed = opts.seed.wrapping_add(i);
            if let Some(hosts) = opts.fleet {
                let s = e2e::chaos::fleet::schedule(seed, hosts, e2e::chaos::fleet::FLEET_JOBS);
                println!("{s}");
                continue;
            }
            let s = e2e::chaos::schedule::generate(seed, opts.bounties, opts.faults, opts.schedule);
            println!("{s}");
        }
        return ExitCode::SUCCESS;
    }
    if let Some((opts, soak)) = chaos {
        return run_chaos(&runtime, &cfg, opts, soak, verbose);
    }
    let started = Instant::now();
    let mut summary = Vec::new();
    for scenario in scenarios {
        match runtime.block_on(run_scenario(&cfg, scenario)) {
            Ok(result) => summary.push(result),
            Err(e) => {
                eprintln!("\nbounty-e2e: scenario {} FAILED: {e}", scenario.name());
                return ExitCode::FAILURE;
            }
        }
    }
    println!("\n==> summary");
    for r in &summary {
        let kind = match r.event {
            verifier_sdk::settle::SettlementEvent::Settled(_) => "BountySettled",
            verifier_sdk::settle::SettlementEvent::Rejected(_) => "SubmissionRejected",
        };
        println!(
            "    {:<8} bounty {} -> {kind} in tx {} (status {})",
            r.scenario.name(),
            r.bounty,
            r.tx_hash,
            r.status
        );
        let steps: Vec<String> = r
            .timings
            .iter()
            .map(|(name, d)| format!("{name} {:.1}s", d.as_secs_f64()))
            .collect();
        println!("             {}", steps.join(", "));
    }
    println!(
        "    all scenarios passed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}

/// One argument after `chaos` (taking its value from `args`).
fn chaos_arg(
    opts: &mut ChaosOptions,
    soak: &mut u64,
    verbose: &mut bool,
    flag: &str,
    args: &mut impl Iterator<Item = String>,
) -> Result<(), String> {
    match flag {
        "--no-disk" => opts.schedule.disk = false,
        "--no-clock" => opts.schedule.clock = false,
        "--serve-no-pull" => opts.serve_pull = false,
        "--runner" => {
            let name = args.next().unwrap_or_default();
            let Some(mode) = e2e::chaos::schedule::RunnerMode::parse(&name) else {
                return Err(format!("--runner takes feed, serve or mixed, not {name:?}"));
            };
            opts.schedule.runner = Some(mode);
        }
        "--failing-rpc" => {
            let name = args.next().unwrap_or_default();
            let Some(f) = e2e::chaos::driver::FailingRpc::parse(&name) else {
                return Err(format!(
                    "--failing-rpc takes down, forbidden or rate-limited, not {name:?}"
                ));
            };
            opts.failing_rpc = Some(f);
        }
        "--liveness" => {
            let name = args.next().unwrap_or_default();
            let Some(l) = e2e::chaos::liveness::Liveness::parse(&name) else {
                return Err(format!(
                    "--liveness takes short-window or late-image, not {name:?}"
                ));
            };
            opts.liveness = Some(l);
        }
        "--first-seen-order" => opts.first_seen_order = true,
        "--fleet" => {
            let Some(n) = args.next().and_then(|v| v.parse::<usize>().ok()) else {
                return Err("--fleet takes a number of hosts".into());
            };
            if !(3..=8).contains(&n) {
                return Err(format!(
                    "--fleet takes 3 to 8 hosts (one per fault and more), not {n}"
                ));
            }
            opts.fleet = Some(n);
        }
        "--verbose" => *verbose = true,
        "--dry-run" => opts.dry_run = true,
        "--allow-docker-restart" => opts.schedule.docker_restart = true,
        "--seed" | "--bounties" | "--faults" | "--chaos-cycles" | "--soak" => {
            let Some(n) = args.next().and_then(|v| v.parse::<u64>().ok()) else {
                return Err(format!("{flag} takes a number"));
            };
            match flag {
                "--seed" => opts.seed = n,
                "--bounties" => opts.bounties = usize::try_from(n.clamp(1, 50)).unwrap_or(6),
                "--faults" => opts.faults = usize::try_from(n.min(50)).unwrap_or(4),
                "--chaos-cycles" => {
                    opts.schedule.chaos_cycles = u32::try_from(n.clamp(1, 20)).unwrap_or(2);
                }
                _ => *soak = n.max(1),
            }
        }
        other => return Err(format!("unknown chaos argument {other:?}")),
    }
    Ok(())
}

/// Plays `soak` schedules from `opts.seed` on; prints each failure's replay report and the
/// summary table. Exit 0 only when every invariant held in every schedule.
fn run_chaos(
    runtime: &tokio::runtime::Runtime,
    cfg: &E2eConfig,
    opts: ChaosOptions,
    soak: u64,
    verbose: bool,
) -> ExitCode {
    if let Some(hosts) = opts.fleet {
        return run_fleet(runtime, cfg, opts.seed, soak, hosts);
    }
    let mut results = Vec::new();
    for i in 0..soak {
        let o = ChaosOptions {
            seed: opts.seed.wrapping_add(i),
            ..opts
        };
        println!("==> chaos seed {} ({}/{soak})", o.seed, i + 1);
        match runtime.block_on(e2e::chaos::run(cfg, &o)) {
            Ok(r) => {
                if verbose {
                    println!("{}", r.failure_report());
                }
                if r.violations.is_empty() {
                    println!(
                        "    ok: {} cycles, {}/{} faults fired, {:.0}s",
                        r.cycles,
                        r.fired.iter().filter(|(_, f)| *f).count(),
                        r.fired.len(),
                        r.elapsed.as_secs_f64()
                    );
                } else if !verbose {
                    println!("{}", r.failure_report());
                }
                results.push(Ok(r));
            }
            Err(e) => {
                println!(
                    "    driver error (seed {}): {e}\n    replay: {}",
                    o.seed,
                    o.replay_command()
                );
                results.push(Err(format!("seed {}: {e}", o.seed)));
            }
        }
    }
    println!("\n==> chaos summary\n{}", summary_table(&results));
    let clean = results
        .iter()
        .all(|r| r.as_ref().is_ok_and(|r| r.violations.is_empty()));
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The fleet lane (`--fleet N`) on `soak` seeds from `seed`: each run's schedule, faults and
/// violations, then one line per seed. Exit 0 only when every invariant held in every run.
fn run_fleet(
    runtime: &tokio::runtime::Runtime,
    cfg: &E2eConfig,
    seed: u64,
    soak: u64,
    hosts: usize,
) -> ExitCode {
    let mut lines = Vec::new();
    let mut clean = true;
    for i in 0..soak {
        let seed = seed.wrapping_add(i);
        println!("==> chaos fleet seed {seed} ({}/{soak})", i + 1);
        match runtime.block_on(e2e::chaos::fleet::run(cfg, seed, hosts)) {
            Ok(r) => {
                let fired = r.fired.iter().filter(|(_, f, _)| *f).count();
                if r.violations.is_empty() {
                    println!(
                        "    ok: {fired}/{} faults fired, {} runs for {} jobs, {:.0}s",
                        r.fired.len(),
                        r.runs,
                        r.schedule.job_secs.len(),
                        r.elapsed.as_secs_f64()
                    );
                } else {
                    clean = false;
                    println!("{}", r.report());
                }
                lines.push(format!(
                    "| {seed} | {fired}/{} | {} | {} | {:.0} |",
                    r.fired.len(),
                    r.runs,
                    e2e::chaos::broken_invariants(&r.violations),
                    r.elapsed.as_secs_f64()
                ));
            }
            Err(e) => {
                clean = false;
                println!(
                    "    driver error (seed {seed}): {e}\n    replay: target/debug/bounty-e2e chaos --seed {seed} --fleet {hosts}"
                );
                lines.push(format!("| {seed} | - | - | driver error: {e} | - |"));
            }
        }
    }
    println!(
        "\n==> chaos fleet summary\n| seed | faults fired | runs | violations | seconds |\n|---:|---:|---:|---|---:|"
    );
    for l in lines {
        println!("{l}");
    }
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
