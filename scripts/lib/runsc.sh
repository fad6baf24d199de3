# shellcheck shell=bash
# gVisor's runsc as a second OCI runtime of the Docker daemon (issue #28): Debian's `runsc`
# package, registered as `runtimes.runsc` in the daemon's daemon.json. Sourced, never
# executed; scripts/services.sh --runsc calls ensure_runsc after ensure_dockerd.
#
# The flags, and why (found on this project's Debian 12 VM, cgroup v1 with a cgroup2 mount at
# /sys/fs/cgroup/unified, runsc 0.0~20221219):
# - --platform=ptrace: the kvm platform hung on these hosts (a VM, nested virtualisation).
# - --network=none: `docker run --network none --runtime runsc` does not start unless runsc
#   itself is told there is no network; the sandbox's netstack then has loopback only.
# Limits are not flags here: the worker sets them per container (docs/operators.md "A second kernel: gVisor").
#
# Tested with stubbed commands on PATH (scripts/tests/host.sh).

if [[ -n "${VERIFIER_LIB_RUNSC_LOADED:-}" ]]; then
  return 0
fi
VERIFIER_LIB_RUNSC_LOADED=1

# shellcheck source=scripts/lib/host.sh
source "$(dirname "${BASH_SOURCE[0]}")/host.sh"

RUNSC_RUNTIME_ARGS=(--platform=ptrace --network=none)
# Overridable for the stubbed tests only; the daemon reads /etc/docker/daemon.json.
DOCKER_DAEMON_JSON="${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
DOCKER_PID_FILE="${DOCKER_PID_FILE:-/var/run/docker.pid}"

# runsc_entry PATH: the `runtimes.runsc` value this project registers, as compact JSON.
runsc_entry() {
  # From stdin, not --args: jq 1.6 takes a positional `--platform=…` for its own option.
  printf '%s\n' "${RUNSC_RUNTIME_ARGS[@]}" | jq -R . | jq -cs --arg path "$1" '{path: $path, runtimeArgs: .}'
}

# merged_daemon_json FILE ENTRY: prints FILE's settings with `runtimes.runsc` = ENTRY, every
# other setting (and every other runtime) kept as it is. A missing or empty FILE is `{}`.
# Fails, printing the reason, when FILE is not a JSON object or already registers a
# different `runsc`: an operator's runsc (another platform, other flags) is theirs to
# change, not ours to overwrite.
merged_daemon_json() {
  local file="$1" entry="$2" current existing
  if [[ -s "$file" ]]; then
    current="$(cat "$file")" || return 1
  else
    current='{}'
  fi
  if ! jq -e 'type == "object"' >/dev/null 2>&1 <<<"$current"; then
    echo "$file is not a JSON object; fix it by hand (the Docker daemon would not start with it either)"
    return 1
  fi
  existing="$(jq -c '.runtimes.runsc // empty' <<<"$current")"
  if [[ -n "$existing" && "$(jq -S . <<<"$existing")" != "$(jq -S . <<<"$entry")" ]]; then
    echo "$file already registers runtimes.runsc as $existing, not $entry; change or remove that entry by hand"
    return 1
  fi
  jq --argjson entry "$entry" '.runtimes.runsc = $entry' <<<"$current"
}

# daemon_runsc_entry: the `runsc` runtime the running daemon has loaded, as compact JSON
# with sorted keys, or nothing.
daemon_runsc_entry() {
  local runtimes
  runtimes="$(timeout 10 docker info --format '{{json .Runtimes}}' 2>/dev/null)" || return 0
  jq -cS '.runsc // empty | {path, runtimeArgs: (.runtimeArgs // [])}' <<<"$runtimes" 2>/dev/null || true
}

daemon_has_entry() {
  [[ "$(daemon_runsc_entry)" == "$(jq -cS . <<<"$1")" ]]
}

# reload_dockerd: makes the running daemon re-read daemon.json. dockerd reloads `runtimes`
# on SIGHUP without stopping containers (a restart would kill every running container,
# other tests' included). Through systemd where it manages the engine (the runner image's
# docker.service has ExecReload=kill -HUP), else to the pid in /var/run/docker.pid.
reload_dockerd() {
  if systemd_manages docker.service && systemctl is-active --quiet docker.service; then
    log "systemctl reload docker.service"
    as_root systemctl reload docker.service
    return
  fi
  local pid
  pid="$(read_pid "$DOCKER_PID_FILE")"
  pid_alive "$pid" dockerd || die "no live dockerd in $DOCKER_PID_FILE to reload (pid '${pid}')"
  log "SIGHUP to dockerd (pid $pid): reload daemon.json"
  as_root kill -HUP "$pid"
}

# ensure_runsc: installs Debian's runsc when missing, registers it in daemon.json (merged,
# written only when it changes) and reloads the daemon only when the daemon's loaded
# `runsc` differs from what is registered. Fails closed: a daemon that does not list the
# runtime afterwards is an error, not a skip.
ensure_runsc() {
  step "gVisor runsc as the Docker runtime 'runsc'"
  if ! command -v runsc >/dev/null 2>&1; then
    log "runsc missing; apt-get install runsc"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q runsc >&2 || {
      as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q runsc >&2
    } || die "could not install the runsc package (gVisor); the runsc tests need it"
  fi
  local path entry merged tmp reason
  path="$(command -v runsc)"
  log "$(runsc --version 2>/dev/null | head -n 1) at $path"
  entry="$(runsc_entry "$path")"
  if ! merged="$(merged_daemon_json "$DOCKER_DAEMON_JSON" "$entry")"; then
    reason="$merged"
    die "$reason"
  fi
  if [[ -s "$DOCKER_DAEMON_JSON" ]] && [[ "$(jq -S . "$DOCKER_DAEMON_JSON")" == "$(jq -S . <<<"$merged")" ]]; then
    log "$DOCKER_DAEMON_JSON already registers runsc"
  else
    tmp="$(mktemp)"
    printf '%s\n' "$merged" >"$tmp"
    as_root mkdir -p "$(dirname "$DOCKER_DAEMON_JSON")"
    # Written beside and renamed: a daemon reloading meanwhile never reads half a file.
    as_root install -m 0644 "$tmp" "$DOCKER_DAEMON_JSON.new"
    as_root mv -f "$DOCKER_DAEMON_JSON.new" "$DOCKER_DAEMON_JSON"
    rm -f "$tmp"
    log "wrote runtimes.runsc into $DOCKER_DAEMON_JSON (other settings kept)"
  fi
  if daemon_has_entry "$entry"; then
    log "the daemon already offers runsc ($entry); not reloading"
    return 0
  fi
  reload_dockerd
  wait_until "${RUNSC_WAIT_SECONDS:-60}" "docker daemon with runtime runsc" daemon_has_entry "$entry" ||
    die "the daemon does not list runtime runsc = $entry after a reload (it keeps the old settings when daemon.json is invalid; see its log)"
}
