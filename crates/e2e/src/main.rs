//! `bounty-e2e`: plays the "settled" and "rejected" bounties on the local services and prints
//! each step (see the library docs). Exit 0 only when both end on chain as they must.
//!
//!   bounty-e2e [--repo DIR] [--bin-dir DIR] [--work-dir DIR] [settled|rejected]...
//!
//! Defaults: the repository is the current directory, the binaries sit next to this one,
//! the work directory is `<repo>/.work/e2e`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use e2e::{E2eConfig, Scenario, run_scenario};

fn usage(msg: &str) -> ExitCode {
    eprintln!("bounty-e2e: {msg}");
    eprintln!(
        "usage: bounty-e2e [--repo DIR] [--bin-dir DIR] [--work-dir DIR] [settled|rejected]..."
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
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
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
    let work_dir = work_dir.unwrap_or_else(|| repo.join(".work/e2e"));
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
