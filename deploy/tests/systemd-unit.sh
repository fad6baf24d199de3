#!/usr/bin/env bash
# Brings the unit up under a real systemd as PID 1: this host and CI have none, so a Debian
# bookworm container runs /lib/systemd/systemd, deploy/install.sh installs the unit there, and
# `systemctl start verifier-worker` runs the worker (its sandbox and all) against the
# bench_feed platform stand-in, on the host's Docker Engine through the mounted socket. Passes
# when `worker doctor` (ExecStartPre=) passed, the service is active, writes a candidate for every job, answers /healthz 200,
# is restarted onto a new binary by install.sh (and not by a run that changes nothing), is
# restarted by its health check (verifier-worker-health.service) when stuck, and stops on `systemctl stop` with exit 0 (Result=success).
#
#   deploy/tests/systemd-unit.sh WORKER_BIN BENCH_FEED_BIN [UNIT_FILE]
#
# UNIT_FILE (default deploy/worker.service) replaces the installed unit, to show how another
# unit fares. Needs Docker (the docker group will do), root for debootstrap, its apt-get
# install and the staging root's owner (through as_root, scripts/lib/host.sh: directly as root,
# else password-less `sudo -n`, as GitHub's runner user has it), debootstrap (Debian package;
# installed if missing) and Debian's package mirror the first time (the image is kept, tagged
# by its package list).
# The staging root must have the same path in the container and on the host (the engine
# mounts it by path), so /var/cache/verifier on the host is used: created for the run and
# removed after it when absent, used as it is (with its owner) when present.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
worker_bin="$(realpath "${1:?worker binary}")"
bench_feed="$(realpath "${2:?bench_feed binary}")"
unit="$(realpath "${3:-$repo/deploy/worker.service}")"
# shellcheck source=scripts/lib/host.sh
source "$repo/scripts/lib/host.sh"
# ca-certificates: the worker's HTTP client loads the system's roots at start and refuses to
# start without any (exit 78), even for a loopback feed; debootstrap installs no Recommends, so
# curl alone does not bring them. The tag names the package list, so an image built from an
# older list is never reused.
packages="systemd,systemd-sysv,dbus,passwd,curl,jq,ca-certificates"
image="verifier-systemd-test:bookworm-$(printf '%s' "$packages" | sha256sum | cut -c1-12)"
name="verifier-systemd-test-$$"
cache=/var/cache/verifier

tmp="$(mktemp -d)"
feed_pid=""
made_cache=""
cleanup() {
  docker rm -f "$name" >/dev/null 2>&1 || true
  [[ -n "$feed_pid" ]] && kill "$feed_pid" 2>/dev/null
  [[ -n "$made_cache" ]] && as_root rm -rf "$cache"
  [[ -e "$tmp/rootfs" ]] && as_root rm -rf "$tmp/rootfs"
  rm -rf "$tmp"
}
trap cleanup EXIT
die() {
  printf 'systemd-unit.sh: %s\n' "$*" >&2
  exit 1
}

if ! docker image inspect "$image" >/dev/null 2>&1; then
  if ! command -v debootstrap >/dev/null 2>&1; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null || {
      as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
  fi
  echo "building $image with debootstrap (once)" >&2
  as_root debootstrap --variant=minbase --include="$packages" \
    bookworm "$tmp/rootfs" http://deb.debian.org/debian >"$tmp/debootstrap.log" 2>&1 ||
    { tail -20 "$tmp/debootstrap.log" >&2; die "debootstrap failed"; }
  as_root tar -C "$tmp/rootfs" -c . | docker import - "$image" >/dev/null
  as_root rm -rf "$tmp/rootfs"
fi

# The verifier user inside owns the host's cache directory; the docker group inside has the
# socket's group id.
if [[ -d "$cache" ]]; then
  uid="$(stat -c %u "$cache")"
  gid="$(stat -c %g "$cache")"
else
  uid=64999
  gid=64999
  as_root install -d -m 0700 -o "$uid" -g "$gid" "$cache"
  made_cache=1
fi
socket_gid="$(stat -c %g /var/run/docker.sock)"

busybox="$(jq -r .busybox "$repo/.work/images.json")"
mkdir -p "$tmp/feed"
"$bench_feed" "$repo" "$busybox" 3 "$tmp/feed" >"$tmp/feed.log" 2>&1 &
feed_pid=$!
for _ in $(seq 300); do [[ -s "$tmp/feed/base" ]] && break; sleep 0.1; done
[[ -s "$tmp/feed/base" ]] || die "bench_feed did not start: $(cat "$tmp/feed.log")"
base="$(cat "$tmp/feed/base")"
verifier="$(cat "$tmp/feed/verifier")"

mkdir -p "$tmp/src/deploy"
cp "$repo"/deploy/*.sh "$repo"/deploy/verifier-worker-health.* "$repo/deploy/worker.env.example" "$tmp/src/deploy/"
cp "$unit" "$tmp/src/deploy/worker.service"
cp -r "$repo/docs" "$tmp/src/docs"
cp "$worker_bin" "$tmp/src/worker"

# Not --privileged: this host's engine cannot grant every capability. SYS_ADMIN and no
# seccomp profile are what systemd needs to set up the unit's namespaces and filters.
docker run -d --name "$name" --network host --cgroupns=private \
  --cap-add SYS_ADMIN --security-opt seccomp=unconfined -e container=docker \
  --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
  -v /var/run/docker.sock:/run/docker.sock -v "$cache:$cache" -v "$tmp/src:/src:ro" \
  "$image" /lib/systemd/systemd >/dev/null
inside() { docker exec "$name" "$@"; }
for _ in $(seq 300); do
  state="$(inside systemctl is-system-running 2>/dev/null || true)"
  [[ "$state" == running || "$state" == degraded ]] && break
  sleep 0.2
done
echo "systemd in the container: $(inside cat /proc/1/comm) is PID 1, $(inside systemctl --version | head -n 1), state $state"
inside sh -c "getent group docker >/dev/null && groupmod -g $socket_gid docker || groupadd -g $socket_gid docker"
inside groupadd -r -g "$gid" verifier
inside useradd -r -u "$uid" -g "$gid" -d /var/lib/verifier -M -s /usr/sbin/nologin verifier
inside /src/deploy/install.sh --worker-bin /src/worker >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; die "install.sh failed in the container"; }
inside sed -i "s|^VERIFIER_API=.*|VERIFIER_API=$base|;s|^VERIFIER_ARCHIVE_BASE=.*|VERIFIER_ARCHIVE_BASE=$base|;s|^VERIFIER_ADDRESS=.*|VERIFIER_ADDRESS=$verifier|;s|^VERIFIER_POLL_SECONDS=.*|VERIFIER_POLL_SECONDS=2|;s|^VERIFIER_METRICS_LISTEN=.*|VERIFIER_METRICS_LISTEN=127.0.0.1:0|" /etc/verifier/worker.env
# An ephemeral port cannot be curled; pick one the host does not use.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
inside sed -i "s|^VERIFIER_METRICS_LISTEN=.*|VERIFIER_METRICS_LISTEN=127.0.0.1:$port|" /etc/verifier/worker.env

status=0
inside systemctl start verifier-worker.service 2>"$tmp/start.err" || status=$?
show() { inside systemctl show verifier-worker.service -p "$1" --value; }
if ((status != 0)); then
  inside journalctl -u verifier-worker.service --no-pager -n 20 >&2 || true
  die "systemctl start failed: ExecMainStatus=$(show ExecMainStatus) Result=$(show Result)"
fi
# Every job of the feed gets a candidate (awaited, with a generous deadline).
deadline=$((SECONDS + 240))
listed=0
while ((SECONDS < deadline)); do
  listed="$(inside jq '.candidates | length' /var/lib/verifier/out/manifest.json 2>/dev/null || echo 0)"
  ((listed >= 3)) && break
  [[ "$(show ActiveState)" == active ]] || break
  sleep 0.5
done
if ((listed < 3)); then
  inside journalctl -u verifier-worker.service --no-pager -n 30 >&2 || true
  die "$listed of 3 candidates; unit $(show ActiveState), ExecMainStatus=$(show ExecMainStatus)"
fi
echo "unit active (main pid $(show MainPID)), $listed candidates in /var/lib/verifier/out"
# ExecStartPre= ran `worker doctor` first, inside the unit's sandbox, and no line failed.
doctor="$(inside journalctl -u verifier-worker.service --no-pager -o cat | grep -E '^doctor: (ok|warn)$' | tail -n 1 || true)"
[[ -n "$doctor" ]] || die "no 'doctor: ok|warn' line in the journal: ExecStartPre did not run worker doctor"
echo "ExecStartPre: $doctor"
health="$(inside curl -s -w ' %{http_code}' "http://127.0.0.1:$port/healthz")"
[[ "$health" == *' 200' ]] || die "/healthz: $health"
echo "/healthz: $health"
pid="$(show MainPID)"
echo "worker process: $(inside grep -E '^(Uid|Groups|CapEff|CapBnd|NoNewPrivs|Seccomp):' "/proc/$pid/status" | tr -s '\t ' ' ' | tr '\n' ';')"
inside systemd-analyze security verifier-worker.service --no-pager 2>&1 | tail -n 1
# An upgrade in place (issue #46 item 7): install.sh with another build restarts the running
# service and says so, so the process that runs afterwards was started from the new binary
# (installed before the restart; /proc/PID/exe of the verifier user's process is not
# readable from `docker exec`, so the new main pid is the proof); a second run
# changes nothing and restarts nothing.
old_pid="$pid"
cp "$worker_bin" "$tmp/src/worker-upgraded"
printf 'another build' >>"$tmp/src/worker-upgraded"
upgrade="$(inside /src/deploy/install.sh --worker-bin /src/worker-upgraded 2>&1)" ||
  die "install.sh of another build failed: $upgrade"
grep -qx '+ systemctl restart verifier-worker.service' <<<"$upgrade" ||
  die "install.sh replaced the binary but did not restart the service: $upgrade"
grep -q '^restarted verifier-worker.service' <<<"$upgrade" || die "install.sh did not say it restarted: $upgrade"
new_pid="$(show MainPID)"
[[ "$(show ActiveState)" == active && "$new_pid" != "$old_pid" && "$new_pid" != 0 ]] ||
  die "after the upgrade: unit $(show ActiveState), main pid $old_pid -> $new_pid"
again="$(inside /src/deploy/install.sh --worker-bin /src/worker-upgraded 2>&1)" || die "rerun: $again"
! grep -q 'restart' <<<"$again" || die "a run that changed nothing restarted the service: $again"
[[ "$(show MainPID)" == "$new_pid" ]] || die "a run that changed nothing replaced the process"
echo "upgrade: install.sh restarted the service (pid $old_pid -> $new_pid, running the new binary)"
pid="$new_pid"
# /healthz wired to the unit (issue #46 item 6): once the new process answers 200, a check
# passes and restarts nothing; a worker that runs but does not answer (SIGSTOP) is restarted
# by the third unhealthy check in a row. The checks are started here one by one rather than
# awaited from the timer, so the outcome does not depend on timing.
deadline=$((SECONDS + 120))
until [[ "$(inside curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")" == 200 ]]; do
  ((SECONDS < deadline)) || die "the restarted worker never answered /healthz 200"
  sleep 0.5
done
inside systemctl start verifier-worker-health.service ||
  die "the health check failed on a healthy worker: $(inside journalctl -u verifier-worker-health.service --no-pager -n 5 -o cat)"
[[ "$(show MainPID)" == "$pid" ]] || die "a passing health check restarted the worker"
inside sh -c "kill -STOP $pid"
for _ in 1 2 3; do
  inside systemctl start verifier-worker-health.service 2>/dev/null && die "a check passed on a stopped worker"
done
inside journalctl -u verifier-worker-health.service --no-pager -o cat | grep -q "^restarting verifier-worker.service: unhealthy in 3 checks in a row" ||
  die "no restart in the health check's journal: $(inside journalctl -u verifier-worker-health.service --no-pager -n 10 -o cat)"
healed="$(show MainPID)"
[[ "$(show ActiveState)" == active && "$healed" != "$pid" && "$healed" != 0 ]] ||
  die "after three unhealthy checks: unit $(show ActiveState), main pid $pid -> $healed"
echo "health check: a stuck worker (SIGSTOP, pid $pid) was restarted after 3 unhealthy checks (pid $healed)"
pid="$healed"
inside systemctl stop verifier-worker.service
[[ "$(show Result)" == success && "$(show ExecMainStatus)" == 0 ]] ||
  die "stop: Result=$(show Result) ExecMainStatus=$(show ExecMainStatus)"
echo "systemctl stop: Result=success, exit 0"
