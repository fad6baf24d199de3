//! `worker reproduce`: re-run a verdict from public data (a job from the platform, a
//! candidate file, or a settlement transaction) and say whether it holds. The comparison is
//! the library's; this maps its answer to an exit code and prints it.

use std::time::Duration;

use bounty_chain::{RpcChainReader, SettlementReadError, check_job_against_state};
use platform_client::PlatformClient;
use verifier_sdk::{Address, Bytes32, ValidatedJob};

use super::local_run;
use super::{print_json, print_text};
use crate::cli::ReproduceArgs;
use crate::exit::ExitCode;
use worker_jobs::reproduce::{
    Finding, Reference, ReproduceError, ReproduceReport, candidate_reference, check_settled_job,
    read_candidate, reproduce as run_reproduction,
};

/// Bound on each JSON-RPC request.
const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// The exit code of a finding (docs/reference.md "Exit codes"; never renumbered).
pub fn finding_exit_code(finding: &Finding) -> ExitCode {
    match finding {
        Finding::BitForBit { .. } | Finding::Reproduced { .. } => ExitCode::Success,
        Finding::VerdictReproduced { .. } => ExitCode::Differs,
        Finding::Disagrees { .. } => ExitCode::Disagrees,
        Finding::NoVerdict { .. } => ExitCode::NotDone,
    }
}

fn error_exit_code(e: &ReproduceError) -> ExitCode {
    match e {
        ReproduceError::Unavailable { code, .. } if code == "runtime_unavailable" => {
            ExitCode::Unavailable
        }
        ReproduceError::Unavailable { .. } => ExitCode::Unavailable,
        ReproduceError::File { .. } | ReproduceError::Output(_) => ExitCode::Internal,
        ReproduceError::TermsDiffer(_) => ExitCode::TermsDiffer,
        _ => ExitCode::InvalidInput,
    }
}

fn settlement_exit_code(e: &SettlementReadError) -> ExitCode {
    match e {
        SettlementReadError::Chain(c) if c.is_transient() => ExitCode::Unavailable,
        SettlementReadError::Chain(_) => ExitCode::Config,
        _ => ExitCode::InvalidInput,
    }
}

/// What the command line asked for, resolved into a job and a reference.
async fn resolve(
    args: &ReproduceArgs,
    client: &PlatformClient,
) -> Result<(ValidatedJob, Reference, Option<String>), (ExitCode, String)> {
    let invalid = |e: &dyn std::fmt::Display| (ExitCode::InvalidInput, e.to_string());
    let fetch = |api: String, verifier: Address, job_id: String| async move {
        let raw = local_run::fetch_job(client, &args.run, &api, verifier, &job_id)
            .await?
            .ok_or_else(|| {
                invalid(&ReproduceError::JobNotFound {
                    job_id: job_id.clone(),
                    verifier,
                })
            })?;
        // Another verification mode's job is valid but not ours: named, before any rule.
        if let Some(mode) = verifier_sdk::other_verification_mode(&raw) {
            return Err(invalid(&ReproduceError::OtherVerificationMode {
                job_id,
                mode,
            }));
        }
        // Structural rules only: a settled or expired job is still reproduced.
        ValidatedJob::parse(&raw).map_err(|e| invalid(&ReproduceError::Job(e)))
    };
    if let Some(tx) = &args.tx {
        let tx: Bytes32 = tx
            .parse()
            .map_err(|_| invalid(&"--tx is not a 0x-prefixed 32-byte hash"))?;
        let rpc = args
            .rpc
            .as_deref()
            .ok_or_else(|| invalid(&"--tx needs --rpc"))?;
        let reader = RpcChainReader::new(rpc, RPC_TIMEOUT)
            .map_err(|e| (ExitCode::Config, format!("--rpc: {e}")))?;
        let (settlement, before) = reader
            .read_settlement_and_state(tx, None)
            .await
            .map_err(|e| (settlement_exit_code(&e), e.to_string()))?;
        let job = if let Some(path) = &args.candidate {
            read_candidate(path).map_err(|e| invalid(&e))?.job().clone()
        } else {
            let api = args
                .api
                .clone()
                .ok_or_else(|| invalid(&"--tx needs --api (to fetch the job) or --candidate"))?;
            let verifier = settlement
                .attestations
                .first()
                .map(|a| a.verifier)
                .ok_or_else(|| invalid(&"the settlement has no attestation"))?;
            let job_id = format!(
                "{}:{}:{}",
                args.run.network.name(),
                settlement.bounty.to_string().to_lowercase(),
                settlement.round
            );
            fetch(api, verifier, job_id).await?
        };
        check_settled_job(&job, &settlement).map_err(|e| invalid(&e))?;
        // The signer's own chain check, on the state the signatures were made over: a job
        // served with another runner manifest (or criteria, or evidence schema) than the bounty
        // funded keeps the policy, submission and evidence hashes the signatures bind, so
        // only the terms hashes tell it is not the bounty's.
        check_job_against_state(&job, &before).map_err(|refusal| {
            let e = ReproduceError::TermsDiffer(refusal.to_string());
            (error_exit_code(&e), e.to_string())
        })?;
        let summary = format!(
            "settlement   {tx}: {} (verdict `{}`) by {} attestation(s)",
            if settlement.passed {
                "BountySettled"
            } else {
                "SubmissionRejected"
            },
            if settlement.passed {
                "passed"
            } else {
                "failed"
            },
            settlement.attestations.len()
        );
        return Ok((job, Reference::Settlement(settlement), Some(summary)));
    }
    if let Some(path) = &args.candidate {
        let candidate = read_candidate(path).map_err(|e| invalid(&e))?;
        let reference = candidate_reference(&candidate);
        return Ok((candidate.job().clone(), reference, None));
    }
    let (Some(job_id), Some(api), Some(verifier)) =
        (args.job_id.clone(), args.api.clone(), args.verifier)
    else {
        return Err(invalid(
            &"give --job-id ID --api URL --verifier ADDRESS, --candidate FILE, or --tx HASH --rpc URL",
        ));
    };
    let job = fetch(api, verifier, job_id).await?;
    Ok((job, Reference::JobOnly, None))
}

/// The report for a reader: the settlement (with `--tx`), the job, the reference's verdict and
/// each distinct response hash once, the reproduction's (a hash the reference also carries is
/// not printed again), where its evidence is kept, and the answer.
fn human(report: &ReproduceReport, context: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(c) = context {
        out.push_str(&format!("{c}\n"));
    }
    out.push_str(&format!("job          {}\n", report.job_id));
    let mut hashes: Vec<Bytes32> = Vec::new();
    for h in &report.reference_response_hashes {
        if !hashes.contains(h) {
            hashes.push(*h);
        }
    }
    if report.reference != "job" {
        let label = if report.reference == "settlement" {
            "settled"
        } else {
            "claimed"
        };
        let verdict = report.reference_verdict.map_or_else(
            || "verdict unknown".to_owned(),
            |v| format!("verdict `{}`", v.as_str()),
        );
        let listed: Vec<String> = hashes.iter().map(ToString::to_string).collect();
        let hashes_said = match listed.len() {
            0 => String::new(),
            1 => format!(", response hash {}", listed[0]),
            _ => format!(", response hashes {}", listed.join(", ")),
        };
        out.push_str(&format!("{label:<12} {verdict}{hashes_said}\n"));
    }
    match (report.reproduced_verdict, report.reproduced_response_hash) {
        (Some(v), Some(h)) if hashes.contains(&h) => out.push_str(&format!(
            "reproduction verdict `{}`, the same response hash\n",
            v.as_str()
        )),
        (Some(v), Some(h)) => out.push_str(&format!(
            "reproduction verdict `{}`, response hash {h}\n",
            v.as_str()
        )),
        _ => out.push_str("reproduction no verdict\n"),
    }
    if let Some(f) = &report.candidate_file {
        out.push_str(&format!("evidence     {}\n", f.display()));
    }
    out.push_str(&format!("{}\n", report.headline()));
    if let Finding::NoVerdict { detail, .. } = &report.finding
        && !detail.is_empty()
    {
        out.push_str(&format!("  ({detail})\n"));
    }
    if let Finding::VerdictReproduced { lines, note, .. } = &report.finding {
        for l in lines {
            out.push_str(&format!("  {}\n", l.describe()));
        }
        if let Some(n) = note {
            out.push_str(&format!("  ({n})\n"));
        }
    }
    worker_sandbox::explain::terminal_safe(&out)
}

/// Runs `worker reproduce`.
pub fn reproduce(args: &ReproduceArgs, quiet: bool) -> ExitCode {
    let work = async |client: &PlatformClient, root| {
        let (job, reference, context) = resolve(args, client).await?;
        let config = local_run::feed_config(&args.run, args.api.as_deref(), &job, quiet);
        let job_executor = local_run::job_executor(&args.run, root).await?;
        run_reproduction(&config, client, &job_executor, &job, &reference)
            .await
            .map(|r| (r, context))
            .map_err(|e| (error_exit_code(&e), e.to_string()))
    };
    // The result is stdout's: the report as JSON with --json, else for a reader.
    local_run::run(&args.run, "the reproduction", work, |(report, context)| {
        let printed = if args.json {
            print_json(&report)
        } else {
            print_text(&human(&report, context.as_deref()))
        };
        if printed != ExitCode::Success {
            return ExitCode::Internal;
        }
        finding_exit_code(&report.finding)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use verifier_sdk::Verdict;
    use worker_jobs::reproduce::REPRODUCE_SCHEMA_VERSION;

    fn settled(
        verdict: Verdict,
        hashes: Vec<Bytes32>,
        own: Bytes32,
        finding: Finding,
    ) -> ReproduceReport {
        ReproduceReport {
            schema_version: REPRODUCE_SCHEMA_VERSION,
            job_id: "base-mainnet:0x11:1".into(),
            reference: "settlement",
            reference_verdict: Some(verdict),
            reference_response_hashes: hashes,
            reproduced_verdict: Some(verdict),
            reproduced_response_hash: Some(own),
            candidate_file: Some("repro/candidate-1.json".into()),
            finding,
        }
    }

    #[test]
    fn reproduce_says_which_verdict_was_reproduced_and_prints_a_hash_once() {
        let h = Bytes32::from_bytes([0x5a; 32]);
        let report = settled(
            Verdict::Failed,
            vec![h, h],
            h,
            Finding::BitForBit {
                response_hash: h,
                verifiers: Vec::new(),
            },
        );
        let text = human(
            &report,
            Some("settlement   0xabc: SubmissionRejected (verdict `failed`) by 2 attestation(s)"),
        );
        assert!(
            text.contains("reproduced bit for bit: the chain's verdict `failed` was reproduced"),
            "{text}"
        );
        assert!(!text.contains("reproduced failed"), "{text}");
        assert_eq!(text.matches(&h.to_string()).count(), 1, "{text}");
        let line = text.lines().find(|l| l.contains(&h.to_string())).unwrap();
        assert!(
            line.starts_with("settled ") && line.contains("response hash"),
            "{text}"
        );
        assert!(
            text.contains("reproduction verdict `failed`, the same response hash"),
            "{text}"
        );
    }

    #[test]
    fn reproduce_lists_each_settled_hash_and_its_own_when_the_output_differs() {
        let (a, b, own) = (
            Bytes32::from_bytes([1; 32]),
            Bytes32::from_bytes([2; 32]),
            Bytes32::from_bytes([3; 32]),
        );
        let report = settled(
            Verdict::Passed,
            vec![a, b],
            own,
            Finding::VerdictReproduced {
                verdict: Verdict::Passed,
                differences: Vec::new(),
                lines: Vec::new(),
                note: None,
            },
        );
        let text = human(&report, None);
        assert!(
            text.contains(&format!("response hashes {a}, {b}")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "reproduction verdict `passed`, response hash {own}"
            )),
            "{text}"
        );
        assert!(
            text.contains(
                "verdict reproduced; output differs: the chain's verdict `passed` was reproduced"
            ),
            "{text}"
        );
        assert_eq!(finding_exit_code(&report.finding), ExitCode::Differs);
    }

    #[test]
    fn reproduce_of_a_job_alone_names_its_verdict_without_a_reference() {
        let own = Bytes32::from_bytes([4; 32]);
        let mut report = settled(
            Verdict::Passed,
            Vec::new(),
            own,
            Finding::Reproduced {
                verdict: Verdict::Passed,
            },
        );
        report.reference = "job";
        report.reference_verdict = None;
        let text = human(&report, None);
        assert!(!text.contains("settled"), "{text}");
        assert!(text.contains("the job's verdict is `passed`"), "{text}");
        assert_eq!(text.matches(&own.to_string()).count(), 1, "{text}");
    }
}
