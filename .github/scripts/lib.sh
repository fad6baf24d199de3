# shellcheck shell=bash
# Shared by the workflow scripts: GitHub REST calls and step outputs. Sourced, not run.
#
# The REST base comes from GITHUB_API_URL (set on every Actions runner; the tests point it at
# a local stand-in), the token from GH_TOKEN. No token value is ever printed.

# GitHub's REST budget for GITHUB_TOKEN is 1,000 requests per hour per repository
# (docs/operations.md "REST budget"). A 429, a 403 that is a rate limit (x-ratelimit-remaining
# 0, or a secondary limit's message or Retry-After) and a 5xx are retried, at most
# API_MAX_ATTEMPTS times in all (default 4): after Retry-After seconds when given, else until
# x-ratelimit-reset, else after API_RETRY_BASE_SECONDS * 2^attempt (default 2: 2, 4, 8 s). A
# wait longer than API_MAX_WAIT_SECONDS (default 120) is not slept: the call fails at once,
# naming the reset time, so a spent hourly budget ends the job instead of holding it. Any other
# status (404, a permission 403) is not retried.
#
#   api_request <path> <body file> [extra curl args...]  -> 0, or 1 with an ::error-ready message on stderr
api_request() {
  local path="$1" body="$2"
  shift 2
  local attempts="${API_MAX_ATTEMPTS:-4}" base="${API_RETRY_BASE_SECONDS:-2}"
  local max_wait="${API_MAX_WAIT_SECONDS:-120}" attempt=1 headers code wait retry_after remaining reset
  headers="$(mktemp)"
  while true; do
    code="$(curl --silent --show-error --max-time 300 \
      --header "Authorization: Bearer ${GH_TOKEN:?GH_TOKEN is not set}" \
      --header "X-GitHub-Api-Version: 2022-11-28" \
      --dump-header "${headers}" --output "${body}" --write-out '%{http_code}' \
      "$@" "${GITHUB_API_URL:-https://api.github.com}${path}")" || code=000
    if [[ "${code}" =~ ^2 ]]; then
      rm -f "${headers}"
      return 0
    fi
    # The last response's headers (a redirect writes several blocks), lower-cased names.
    retry_after="$(tr -d '\r' < "${headers}" | awk -F': *' 'tolower($1) == "retry-after" { v = $2 } END { print v }')"
    remaining="$(tr -d '\r' < "${headers}" | awk -F': *' 'tolower($1) == "x-ratelimit-remaining" { v = $2 } END { print v }')"
    reset="$(tr -d '\r' < "${headers}" | awk -F': *' 'tolower($1) == "x-ratelimit-reset" { v = $2 } END { print v }')"
    wait=""
    case "${code}" in
      429 | 5?? | 000) ;;
      403)
        if [[ "${remaining}" != 0 && -z "${retry_after}" ]] && ! grep -qi "rate limit" "${body}" 2>/dev/null; then
          echo "GET ${path}: HTTP 403 (not a rate limit; not retried)" >&2
          rm -f "${headers}"
          return 1
        fi
        ;;
      *)
        echo "GET ${path}: HTTP ${code}" >&2
        rm -f "${headers}"
        return 1
        ;;
    esac
    if [[ "${retry_after}" =~ ^[0-9]+$ ]]; then
      wait="${retry_after}"
    elif [[ "${remaining}" == 0 && "${reset}" =~ ^[0-9]+$ ]]; then
      wait=$((reset - $(date +%s) + 1))
      ((wait > 0)) || wait=1
    else
      wait=$((base * (1 << attempt)))
    fi
    if ((attempt >= attempts)); then
      echo "GET ${path}: HTTP ${code} after ${attempt} attempt(s); giving up" >&2
      rm -f "${headers}"
      return 1
    fi
    if ((wait > max_wait)); then
      echo "GET ${path}: HTTP ${code}, the REST rate limit is spent until $(date -u -d "@${reset:-0}" +%H:%M:%SZ 2>/dev/null || echo "${reset}") (a ${wait} s wait, over the ${max_wait} s bound); not waiting" >&2
      rm -f "${headers}"
      return 1
    fi
    echo "GET ${path}: HTTP ${code}; retrying in ${wait} s (attempt $((attempt + 1)) of ${attempts})" >&2
    sleep "${wait}"
    attempt=$((attempt + 1))
  done
}

api_get() {
  local path="$1" body status=0
  body="$(mktemp)"
  api_request "${path}" "${body}" --header "Accept: application/vnd.github+json" || status=$?
  ((status == 0)) && cat "${body}"
  rm -f "${body}"
  return "${status}"
}

# A list endpoint, every page (per_page=100), printed as one JSON object whose <key> array
# holds every item. Stops at a page shorter than 100 or once total_count items are in hand,
# and refuses past API_MAX_PAGES (default 10, 1,000 items) rather than spend the budget.
#
#   api_get_all <path with its query, without per_page/page> <key>
api_get_all() {
  local path="$1" key="$2" sep="?" page=1 items='[]' body total n
  [[ "${path}" == *\?* ]] && sep="&"
  while true; do
    if ((page == 1)); then
      body="$(api_get "${path}${sep}per_page=100")" || return 1
    else
      body="$(api_get "${path}${sep}per_page=100&page=${page}")" || return 1
    fi
    n="$(jq --arg k "${key}" '.[$k] | length' <<<"${body}")" || return 1
    items="$(jq -c --arg k "${key}" --argjson acc "${items}" '$acc + .[$k]' <<<"${body}")" || return 1
    total="$(jq -r '.total_count // empty' <<<"${body}")"
    if ((n < 100)) || [[ -n "${total}" && "$(jq length <<<"${items}")" -ge "${total}" ]]; then
      break
    fi
    if ((page >= ${API_MAX_PAGES:-10})); then
      echo "GET ${path}: more than ${API_MAX_PAGES:-10} pages of ${key}; refused" >&2
      return 1
    fi
    page=$((page + 1))
  done
  jq -cn --arg k "${key}" --argjson v "${items}" '{($k): $v}'
}

# Appends key=value to the step's outputs.
output() {
  printf '%s=%s\n' "$1" "$2" >> "${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set}"
}

# Appends a line to the job's summary (shown on the run's page).
summary() {
  printf '%s\n' "$*" >> "${GITHUB_STEP_SUMMARY:-/dev/null}"
}

# Downloads an API resource (following GitHub's redirect to its storage) to a file, with the
# same retries as api_get. curl sends the token to the API host only, never to the redirect's
# host.
api_download() {
  local path="$1" dest="$2"
  api_request "${path}" "${dest}" --location
}

# Downloads artifact ID's zip to DIR.zip and unpacks it into DIR (made here). Returns 1 when
# the download fails; 2, with the reason on stdout, when the artifact is unusable: an unreadable
# zip, or anything but regular files and directories in it (a symlink would let a later read
# leave DIR).
artifact_unpack() {
  local id="$1" dir="$2"
  mkdir -p "${dir}"
  api_download "/repos/${GITHUB_REPOSITORY}/actions/artifacts/${id}/zip" "${dir}.zip" || return 1
  if ! unzip -q "${dir}.zip" -d "${dir}" >/dev/null 2>&1; then
    echo "not a readable zip"
    return 2
  fi
  if [[ -n "$(find "${dir}" ! -type f ! -type d -print -quit)" ]]; then
    echo "holds something other than regular files (a symlink?)"
    return 2
  fi
}

# The shard of a job id among `count` shards, as `worker feed --shard` computes it
# (crates/worker-jobs/src/feed/shard.rs): the first 8 bytes of sha256(id), big-endian, mod count.
# Bash integers are signed 64-bit, so the u64 is reduced in two 32-bit halves:
# (hi * 2^32 + lo) mod n = ((hi mod n) * (2^32 mod n) + lo) mod n, exact for n <= 2^31.
shard_of() {
  local id="$1" count="$2" digest hi lo
  digest="$(printf '%s' "${id}" | sha256sum | cut -c1-16)"
  hi=$((16#${digest:0:8}))
  lo=$((16#${digest:8:8}))
  echo $((((hi % count) * ((1 << 32) % count) + lo) % count))
}

# The workflows' Base RPC endpoints (#43 item 2). REGRESSION_VERIFIER_RPC_URL is one URL or an
# ordered, comma-separated list. Blanks (spaces, tabs, newlines: a pasted secret) around an
# entry and empty entries are dropped; an entry is otherwise kept as it is: a blank inside one
# is kept, so the binary refuses the URL instead of being handed a different one. A list with
# no entry is the default endpoint, as the workflows' `|| 'https://mainnet.base.org'` makes an
# unset one.
#
#   rpc_endpoints <name of the array to fill> <list>   -> the URLs, in order
#   rpc_args <name of the array to fill> <list>        -> --rpc URL for each, in order: the
#                                                         signer and the keeper fail over
#                                                         between them (docs/operations.md
#                                                         "RPC outage")
RPC_DEFAULT_URL=https://mainnet.base.org
rpc_endpoints() {
  local -n _rpc_urls="$1"
  local _rpc_entry
  local -a _rpc_entries=()
  _rpc_urls=()
  # -d '': the whole value, not its first line.
  IFS=, read -r -d '' -a _rpc_entries <<<"$2" || true
  for _rpc_entry in "${_rpc_entries[@]}"; do
    _rpc_entry="${_rpc_entry#"${_rpc_entry%%[![:space:]]*}"}"
    _rpc_entry="${_rpc_entry%"${_rpc_entry##*[![:space:]]}"}"
    [[ -z "${_rpc_entry}" ]] || _rpc_urls+=("${_rpc_entry}")
  done
  ((${#_rpc_urls[@]} > 0)) || _rpc_urls=("${RPC_DEFAULT_URL}")
}
rpc_args() {
  local -n _rpc_args="$1"
  local _rpc_url
  local -a _rpc_list=()
  rpc_endpoints _rpc_list "$2"
  _rpc_args=()
  for _rpc_url in "${_rpc_list[@]}"; do
    _rpc_args+=(--rpc "${_rpc_url}")
  done
}
