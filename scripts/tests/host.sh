#!/usr/bin/env bash
# The checks are eval'd strings so a case reads as one line; they expand when they run.
# shellcheck disable=SC2016,SC2034
# Tests of scripts/lib/host.sh, the decisions scripts/services.sh makes about the host: which
# packages to install, whether to keep an existing Docker Engine, and what runs through sudo.
# The host is simulated with stub commands on PATH (id, dpkg-query, sudo, apt-get, docker,
# dockerd, systemctl, node, npm, python3), each logging its argv, so both machines the script
# is for are exercised here: Debian 12 as root with nothing installed, and GitHub's
# ubuntu-24.04 runner as a sudo-capable user with docker-ce preinstalled and running.
#
#   scripts/tests/host.sh        prints one line per case and "N passed, N failed"
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lib="${HOST_LIB:-$(cd "${here}/../lib" && pwd)/host.sh}"

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

# Only these real tools are reachable, so a real dockerd, apt-get or sudo on this machine
# can never answer for a stub.
tools="${tmp}/tools"
mkdir -p "${tools}"
for tool in bash cat date dirname env grep sleep timeout tr; do
  ln -s "$(command -v "${tool}")" "${tools}/${tool}"
done

# shellcheck source=scripts/tests/check.sh
source "${here}/check.sh"

# host UID INSTALLED DOCKER_ANSWERS SYSTEMD [extra stubs...]: a fresh stub directory.
#   INSTALLED: space-separated packages dpkg-query reports as installed
#   DOCKER_ANSWERS: 1 when `docker version` succeeds
#   SYSTEMD: `running` or `offline` (what `systemctl is-system-running` prints)
#   extra stubs: dockerd (a dockerd binary exists), nosudo (no sudo on PATH)
host() {
  local uid="$1" installed="$2" answers="$3" systemd="$4"
  shift 4
  stubs="${tmp}/stubs-$((++hosts))"
  mkdir -p "${stubs}"
  log="${stubs}/calls.log"
  : > "${log}"
  stub() { # name body
    printf '#!%s\necho "%s $*" >> "%s"\n%s\n' "$(command -v bash)" "$1" "${log}" "$2" > "${stubs}/$1"
    chmod +x "${stubs}/$1"
  }
  stub id "case \"\$1\" in -u) echo ${uid} ;; -g) echo ${uid} ;; -un) echo runner ;; esac"
  stub dpkg-query "for p in ${installed}; do [[ \"\${@: -1}\" == \"\$p\" ]] && { printf 'install ok installed'; exit 0; }; done; exit 1"
  stub apt-get "exit 0"
  stub docker "exit $((answers == 1 ? 0 : 1))"
  stub systemctl "case \"\$1\" in is-system-running) echo ${systemd} ;; cat) [[ ${systemd} == running ]] ;; start) exit 0 ;; is-active) exit 1 ;; esac"
  stub node "exit 0"
  stub npm "exit 0"
  stub python3 "exit 0"
  local extra
  for extra in "$@"; do
    case "${extra}" in
      dockerd) stub dockerd "exit 0" ;;
    esac
  done
  if [[ " $* " != *" nosudo "* ]]; then
    # Password-less sudo: logs, then runs the command (as this user; the stubs do not care).
    stub sudo '[[ "$1" == -n ]] && shift; [[ "$1" == -- ]] && shift; exec "$@"'
  fi
}
hosts=0

# Runs FUNCTION of host.sh on the current stub host; leaves status and output in globals.
on_host() {
  output="$(PATH="${stubs}:${tools}" WITH_PYTHON="${WITH_PYTHON:-0}" WITH_RUST="${WITH_RUST:-0}" WITH_NODE="${WITH_NODE:-0}" bash -c \
    'source "$1"; shift; "$@"' _ "${lib}" "$@" 2>&1)"
  status=$?
}
called() { grep -qxF -- "$1" "${log}"; }
called_like() { grep -q -- "$1" "${log}"; }

base="docker-registry busybox-static hyperfine time jq curl ca-certificates tar gzip faketime rsync prometheus softhsm2 postgresql-15 nftables"

# GitHub's ubuntu-24.04 runner: docker-ce installed and answering, a user with sudo, jq missing.
host 1001 "${base/jq /} docker-ce containerd.io" 1 running dockerd
on_host ensure_packages
check "runner image: docker-ce kept, docker.io never installed; the missing jq goes through sudo apt-get" \
  eval '((status == 0)) && called "sudo -n -- env DEBIAN_FRONTEND=noninteractive apt-get install -y -q jq" && ! called_like "docker.io"'
check "runner image: apt-get never runs without sudo for a non-root user" \
  eval '[[ "$(grep -c "^apt-get" "${log}")" == "$(grep -c "^sudo .*apt-get" "${log}")" ]]'

# A docker daemon that answers although no package of it is known (a hand-installed engine).
host 1001 "${base}" 1 offline
on_host ensure_packages
check "an answering engine from no known package: docker.io not installed, nothing to do" \
  eval '((status == 0)) && ! called_like "apt-get" && [[ "${output}" == *"all needed packages are installed"* ]]'

# Debian 12 as root with nothing: docker.io and the registry installed directly, no sudo.
host 0 "busybox-static time curl ca-certificates tar gzip jq hyperfine faketime rsync prometheus softhsm2 postgresql-15 nftables" 0 offline
on_host ensure_packages
check "fresh Debian as root: docker.io and docker-registry installed with apt-get, no sudo" \
  eval '((status == 0)) && called "apt-get install -y -q docker-registry docker.io" && ! called_like "^sudo"'

# The chaos driver's wall-clock steps preload libfaketime (the faketime package).
host 0 "${base/ faketime/} docker.io" 0 offline
on_host ensure_packages
check "faketime missing: installed with apt-get (docs/chaos.md: the clock steps)" \
  eval '((status == 0)) && called "apt-get install -y -q faketime"'

# The dedicated-host e2e test of scripts/test.sh pulls candidates with rsync (issue #41 item
# 10): the test command's own setup installs it, not deploy/tests/run.sh alone.
host 0 "${base/ rsync/} docker.io" 0 offline
on_host ensure_packages
check "rsync missing: installed with apt-get by scripts/test.sh's own setup (README's test command)" \
  eval '((status == 0)) && called "apt-get install -y -q rsync"'

# The signer's PKCS#11 tests run against SoftHSM2 and fail under CI=true without it (#44).
host 0 "${base/ softhsm2/} docker.io" 0 offline
on_host ensure_packages
check "softhsm2 missing: installed with apt-get (the signer's PKCS#11 tests)" \
  eval '((status == 0)) && called "apt-get install -y -q softhsm2"'

# The fleet ledger's tests run against a real Postgres and fail under CI=true without it (#45).
host 0 "${base/ postgresql-15/} docker.io" 0 offline
on_host ensure_packages
check "postgresql-15 missing: installed with apt-get (the fleet ledger's tests)" \
  eval '((status == 0)) && called "apt-get install -y -q postgresql-15"'

# debootstrap of the Debian suite on Ubuntu needs Debian's keyring too.
host 1001 "${base} docker-ce" 1 running
WITH_PYTHON=1 on_host ensure_packages
check "with the python image: debootstrap and debian-archive-keyring are wanted" \
  eval '((status == 0)) && called "sudo -n -- env DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap debian-archive-keyring"'

# The rust image alone is a debootstrap image too; with neither, debootstrap is not wanted.
host 1001 "${base} docker-ce" 1 running
WITH_PYTHON=0 WITH_RUST=1 on_host ensure_packages
check "with only the rust image: debootstrap and debian-archive-keyring are wanted" \
  eval '((status == 0)) && called "sudo -n -- env DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap debian-archive-keyring"'
host 1001 "${base} docker-ce" 1 running
WITH_PYTHON=0 WITH_RUST=0 on_host ensure_packages
check "with neither debootstrap image: debootstrap is not wanted" \
  eval '((status == 0)) && ! called_like "debootstrap"'

# A user without sudo and missing packages: a clear error, apt-get never tried.
host 1001 "${base/jq /} docker-ce" 1 running nosudo
on_host ensure_packages
check "a non-root user without sudo and a missing package fails with the reason, apt-get untouched" \
  eval '((status != 0)) && [[ "${output}" == *"not running as root (nor with sudo)"* ]] && ! called_like "apt-get"'

# The runner image's engine stopped: started through systemd with sudo, never by hand.
host 1001 "${base} docker-ce" 0 running dockerd
stub docker '[[ -e "'"${stubs}"'/started" ]]'
stub systemctl 'case "$1" in is-system-running) echo running ;; cat) exit 0 ;; start) : > "'"${stubs}"'/started" ;; esac'
on_host ensure_dockerd
check "runner image, engine down: sudo systemctl start docker.service, no dockerd started by hand" \
  eval '((status == 0)) && called "sudo -n -- systemctl start docker.service" && ! called_like "^dockerd"'

# Not root, no systemd, no engine: a clear error rather than a dockerd without rights.
host 1001 "${base} docker.io" 0 offline dockerd
on_host ensure_dockerd
check "non-root without systemd and no engine: fails with the reason, dockerd not started" \
  eval '((status != 0)) && [[ "${output}" == *"needs root"* ]] && ! called_like "^dockerd" && ! called_like "^sudo"'

# as_root runs directly as root and through sudo -n otherwise.
host 0 "" 0 offline
on_host as_root apt-get update
check "as_root as root runs the command itself" eval '((status == 0)) && called "apt-get update" && ! called_like "^sudo"'
host 1001 "" 0 offline
on_host as_root apt-get update
check "as_root as a user goes through non-interactive sudo" eval '((status == 0)) && called "sudo -n -- apt-get update"'

check_summary
