# shellcheck shell=bash
# Shared helpers for scripts/*.sh. Sourced, never executed.
#
# Everything a script prints about what it is doing goes to stderr so that
# stdout stays free for machine-readable output.

if [[ -n "${VERIFIER_LIB_COMMON_LOADED:-}" ]]; then
  return 0
fi
VERIFIER_LIB_COMMON_LOADED=1

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK_DIR="$REPO_ROOT/.work"

log() {
  printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2
}

step() {
  printf '\n[%s] == %s\n' "$(date -u +%H:%M:%S)" "$*" >&2
}

die() {
  printf '[%s] error: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2
  exit 1
}

# pid_alive PID NAME: true when PID is a live process whose command name is
# NAME. A pid file can outlive its process (the machine's processes are killed
# between sessions) and the number can be reused by an unrelated process, so
# both must hold before we trust the file.
pid_alive() {
  local pid="$1" name="$2" comm
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/comm" ]] || return 1
  comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
  [[ "$comm" == "$name" ]]
}

# read_pid FILE: prints the pid stored in FILE, or nothing.
read_pid() {
  local file="$1"
  [[ -f "$file" ]] || return 0
  tr -dc '0-9' <"$file" || true
}

# clear_stale_pid FILE NAME: removes FILE when the process it names is not a
# live NAME. Returns 0 when the file is gone afterwards, 1 when a live NAME
# still owns it.
clear_stale_pid() {
  local file="$1" name="$2" pid
  [[ -e "$file" ]] || return 0
  pid="$(read_pid "$file")"
  if pid_alive "$pid" "$name"; then
    return 1
  fi
  log "removing stale pid file $file (pid '${pid}' is not a running $name)"
  rm -f "$file"
}

# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.5 s.
wait_until() {
  local limit="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      return 1
    fi
    sleep 0.5
  done
  log "$what is ready"
}

# stop_pid_file FILE NAME: SIGTERM the live NAME named by FILE, wait up to 30 s,
# SIGKILL if it is still there, then remove FILE.
stop_pid_file() {
  local file="$1" name="$2" pid
  if [[ ! -e "$file" ]]; then
    log "$name: no pid file $file, nothing to stop"
    return 0
  fi
  pid="$(read_pid "$file")"
  if ! pid_alive "$pid" "$name"; then
    log "$name: pid '${pid}' from $file is not running; removing the file"
    rm -f "$file"
    return 0
  fi
  log "$name: stopping pid $pid"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while pid_alive "$pid" "$name"; do
    if ((SECONDS >= deadline)); then
      log "$name: pid $pid ignored SIGTERM for 30 s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 1
      break
    fi
    sleep 0.5
  done
  rm -f "$file"
  log "$name: stopped"
}

sha256_file() {
  sha256sum "$1" | cut -d' ' -f1
}
