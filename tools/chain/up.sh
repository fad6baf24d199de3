#!/usr/bin/env bash
# Starts (or stops) the local Hardhat chain used by the tests: chain id 8453 on 127.0.0.1:8545.
#
#   tools/chain/up.sh          install deps if needed, start the node unless it already answers
#   tools/chain/up.sh down     stop the node this script started (pid file under .work/)
#
# Idempotent: safe to call when the node is already running or the deps already installed.
# Logs go to <repo>/.work/hardhat.log, the pid to <repo>/.work/hardhat.pid.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$repo/.work"
pid_file="$work/hardhat.pid"
log_file="$work/hardhat.log"
rpc="http://127.0.0.1:8545"
expected_chain_id="0x2105"
wait_seconds="${CHAIN_UP_TIMEOUT:-90}"

chain_id() {
  # Prints the node's chain id, or nothing when no node answers.
  curl -s --max-time 2 -X POST -H 'content-type: application/json' \
    --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "$rpc" 2>/dev/null |
    sed -n 's/.*"result":"\(0x[0-9a-fA-F]*\)".*/\1/p' || true
}

our_pid() {
  # Prints the pid from the pid file only when that process is alive and is a hardhat node,
  # so a recycled pid is never signalled.
  [[ -f "$pid_file" ]] || return 0
  local pid
  pid="$(cat "$pid_file")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'hardhat.* node'; then
    echo "$pid"
  fi
}

down() {
  local pid
  pid="$(our_pid)"
  if [[ -z "$pid" ]]; then
    echo "chain: no node started by up.sh is running"
    rm -f "$pid_file"
    return 0
  fi
  # The node was started with setsid, so it leads its own process group; end that group only.
  kill -- "-$pid" 2>/dev/null || kill "$pid"
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  rm -f "$pid_file"
  echo "chain: stopped node (pid $pid)"
}

ensure_deps() {
  npm_ci "$here" hardhat
  # Ganache, the remote signer the keeper's eth_signTransaction backend is tested against
  # (issue #44 item 4): the Hardhat node does not implement that method. The tests start it.
  npm_ci "$repo/tools/remote-signer" ganache
}

npm_ci() {
  # node_modules is stale when package-lock.json changed since the last install; the stamp
  # holds the lock file's hash at install time.
  local dir="$1" package="$2" stamp want log
  stamp="$dir/node_modules/.lock-sha256"
  log="$work/npm-ci-$(basename "$dir").log"
  want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [[ ! -d "$dir/node_modules/$package" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "chain: installing npm dependencies in $dir (npm ci)"
    (cd "$dir" && npm ci --no-audit --no-fund >"$log" 2>&1) || {
      echo "chain: npm ci failed; see $log" >&2
      tail -n 30 "$log" >&2
      exit 1
    }
    echo "$want" >"$stamp"
  fi
}

up() {
  mkdir -p "$work"
  # Installed even when a node already answers: compile.js --check and the tests need solc
  # from this tree's node_modules whoever started the node.
  ensure_deps
  local current
  current="$(chain_id)"
  if [[ -n "$current" ]]; then
    if [[ "$current" == "$expected_chain_id" ]]; then
      echo "chain: already running on $rpc (chain id $current)"
      return 0
    fi
    echo "chain: something on $rpc answers chain id $current, expected $expected_chain_id" >&2
    exit 1
  fi

  echo "chain: starting hardhat node on $rpc (log $log_file)"
  (
    cd "$here"
    HARDHAT_DISABLE_TELEMETRY_PROMPT=true exec setsid "$here/node_modules/.bin/hardhat" node \
      --hostname 127.0.0.1 --port 8545 </dev/null >"$log_file" 2>&1
  ) &
  local pid=$!
  echo "$pid" >"$pid_file"

  for _ in $(seq 1 $((wait_seconds * 2))); do
    current="$(chain_id)"
    if [[ "$current" == "$expected_chain_id" ]]; then
      echo "chain: ready (chain id $current, pid $pid)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "chain: hardhat node exited during startup; last log lines:" >&2
      tail -n 30 "$log_file" >&2
      rm -f "$pid_file"
      exit 1
    fi
    sleep 0.5
  done
  echo "chain: node did not answer chain id $expected_chain_id within ${wait_seconds}s; log $log_file" >&2
  exit 1
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *)
    echo "usage: $0 [up|down]" >&2
    exit 2
    ;;
esac
