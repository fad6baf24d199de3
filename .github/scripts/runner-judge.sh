#!/usr/bin/env bash
# Judges a `worker feed` batch from its exit status and JSON report, writes the step summary
# (counts per outcome) and annotations, and fails the run when the runner could not work.
#
# Green: every job has a candidate, was skipped or rejected by rule, or ended without a verdict
# because of the solution's own limits (timeout, output cap, out of memory); the next cycle
# retries those. Red: the platform API did not answer (fetch failures), a job hit an
# infrastructure error, the engine or an image failed (image missing or mismatched, create
# failed, isolation mismatch, runtime unavailable, stopped from outside, internal error), the
# feed was invalid, or the worker exited with anything but 0 or 3. An outage must not end
# green all the way down the pipeline.
#
#   runner-judge.sh <worker exit status> <feed-report.json>
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

status="$1"
report="$2"

# No-verdict reasons that are the solution's own doing; every other reason means this runner
# could not do its work.
solver_reasons='["timeout", "output_limit", "oom"]'

if [[ ! -s "${report}" ]] || ! jq -e . "${report}" >/dev/null 2>&1; then
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
while IFS=$'\t' read -r verifier kind message; do
  echo "::error::the platform API failed for ${verifier} (${kind}): ${message}"
  problems=$((problems + 1))
done < <(jq -r '.fetch_failures[] | [.verifier, .kind, .message] | @tsv' "${report}")
while IFS=$'\t' read -r job reason detail; do
  echo "::error::job ${job}: ${reason}: ${detail}"
  problems=$((problems + 1))
done < <(jq -r --argjson solver "${solver_reasons}" '
  .jobs[]
  | select(.status == "error" or (.status == "no_verdict" and ((.reason_code // "") as $r | $solver | index($r) | not)))
  | [.job_id, (.reason_code // "unknown"), (.reason // "")] | @tsv' "${report}")
while IFS=$'\t' read -r job reason; do
  echo "::warning::job ${job}: no verdict (${reason}); the next cycle retries it"
done < <(jq -r --argjson solver "${solver_reasons}" '
  .jobs[] | select(.status == "no_verdict" and ((.reason_code // "") as $r | $solver | index($r)))
  | [.job_id, .reason_code] | @tsv' "${report}")

case "${status}" in
  0 | 3) ;;
  *)
    echo "::error::worker feed exited with ${status}"
    problems=$((problems + 1))
    ;;
esac
if ((problems > 0)); then
  summary ""
  summary "**Failed**: ${problems} problem(s) this runner could not work around (see the annotations)."
  exit 1
fi
summary ""
summary "Batch finished."
