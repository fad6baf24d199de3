# shellcheck shell=bash
# Shared by the workflow scripts: GitHub REST calls and step outputs. Sourced, not run.
#
# The REST base comes from GITHUB_API_URL (set on every Actions runner; the tests point it at
# a local stand-in), the token from GH_TOKEN. No token value is ever printed.

api_get() {
  local path="$1"
  curl --silent --show-error --fail --max-time 30 \
    --header "Authorization: Bearer ${GH_TOKEN:?GH_TOKEN is not set}" \
    --header "Accept: application/vnd.github+json" \
    --header "X-GitHub-Api-Version: 2022-11-28" \
    "${GITHUB_API_URL:-https://api.github.com}${path}"
}

# Appends key=value to the step's outputs.
output() {
  printf '%s=%s\n' "$1" "$2" >> "${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set}"
}

# Appends a line to the job's summary (shown on the run's page).
summary() {
  printf '%s\n' "$*" >> "${GITHUB_STEP_SUMMARY:-/dev/null}"
}

# Downloads an API resource (following GitHub's redirect to its storage) to a file. curl
# sends the token to the API host only, never to the redirect's host.
api_download() {
  local path="$1" dest="$2"
  curl --silent --show-error --fail --location --max-time 300 \
    --header "Authorization: Bearer ${GH_TOKEN:?GH_TOKEN is not set}" \
    --header "X-GitHub-Api-Version: 2022-11-28" \
    --output "${dest}" \
    "${GITHUB_API_URL:-https://api.github.com}${path}"
}

# The shard of a job id among `count` shards, as `worker feed --shard` computes it
# (crates/worker/src/feed/shard.rs): the first 8 bytes of sha256(id), big-endian, mod count.
# Bash integers are signed 64-bit, so the u64 is reduced in two 32-bit halves:
# (hi * 2^32 + lo) mod n = ((hi mod n) * (2^32 mod n) + lo) mod n, exact for n <= 2^31.
shard_of() {
  local id="$1" count="$2" digest hi lo
  digest="$(printf '%s' "${id}" | sha256sum | cut -c1-16)"
  hi=$((16#${digest:0:8}))
  lo=$((16#${digest:8:8}))
  echo $((((hi % count) * ((1 << 32) % count) + lo) % count))
}
