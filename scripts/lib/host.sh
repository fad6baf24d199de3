# shellcheck shell=bash
# What the host already provides, and root only where it is needed: the decisions of
# scripts/services.sh that differ between the machines it runs on. Sourced, never executed.
#
# Two hosts are meant (docs/ci.md "What CI proves"):
# - Debian 12 as root, nothing running at first (this project's CI): Debian's docker.io is
#   installed and dockerd started in the background.
# - GitHub's ubuntu-24.04 runner as the `runner` user with password-less sudo: Docker CE
#   (docker-ce, containerd.io) is preinstalled and running under systemd, and the user is in
#   the `docker` group. Installing docker.io there would conflict with docker-ce, so an engine
#   that is already installed or answering is kept, and only apt, systemctl and the
#   debootstrap root use sudo.
#
# Tested with stubbed commands on PATH (scripts/tests/host.sh).

if [[ -n "${VERIFIER_LIB_HOST_LOADED:-}" ]]; then
  return 0
fi
VERIFIER_LIB_HOST_LOADED=1

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

is_root() {
  [[ "$(id -u)" == 0 ]]
}

# as_root CMD [ARGS...]: runs CMD as root: directly when we are root, else through
# non-interactive sudo (a password prompt would hang CI). Fails with the reason otherwise.
as_root() {
  if is_root; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n -- "$@" || {
      local status=$?
      log "sudo -n $1 failed with $status (is password-less sudo allowed for $(id -un)?)"
      return "$status"
    }
  else
    die "$1 needs root: run as root or install sudo with password-less rules for $(id -un)"
  fi
}

pkg_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

docker_answers() {
  timeout 10 docker version >/dev/null 2>&1
}

# docker_engine_present: a Docker Engine is installed or answering, whatever its packaging
# (Debian's docker.io, Docker's docker-ce, moby-engine, a hand-installed dockerd). When it
# is, docker.io must not be installed: it conflicts with docker-ce and would replace the
# runner image's engine.
docker_engine_present() {
  docker_answers && return 0
  command -v dockerd >/dev/null 2>&1 && return 0
  local pkg
  for pkg in docker.io docker-ce moby-engine; do
    pkg_installed "$pkg" && return 0
  done
  return 1
}

# wanted_packages WITH_DEBOOTSTRAP: prints (one per line) the Debian/Ubuntu packages that are
# missing for the test environment; WITH_DEBOOTSTRAP is 1 when a debootstrap image (python,
# rust) is to be built.
wanted_packages() {
  local with_debootstrap="$1" pkg
  # faketime (and its libfaketime): the chaos driver's wall-clock steps (docs/chaos.md).
  # rsync (with its rrsync): the dedicated-host route's signer pull, which an e2e test of
  # scripts/test.sh drives (issue #41: only deploy/tests/run.sh installed it, so README's test
  # command failed on a fresh machine).
  # prometheus: its promtool checks and unit-tests the alert rules and the dashboard's queries
  # (the worker-serve test `monitoring`, issue #46).
  # softhsm2: the token the signer's PKCS#11 backend is tested against (issue #44; each test
  # initialises its own token in a temp dir, so nothing is set up here).
  # postgresql-15: the server `worker serve --ledger postgres://` fleets are tested against
  # (issue #45; scripts/services.sh starts its own cluster under .work/postgres).
  # nftables: the fleet test that drops a Postgres session's packets silently (worker-serve
  # fleet_silent_drop; Debian's docker.io pulls it in, a host with Docker CE may not have it).
  local wanted=(docker-registry busybox-static hyperfine time jq curl ca-certificates tar gzip faketime rsync prometheus softhsm2 postgresql-15 nftables)
  docker_engine_present || wanted+=(docker.io)
  if [[ "$with_debootstrap" == 1 ]]; then
    # debootstrap checks the Debian suite's signature with Debian's keyring, which an Ubuntu
    # host does not have by default.
    wanted+=(debootstrap debian-archive-keyring)
  fi
  for pkg in "${wanted[@]}"; do
    pkg_installed "$pkg" || printf '%s\n' "$pkg"
  done
  # Node may come from a non-Debian build (nodesource bundles npm, the runner image its own),
  # so look for the commands rather than the package names.
  command -v node >/dev/null 2>&1 || printf '%s\n' nodejs
  command -v npm >/dev/null 2>&1 || printf '%s\n' npm
  command -v python3 >/dev/null 2>&1 || printf '%s\n' python3
  python3 -m pip --version >/dev/null 2>&1 || printf '%s\n' python3-pip
  # Ubuntu splits venv's ensurepip out of python3 (scripts/python-deps.sh makes a venv).
  python3 -c 'import ensurepip' >/dev/null 2>&1 || printf '%s\n' python3-venv
}

ensure_packages() {
  step "packages"
  local missing=() debootstrap=0
  if [[ "${WITH_PYTHON:-1}" == 1 || "${WITH_RUST:-1}" == 1 || "${WITH_NODE:-1}" == 1 ]]; then
    debootstrap=1
  fi
  mapfile -t missing < <(wanted_packages "$debootstrap")
  if ((${#missing[@]} == 0)); then
    log "all needed packages are installed"
    return 0
  fi
  if ! is_root && ! command -v sudo >/dev/null 2>&1; then
    die "packages missing (${missing[*]}) and not running as root (nor with sudo) to install them"
  fi
  log "missing: ${missing[*]}; running apt-get update"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
  log "apt-get install ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
}

# systemd_manages UNIT: the host runs systemd and knows UNIT (the runner image's docker.service;
# Debian's docker-registry.service, started by its package on a systemd host). A machine
# without systemd as init (this project's CI VM) answers `offline` or nothing.
systemd_manages() {
  command -v systemctl >/dev/null 2>&1 || return 1
  case "$(systemctl is-system-running 2>/dev/null)" in
  running | degraded | starting | initializing | maintenance) ;;
  *) return 1 ;;
  esac
  systemctl cat "$1" >/dev/null 2>&1
}

# stop_packaged_registry: the docker-registry package starts its own service on a systemd
# host, with the packaged config (basic auth) on port 5000, which is the port our registry
# needs. Stopped, not removed: the package stays for its binary.
stop_packaged_registry() {
  if systemd_manages docker-registry.service && systemctl is-active --quiet docker-registry.service; then
    log "stopping the docker-registry package's own service (it holds port 5000 with the packaged config)"
    as_root systemctl stop docker-registry.service
  fi
}

# --- docker engine --------------------------------------------------------

DOCKERD_PID_FILE="$WORK_DIR/dockerd.pid"

ensure_dockerd() {
  step "docker engine"
  if docker_answers; then
    log "a docker daemon already answers on the default socket; leaving it alone"
    return 0
  fi
  # An engine installed as a systemd service (the runner image's docker-ce) is started the
  # way its package means it to be, not by hand beside systemd.
  if systemd_manages docker.service; then
    log "starting docker.service through systemd"
    as_root systemctl start docker.service
    wait_until 60 "docker daemon" docker_answers ||
      die "docker.service started but the daemon does not answer for $(id -un); is the user in the docker group?"
    return 0
  fi
  is_root || die "no docker daemon answers, and starting one outside systemd needs root (run as root, or start the engine first)"
  # dockerd refuses to start when /var/run/docker.pid names a live process,
  # and its managed containerd trusts containerd.pid the same way; files left
  # by a killed session must go, files of a live daemon must stay.
  if ! clear_stale_pid /var/run/docker.pid dockerd; then
    log "dockerd pid $(read_pid /var/run/docker.pid) is alive but not answering yet; waiting up to 60 s"
    wait_until 60 "docker daemon" docker_answers ||
      die "dockerd (pid $(read_pid /var/run/docker.pid)) is running but /var/run/docker.sock does not answer; see its log or stop it"
    return 0
  fi
  clear_stale_pid /var/run/docker/containerd/containerd.pid containerd || true
  clear_stale_pid "$DOCKERD_PID_FILE" dockerd || true
  mkdir -p "$WORK_DIR"
  log "starting dockerd (log: $WORK_DIR/dockerd.log)"
  setsid nohup dockerd >>"$WORK_DIR/dockerd.log" 2>&1 </dev/null 9>&- &
  local pid=$!
  printf '%s\n' "$pid" >"$DOCKERD_PID_FILE"
  if ! wait_until 90 "docker daemon (pid $pid)" docker_answers; then
    tail -n 20 "$WORK_DIR/dockerd.log" >&2 || true
    if pid_alive "$pid" dockerd; then
      die "dockerd (pid $pid) did not answer within 90 s; log: $WORK_DIR/dockerd.log"
    fi
    rm -f "$DOCKERD_PID_FILE"
    die "dockerd exited during startup; log: $WORK_DIR/dockerd.log"
  fi
}
