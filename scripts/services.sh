#!/usr/bin/env bash
# Brings up the real test environment (docs/design.md §7): Docker Engine, a local
# registry on 127.0.0.1:5000, digest-pinned test images listed in
# .work/images.json, and the local chain. Runs on Debian 12 as root (this
# project's CI) and on GitHub's ubuntu-24.04 runner as its user, where the
# preinstalled Docker CE is kept and only apt, systemctl and the debootstrap
# root go through sudo (scripts/lib/host.sh).
#
#   scripts/services.sh [--no-python] [--no-rust] [--no-node] [--runsc]   bring everything up (idempotent)
#   --runsc also installs Debian's runsc (gVisor) and registers it with the Docker daemon as
#   the runtime `runsc` (scripts/lib/runsc.sh); .ci/run always passes it, scripts/example.sh
#   does not (it runs under runc only). Without it an earlier registration is left alone.
#   scripts/services.sh down            stop what this script started
#
# Progress goes to stderr. Safe to rerun: whatever already answers is left
# alone, and unchanged image inputs reproduce the same digests.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=scripts/lib/image.sh
source "$REPO_ROOT/scripts/lib/image.sh"
# shellcheck source=scripts/lib/host.sh
source "$REPO_ROOT/scripts/lib/host.sh"
# shellcheck source=scripts/lib/runsc.sh
source "$REPO_ROOT/scripts/lib/runsc.sh"

export DEBIAN_FRONTEND=noninteractive

REGISTRY_PID_FILE="$WORK_DIR/registry.pid"
CHAIN_PID_FILE="$WORK_DIR/chain.pid"
REGISTRY_DIR="$WORK_DIR/registry"
IMAGES_JSON="$WORK_DIR/images.json"
DEBOOTSTRAP_MIRROR="${DEBOOTSTRAP_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_SUITE=bookworm
PYTHON_INCLUDE=python3
RUST_INCLUDE=cargo,libc6-dev
NODE_INCLUDE=nodejs

usage() {
  cat >&2 <<'USAGE'
usage: scripts/services.sh [--no-python] [--no-rust] [--no-node] [--runsc]
       scripts/services.sh down
USAGE
}

# --- packages and docker engine: scripts/lib/host.sh (ensure_packages, ensure_dockerd)

# --- local registry -------------------------------------------------------

registry_answers() {
  curl -sf -o /dev/null --max-time 5 "http://$REGISTRY_ADDR/v2/"
}

write_registry_config() {
  local config="$REGISTRY_DIR/config.yml" tmp
  mkdir -p "$REGISTRY_DIR/data"
  tmp="$(mktemp "$REGISTRY_DIR/config.yml.XXXXXX")"
  # No auth section: the registry only listens on loopback and holds test
  # images. Deletion stays off so a digest once served keeps being served.
  cat >"$tmp" <<YAML
version: 0.1
log:
  level: warn
  formatter: text
storage:
  filesystem:
    rootdirectory: $REGISTRY_DIR/data
http:
  addr: $REGISTRY_ADDR
YAML
  if cmp -s "$tmp" "$config"; then
    rm -f "$tmp"
  else
    mv "$tmp" "$config"
    log "wrote $config"
  fi
}

ensure_registry() {
  step "local registry on $REGISTRY_ADDR"
  write_registry_config
  stop_packaged_registry
  if registry_answers; then
    log "a registry already answers on http://$REGISTRY_ADDR/v2/; leaving it alone"
    return 0
  fi
  if ! clear_stale_pid "$REGISTRY_PID_FILE" docker-registry; then
    local old
    old="$(read_pid "$REGISTRY_PID_FILE")"
    log "registry pid $old is alive but not answering; waiting up to 20 s"
    wait_until 20 "registry" registry_answers && return 0
    die "docker-registry (pid $old) runs but http://$REGISTRY_ADDR/v2/ does not answer; log: $WORK_DIR/registry.log"
  fi
  log "starting docker-registry serve $REGISTRY_DIR/config.yml (log: $WORK_DIR/registry.log)"
  setsid nohup docker-registry serve "$REGISTRY_DIR/config.yml" \
    >>"$WORK_DIR/registry.log" 2>&1 </dev/null 9>&- &
  local pid=$!
  printf '%s\n' "$pid" >"$REGISTRY_PID_FILE"
  if ! wait_until 30 "registry (pid $pid)" registry_answers; then
    tail -n 20 "$WORK_DIR/registry.log" >&2 || true
    pid_alive "$pid" docker-registry || rm -f "$REGISTRY_PID_FILE"
    die "registry did not answer on http://$REGISTRY_ADDR/v2/ within 30 s (is the port taken?); log: $WORK_DIR/registry.log"
  fi
}

# --- images ---------------------------------------------------------------

busybox_binary() {
  # Take the binary from the busybox-static package itself: a dynamically
  # linked busybox from the plain `busybox` package would not run in a
  # scratch image.
  local bin
  bin="$(dpkg -L busybox-static 2>/dev/null | grep -m1 '/bin/busybox$' || true)"
  [[ -n "$bin" && -x "$bin" ]] || die "no static busybox found (package busybox-static)"
  printf '%s\n' "$bin"
}

busybox_layer() {
  local out="$1" bin="$2" stage applet
  stage="$out/rootfs"
  rm -rf "$stage"
  mkdir -p "$stage/bin" "$stage/tmp"
  cp -a "$REPO_ROOT/images/busybox/rootfs/." "$stage/"
  cp "$bin" "$stage/bin/busybox"
  normalize_modes "$stage"
  for applet in $("$stage/bin/busybox" --list); do
    [[ "$applet" =~ ^[a-z0-9._\[-]+$ && "$applet" != busybox ]] || continue
    [[ -e "$stage/bin/$applet" || -L "$stage/bin/$applet" ]] || ln -s busybox "$stage/bin/$applet"
  done
  chmod 1777 "$stage/tmp"
  build_layer "$stage" "$out" --owner=0 --group=0 --mtime=@0
  rm -rf "$stage"
}

build_busybox() {
  step "image verifier-busybox"
  local bin key out="$WORK_DIR/images/busybox"
  bin="$(busybox_binary)"
  key="$(printf 'busybox=%s\nfiles=%s\n' "$(sha256_file "$bin")" "$(hash_tree "$REPO_ROOT/images/busybox/rootfs")")"
  build_cached busybox "$key" "$out" "$REPO_ROOT/images/busybox/config.json" busybox_layer "$bin"
  BUSYBOX_REF="$(push_and_load verifier-busybox "$out")"
  log "busybox image: $BUSYBOX_REF"
}

unmount_under() {
  local dir="$1" target
  # An interrupted debootstrap leaves proc/sys mounted inside its target;
  # removing the tree with those still mounted would reach into the host.
  findmnt -rn -o TARGET | awk -v d="$dir" 'index($0, d "/") == 1' | sort -r |
    while IFS= read -r target; do
      log "unmounting leftover $target"
      as_root umount -l "$target" || true
    done
}

# debootstrap_root NAME KEY INCLUDE PROBE...: builds (or reuses) the debootstrap root
# .work/images/NAME-root with the packages INCLUDE (comma-separated) and the files of
# images/NAME/rootfs; PROBE (a command run in the root, e.g. /usr/bin/python3 -c pass)
# must succeed. Prints the root's path.
debootstrap_root() {
  local name="$1" key="$2" include="$3"
  shift 3
  local root="$WORK_DIR/images/$name-root" probe_bin="$1"
  if [[ -f "$root.key" && "$(cat "$root.key")" == "$key" && -x "$root$probe_bin" ]]; then
    log "reusing debootstrap root $root (key ${key:0:12})"
    printf '%s\n' "$root"
    return 0
  fi
  local tmp="$root.tmp" debootstrap_log="$WORK_DIR/debootstrap-$name.log"
  unmount_under "$tmp"
  unmount_under "$root"
  as_root rm -rf --one-file-system "$tmp" "$root"
  rm -f "$root.key"
  log "debootstrap --variant=minbase --include=$include $DEBIAN_SUITE (mirror $DEBOOTSTRAP_MIRROR); this takes a few minutes"
  as_root debootstrap --variant=minbase --include="$include" "$DEBIAN_SUITE" "$tmp" "$DEBOOTSTRAP_MIRROR" \
    >"$debootstrap_log" 2>&1 || {
    tail -n 30 "$debootstrap_log" >&2 || true
    unmount_under "$tmp"
    die "debootstrap failed; log: $debootstrap_log"
  }
  unmount_under "$tmp"
  # Package indexes and caches are large and useless in a test image.
  as_root rm -rf --one-file-system "$tmp"/var/lib/apt/lists/* "$tmp"/var/cache/apt/*.bin \
    "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/log/* "$tmp"/dev/*
  if [[ -d "$REPO_ROOT/images/$name/rootfs" ]]; then
    as_root cp -a "$REPO_ROOT/images/$name/rootfs/." "$tmp/"
  fi
  as_root chmod 1777 "$tmp/tmp"
  as_root chroot "$tmp" "$@" >/dev/null || die "$* in the $name debootstrap root does not run"
  as_root mv "$tmp" "$root"
  printf '%s\n' "$key" >"$root.key"
  printf '%s\n' "$root"
}

# root_layer OUT ROOT: the layer of a debootstrap root.
root_layer() {
  local out="$1" root="$2"
  local args=(--anchored --exclude='proc/*' --exclude='sys/*' --exclude='dev/*')
  # Real owners and mtimes are kept: the root is cached, so they are stable,
  # and .pyc files are validated against their sources' mtimes.
  if is_root; then
    build_layer "$root" "$out" "${args[@]}"
    return 0
  fi
  # The debootstrap root holds files only root may read (/etc/shadow, /root): tar it as
  # root, then hand the outputs back to this user.
  # shellcheck disable=SC2016 # expanded by the root shell, from its arguments
  as_root bash -c 'source "$1" && shift && build_layer "$@"' _ \
    "$REPO_ROOT/scripts/lib/image.sh" "$root" "$out" "${args[@]}"
  as_root chown "$(id -u):$(id -g)" "$out/layer.tar.gz" "$out/diff_id" "$out/layer_digest"
}

# root_key NAME INCLUDE: what a debootstrap root is built from. Unchanged inputs give the
# same key, so the root (hence the image digest) is reused.
root_key() {
  printf 'suite=%s\nvariant=minbase\ninclude=%s\narch=%s\nfiles=%s\n' \
    "$DEBIAN_SUITE" "$2" "$(dpkg --print-architecture)" \
    "$(hash_tree "$REPO_ROOT/images/$1/rootfs")" | sha256sum | cut -d' ' -f1
}

# debian_image NAME INCLUDE PROBE...: the image verifier-NAME, a debootstrap root of Debian's
# INCLUDE packages (PROBE, run in the root, shows they work) with images/NAME's config, built
# unless its cache is current, pushed and loaded; sets IMAGE_REF to its pinned reference.
debian_image() {
  local name="$1" include="$2" key root out="$WORK_DIR/images/$1"
  shift 2
  step "image verifier-$name"
  key="$(root_key "$name" "$include")"
  root="$(debootstrap_root "$name" "$key" "$include" "$@")"
  build_cached "$name" "$key" "$out" "$REPO_ROOT/images/$name/config.json" root_layer "$root"
  IMAGE_REF="$(push_and_load "verifier-$name" "$out")"
  log "$name image: $IMAGE_REF"
}

build_python() {
  debian_image python "$PYTHON_INCLUDE" /usr/bin/python3 -c pass
  PYTHON_REF="$IMAGE_REF"
}

# Debian's own cargo and rustc (1.63 in bookworm), which pull in gcc and binutils as the
# linker. libc6-dev is named because rustc depends on the virtual libc-dev, which
# debootstrap's resolver does not follow. No registry index or crate cache is baked in: a benchmark's dependencies come
# vendored in its source (manifests/README.md says how).
build_rust() {
  debian_image rust "$RUST_INCLUDE" /usr/bin/cargo --version
  RUST_REF="$IMAGE_REF"
}

# Debian's nodejs (18 in bookworm), for `node --test` benchmarks. No npm and no packages:
# a benchmark's dependencies come vendored (node_modules in the source or the benchmark).
build_node() {
  debian_image node "$NODE_INCLUDE" /usr/bin/node --version
  NODE_REF="$IMAGE_REF"
}

# keep_image NAME: the pinned reference of an image an earlier run built, if the engine
# still has it, so --no-NAME does not take away what tests may already rely on.
keep_image() {
  local name="$1" old
  [[ -f "$WORK_DIR/images/$name/manifest_digest" ]] || return 0
  old="$REGISTRY_ADDR/verifier-$name@sha256:$(cat "$WORK_DIR/images/$name/manifest_digest")"
  if docker image inspect "$old" >/dev/null 2>&1; then
    log "keeping the $name image from an earlier run: $old"
    printf '%s\n' "$old"
  fi
}

write_images_json() {
  step "images.json"
  local content tmp
  content="$(jq -nc --arg busybox "$BUSYBOX_REF" --arg python "${PYTHON_REF:-}" --arg rust "${RUST_REF:-}" \
    --arg node "${NODE_REF:-}" \
    '{busybox: $busybox, python: $python, rust: $rust, node: $node} | with_entries(select(.value != ""))')"
  tmp="$(mktemp "$WORK_DIR/images.json.XXXXXX")"
  printf '%s\n' "$content" >"$tmp"
  if cmp -s "$tmp" "$IMAGES_JSON"; then
    rm -f "$tmp"
    log "$IMAGES_JSON unchanged"
  else
    mv "$tmp" "$IMAGES_JSON"
    log "wrote $IMAGES_JSON"
  fi
  cat "$IMAGES_JSON" >&2
}

# --- chain ----------------------------------------------------------------

ensure_chain() {
  step "local chain"
  if [[ -f "$REPO_ROOT/tools/chain/up.sh" ]]; then
    log "running tools/chain/up.sh"
    bash "$REPO_ROOT/tools/chain/up.sh" >&2 9>&- || die "tools/chain/up.sh failed"
  else
    log "tools/chain/up.sh does not exist yet; skipping the chain"
  fi
}

# --- postgres -------------------------------------------------------------
#
# The fleet ledger's tests (`worker serve --ledger postgres://`, issue #45) need a real server.
# Its own cluster under .work/postgres, listening on loopback only (and a socket inside the
# cluster folder), never the host's packaged cluster. initdb refuses to run as root, so as
# root the cluster belongs to Debian's `postgres` account. Tests connect as the role
# verifier_test (LOGIN CREATEDB, no superuser) with a password generated once; the URL is
# written to .work/postgres.url, where tests read it ($VERIFIER_TEST_POSTGRES_URL overrides).

PG_BIN=/usr/lib/postgresql/15/bin
PG_DIR="$WORK_DIR/postgres"
PG_DATA="$PG_DIR/data"
PG_PORT="${VERIFIER_TEST_POSTGRES_PORT:-55432}"
PG_PORT_FILE="$PG_DIR/port"
PG_URL_FILE="$WORK_DIR/postgres.url"
PG_ROLE=verifier_test

# as_cluster_owner CMD...: CMD as the cluster's owner (postgres when we are root).
as_cluster_owner() {
  if is_root; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# Asked over the cluster's own socket, not the port: a second checkout on the same machine (a
# clean clone beside a working tree) must not take another checkout's server for its own.
postgres_answers() {
  as_cluster_owner "$PG_BIN/pg_isready" -q -h "$PG_DIR" -p "$PG_PORT" -t 2
}

port_listens() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# choose_postgres_port: a cluster keeps the port it was created with (recorded beside it); a
# new one takes the first port from $PG_PORT up that nothing listens on, so two work folders on
# one machine get two clusters instead of the second failing on the first one's port.
choose_postgres_port() {
  if [[ -s "$PG_PORT_FILE" ]]; then
    PG_PORT="$(cat "$PG_PORT_FILE")"
    return
  fi
  if [[ -f "$PG_DATA/postgresql.conf" ]]; then
    local configured
    configured="$(sed -n 's/^port = \([0-9]\+\)$/\1/p' "$PG_DATA/postgresql.conf" | tail -n 1)"
    [[ -n "$configured" ]] && PG_PORT="$configured"
  else
    local first="$PG_PORT"
    while port_listens "$PG_PORT"; do
      PG_PORT=$((PG_PORT + 1))
      ((PG_PORT < first + 100)) || die "no free port for postgres in $first..$PG_PORT"
    done
  fi
  printf '%s\n' "$PG_PORT" >"$PG_PORT_FILE"
}

# psql_admin SQL: runs SQL as the cluster's superuser over the cluster's own socket.
psql_admin() {
  as_cluster_owner "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_DIR" -p "$PG_PORT" -d postgres -tAc "$1"
}

ensure_postgres() {
  [[ -x "$PG_BIN/initdb" ]] || die "$PG_BIN/initdb is missing (apt-get install postgresql-15)"
  mkdir -p "$PG_DIR"
  choose_postgres_port
  step "postgres on 127.0.0.1:$PG_PORT"
  if is_root; then
    chown postgres:postgres "$PG_DIR" "$PG_PORT_FILE"
  fi
  chmod 0700 "$PG_DIR"
  if [[ ! -f "$PG_DATA/PG_VERSION" ]]; then
    local pwfile
    pwfile="$(mktemp)"
    # The superuser gets a random password nobody keeps: it is reached over the socket only
    # (peer authentication), never over TCP.
    head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$pwfile"
    is_root && chown postgres "$pwfile"
    log "initdb $PG_DATA"
    as_cluster_owner "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --pwfile="$pwfile" \
      --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$WORK_DIR/postgres-initdb.log" 2>&1 ||
      { rm -f "$pwfile"; tail -n 20 "$WORK_DIR/postgres-initdb.log" >&2; die "initdb failed"; }
    rm -f "$pwfile"
    as_cluster_owner tee -a "$PG_DATA/postgresql.conf" >/dev/null <<CONF
# scripts/services.sh: loopback only, a port of its own, the socket inside the cluster folder.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_DIR'
max_connections = 200
fsync = on
CONF
    # Only loopback TCP with a password and the owner's socket; nothing else may connect.
    as_cluster_owner tee "$PG_DATA/pg_hba.conf" >/dev/null <<HBA
local all postgres peer
host all all 127.0.0.1/32 scram-sha-256
HBA
  fi
  if postgres_answers; then
    log "postgres already answers on 127.0.0.1:$PG_PORT; leaving it running"
  else
    log "pg_ctl start (log: $PG_DIR/server.log)"
    # fd 9 closed: the server must not hold services.lock after this script exits.
    as_cluster_owner "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DIR/server.log" -w -t 60 start >&2 9>&- ||
      { tail -n 20 "$PG_DIR/server.log" >&2 || true; die "postgres did not start on 127.0.0.1:$PG_PORT (is the port taken?)"; }
  fi
  local password_file="$PG_DIR/$PG_ROLE.password" password
  if [[ ! -s "$password_file" ]]; then
    (umask 077 && head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$password_file")
  fi
  password="$(cat "$password_file")"
  if [[ "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname = '$PG_ROLE'")" != 1 ]]; then
    log "creating role $PG_ROLE (LOGIN CREATEDB, no superuser)"
    psql_admin "CREATE ROLE $PG_ROLE LOGIN CREATEDB NOSUPERUSER NOCREATEROLE PASSWORD '$password'"
  else
    psql_admin "ALTER ROLE $PG_ROLE PASSWORD '$password'"
  fi
  if [[ "$(psql_admin "SELECT 1 FROM pg_database WHERE datname = '$PG_ROLE'")" != 1 ]]; then
    log "creating database $PG_ROLE"
    psql_admin "CREATE DATABASE $PG_ROLE OWNER $PG_ROLE"
  fi
  local url="postgres://$PG_ROLE:$password@127.0.0.1:$PG_PORT/$PG_ROLE" tmp
  tmp="$(mktemp "$WORK_DIR/postgres.url.XXXXXX")"
  printf '%s\n' "$url" >"$tmp"
  if cmp -s "$tmp" "$PG_URL_FILE"; then
    rm -f "$tmp"
  else
    mv "$tmp" "$PG_URL_FILE"
    log "wrote $PG_URL_FILE"
  fi
}

stop_postgres() {
  if [[ -f "$PG_DATA/postmaster.pid" ]]; then
    as_cluster_owner "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >&2 || log "pg_ctl stop failed"
  else
    log "postgres: nothing to stop"
  fi
}

# --- main -----------------------------------------------------------------

down() {
  step "stopping services started by scripts/services.sh"
  if [[ -f "$REPO_ROOT/tools/chain/down.sh" ]]; then
    log "running tools/chain/down.sh"
    bash "$REPO_ROOT/tools/chain/down.sh" >&2 9>&- || log "tools/chain/down.sh failed"
  elif [[ -e "$CHAIN_PID_FILE" ]]; then
    stop_pid_file "$CHAIN_PID_FILE" node
  else
    log "chain: nothing to stop"
  fi
  stop_pid_file "$REGISTRY_PID_FILE" docker-registry
  stop_postgres
  stop_pid_file "$DOCKERD_PID_FILE" dockerd
}

up() {
  local started=$SECONDS
  mkdir -p "$WORK_DIR"
  ensure_packages
  ensure_dockerd
  if [[ "$WITH_RUNSC" == 1 ]]; then
    ensure_runsc
  fi
  ensure_registry
  ensure_postgres
  build_busybox
  PYTHON_REF=""
  if [[ "$WITH_PYTHON" == 1 ]]; then
    build_python
  else
    log "--no-python: skipping the python image"
    PYTHON_REF="$(keep_image python)"
  fi
  RUST_REF=""
  if [[ "$WITH_RUST" == 1 ]]; then
    build_rust
  else
    log "--no-rust: skipping the rust image"
    RUST_REF="$(keep_image rust)"
  fi
  NODE_REF=""
  if [[ "$WITH_NODE" == 1 ]]; then
    build_node
  else
    log "--no-node: skipping the node image"
    NODE_REF="$(keep_image node)"
  fi
  write_images_json
  ensure_chain
  step "done in $((SECONDS - started)) s"
}

WITH_PYTHON=1
WITH_RUST=1
WITH_NODE=1
WITH_RUNSC=0
MODE=up
for arg in "$@"; do
  case "$arg" in
  --no-python) WITH_PYTHON=0 ;;
  --no-rust) WITH_RUST=0 ;;
  --no-node) WITH_NODE=0 ;;
  --runsc) WITH_RUNSC=1 ;;
  up) MODE=up ;;
  down) MODE=down ;;
  -h | --help)
    usage
    exit 0
    ;;
  *)
    usage
    die "unknown argument: $arg"
    ;;
  esac
done

cd "$REPO_ROOT"
mkdir -p "$WORK_DIR"
# Two concurrent runs would race on the build folders and both start a
# registry; the second waits for the first instead. Every long-lived child
# is started with fd 9 closed, or it would hold the lock after we exit.
exec 9>"$WORK_DIR/services.lock"
if ! flock -n 9; then
  log "another scripts/services.sh holds $WORK_DIR/services.lock; waiting up to 15 minutes"
  flock -w 900 9 || die "timed out waiting for $WORK_DIR/services.lock"
fi
case "$MODE" in
up) up ;;
down) down ;;
esac
