#!/usr/bin/env bash
# Judges a `worker feed` batch from its exit status and JSON report, writes the step summary
# (counts per outcome, a row per job without a verdict) and annotations, and fails the run
# only when this runner could not work.
#
# A failed run signs nothing of the whole batch (signer-gate.sh, collect-shards.sh), so what
# belongs to one bounty or one job must not fail it: that job would sit in every batch (no
# verdict is cached, jobs sort by expiry) and stop every other job's signature, every cycle.
#
# Per job (a `::warning`, a summary row, the run stays green and signable; the next cycle
# retries the job):
# - the solution's own limits: timeout, output_limit, oom;
# - the bounty author's or the job's: image_missing, image_platform_mismatch (the manifest's
#   image is not pullable for linux/amd64), start_failed (the manifest's command does not
#   exist in the image), invalid_job, expired, and a transient archive error (download_*,
#   extract_failed: the solver's or benchmark's archive host did not deliver).
# Whole runner (`::error`, the run fails, nothing of it is signed):
# - the platform API did not answer (fetch failures), the worker exited with anything but 0
#   or 3 (5: the Docker Engine is unreachable; 4: the feed was invalid; 78; 1);
# - the report counts runtime_unavailable, or a job ended with a reason that says this
#   runner's engine or sandbox is not sound: runtime_unavailable, isolation_mismatch,
#   create_failed, externally_stopped, input_mismatch, image_digest_mismatch,
#   internal_error, and every `error` status other than the archive ones above (executor,
#   scratch, output, digest or evidence failures);
# Whole run (`runner-judge.sh --run <shard report>...`, the runner's `Judge the run` job, once
# over every shard's report):
# - every job of the run (two or more, over every shard) failing the same per-job way (all
#   image_missing, all download_http): that is the registry or the archive host unreachable
#   from this runner, not every bounty author at once. A solution limit is never counted here
#   (a run of timeouts is the solutions'). A run of one failing job is one bounty, a warning.
#   Skipped jobs are not counted in "every job": they never ran (another verifier set, another
#   shard, the platform's other verification mode, which it serves to every verifier, so most
#   batches hold some).
#   Judged per run, not per shard (#51 item 4): one author's two broken bounties hashed into
#   the same shard are every job of that shard, and a red shard fails the run, so nothing of
#   any shard would be signed. A shard whose every job failed the same way is a warning; the
#   run fails only when every shard that ran a job failed that way, and then there is nothing
#   of it to sign anyway.
# A `skipped` job (other_verifier_set, other_verification_mode, not_requested, other_shard,
# max_jobs) is never a problem, nor is a job `rejected` by rule.
# An unknown reason counts as the runner's: fail closed.
#
#   runner-judge.sh <worker exit status> <feed-report.json>    one shard
#   runner-judge.sh --run <feed-report.json>...                 the whole run
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

solver_reasons='["timeout", "output_limit", "oom"]'

# The reason every job that ran failed with, when two or more ran and all failed the same
# per-job way (not a solution limit); nothing otherwise. Reads one or more reports.
same_way() {
  jq -rs --argjson solver "${solver_reasons}" '
    [.[].jobs[] | select(.status != "skipped")] as $ran
    | [$ran[] | select(.status == "no_verdict" or .status == "error") | .reason_code // "unknown"] as $r
    | if ($r | length) == ($ran | length) and ($r | length) >= 2 and ($r | unique | length) == 1
         and (($solver | index($r[0])) | not)
      then $r[0] else empty end' "$@"
}
readable() { [[ -s "$1" ]] && jq -e '(.jobs | type == "array") and (.fetch_failures | type == "array")' "$1" >/dev/null 2>&1; }

if [[ "${1:-}" == --run ]]; then
  shift
  reports=()
  for report in "$@"; do
    if readable "${report}"; then
      reports+=("${report}")
    else
      # Its shard's job is red already (it judged no report); the rest is judged here.
      echo "::warning::${report}: no readable shard report (that shard's own job says why)"
    fi
  done
  summary "### Runner run (${#reports[@]} shard report(s) of $#)"
  if ((${#reports[@]} > 0)); then
    ran="$(jq -s '[.[].jobs[] | select(.status != "skipped")] | length' "${reports[@]}")"
    shards_ran="$(jq -s '[.[] | select([.jobs[] | select(.status != "skipped")] | length > 0)] | length' "${reports[@]}")"
    same="$(same_way "${reports[@]}")"
    if [[ -n "${same}" ]]; then
      echo "::error::every job of the run (${ran}, in ${shards_ran} shard(s)) ended ${same}: this runner cannot reach what they need (registry, archive host); not one bounty's fault"
      summary "**Failed**: every job of the run (${ran}) ended ${same}; nothing of it had a verdict to sign."
      exit 1
    fi
  fi
  summary "No run-wide failure: what failed belongs to its bounties or jobs (see each shard's summary)."
  exit 0
fi

status="$1"
report="$2"
bounty_reasons='["image_missing", "image_platform_mismatch", "start_failed", "invalid_job", "expired"]'
# `error` codes of a transient archive fault (crates/worker-jobs/src/feed/runner.rs): the job's
# archive host, not this runner.
archive_error='^(download_[a-z_]+|extract_failed)$'

if ! readable "${report}"; then
  echo "::error::worker feed exited with ${status} and wrote no readable report"
  summary "Runner failed: worker feed exited with ${status} and wrote no readable report."
  exit 1
fi

summary "### Runner batch (worker feed exited with ${status})"
summary ""
summary "| outcome | jobs |"
summary "|---|---|"
while IFS=$'\t' read -r outcome count; do
  summary "| ${outcome} | ${count} |"
done < <(jq -r '.jobs | group_by(.status) | .[] | [.[0].status, length] | @tsv' "${report}")
fetch_failures="$(jq '.fetch_failures | length' "${report}")"
summary "| fetch failures | ${fetch_failures} |"

problems=0
runner_problem() {
  echo "::error::$*"
  problems=$((problems + 1))
}
while IFS=$'\t' read -r verifier kind message; do
  runner_problem "the platform API failed for ${verifier} (${kind}): ${message}"
done < <(jq -r '.fetch_failures[] | [.verifier, .kind, .message] | @tsv' "${report}")
runtime_unavailable="$(jq '.runtime_unavailable // 0' "${report}")"
if [[ "${runtime_unavailable}" != 0 ]]; then
  runner_problem "the container runtime was unavailable for ${runtime_unavailable} job(s) (runtime_unavailable)"
fi

# Each job that ended without a candidate for a reason: <id> <status> <class> <reason> <detail>,
# class `solver`, `job` (the bounty's or the job's own) or `runner`.
classified="$(jq -r --argjson solver "${solver_reasons}" --argjson bounty "${bounty_reasons}" --arg archive "${archive_error}" '
  .jobs[]
  | select(.status == "no_verdict" or .status == "error" or (.status == "rejected" and .reason_code == "expired"))
  | (.reason_code // "unknown") as $r
  | (if .status == "error" then (if ($r | test($archive)) then "job" else "runner" end)
     elif ($solver | index($r)) then "solver"
     elif ($bounty | index($r)) then "job"
     else "runner" end) as $class
  | [.job_id, .status, $class, $r, ((.reason // "") | gsub("[\t\n\r]"; " "))] | @tsv' "${report}")"

per_job_rows=()
while IFS=$'\t' read -r job job_status class reason detail; do
  [[ -n "${job}" ]] || continue
  case "${class}" in
    runner) runner_problem "job ${job}: ${reason}: ${detail}" ;;
    *)
      # An expired job rejected by rule is the normal end of a job, not worth a warning.
      [[ "${job_status}" == rejected ]] && continue
      echo "::warning::job ${job}: no verdict (${reason}); the next cycle retries it"
      per_job_rows+=("| ${job} | ${reason} | ${detail} |")
      ;;
  esac
done <<<"${classified}"

# Every job of this shard failing the same per-job way may be one author's bounties hashed
# together, or the runner's reach: only the run's judge (--run, over every shard) can tell.
same="$(same_way "${report}")"
if [[ -n "${same}" ]] && ! grep -q $'\trunner\t' <<<"${classified}"; then
  echo "::warning::every job of this shard ended ${same}; the run's judge fails the run if every shard's did"
fi

case "${status}" in
  0 | 3) ;;
  *) runner_problem "worker feed exited with ${status}" ;;
esac

if ((${#per_job_rows[@]} > 0)); then
  summary ""
  summary "Jobs without a verdict this cycle (the bounty's, the job's or the solution's own; retried next cycle, the rest is signed):"
  summary ""
  summary "| job | reason | detail |"
  summary "|---|---|---|"
  for row in "${per_job_rows[@]}"; do summary "${row}"; done
fi
if ((problems > 0)); then
  summary ""
  summary "**Failed**: ${problems} problem(s) this runner could not work around (see the annotations); nothing of this run is signed."
  exit 1
fi
summary ""
summary "Batch finished."
