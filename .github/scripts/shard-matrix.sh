#!/usr/bin/env bash
# Sizes the runner's shard matrix from the repository variable `REGRESSION_SHARDS`: unset or
# empty means 1 shard (the whole feed on one VM); otherwise a whole number from 1 to 16. Any
# other value fails the job: a typo must not silently run one shard (or none) while the
# operator believes the feed is spread out.
#
# Writes `count=<n>` and `shards=[0,…,n-1]` (JSON, for `strategy.matrix`) to GITHUB_OUTPUT.
#
# Env: REGRESSION_SHARDS, GITHUB_OUTPUT.
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

max=16
value="${REGRESSION_SHARDS:-}"
if [[ -z "${value}" ]]; then
  count=1
elif [[ "${value}" =~ ^[1-9][0-9]?$ ]] && ((value <= max)); then
  count="${value}"
else
  echo "::error::vars.REGRESSION_SHARDS must be a whole number from 1 to ${max} (or unset for 1), not '${value}'"
  summary "Runner not started: vars.REGRESSION_SHARDS is '${value}', not a whole number from 1 to ${max}."
  exit 1
fi
shards="$(jq -cn --argjson n "${count}" '[range($n)]')"
output count "${count}"
output shards "${shards}"
echo "${count} shard(s): ${shards}"
summary "Feed split over ${count} shard(s) (\`worker feed --shard i/${count}\`)."
