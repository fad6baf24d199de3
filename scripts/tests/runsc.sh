#!/usr/bin/env bash
# The checks are eval'd strings so a case reads as one line; they expand when they run.
# shellcheck disable=SC2016,SC2034
# Tests of scripts/lib/runsc.sh, how scripts/services.sh --runsc registers gVisor's runsc with
# the Docker daemon: daemon.json is merged (an operator's settings and other runtimes kept),
# written only when it changes, the daemon reloaded (SIGHUP, or systemctl reload under
# systemd) only when its loaded runtimes differ, and an operator's own different `runsc` or an
# unreadable daemon.json is a clear error that touches nothing. The daemon is a real process
# named `dockerd` that, on SIGHUP, loads the file's runtimes into what the stub `docker info`
# reports; jq, install and mv are the real ones.
#
#   scripts/tests/runsc.sh        prints one line per case and "N passed, N failed"
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lib="$(cd "${here}/../lib" && pwd)/runsc.sh"

tmp="$(mktemp -d)"
daemons=()
cleanup() {
  local pid
  for pid in "${daemons[@]}"; do
    kill "${pid}" 2>/dev/null
  done
  rm -rf "${tmp}"
}
trap cleanup EXIT

tools="${tmp}/tools"
mkdir -p "${tools}"
for tool in bash cat date dirname env grep head install jq mkdir mktemp mv rm sleep stat timeout tr; do
  ln -s "$(command -v "${tool}")" "${tools}/${tool}"
done

# shellcheck source=scripts/tests/check.sh
source "${here}/check.sh"

# host UID SYSTEMD LOADED [FILE_CONTENT]: a fresh stub host.
#   SYSTEMD: `running` (docker.service under systemd) or `offline`
#   LOADED: the runtimes JSON the daemon has loaded now
#   FILE_CONTENT: daemon.json's content; absent means no file
host() {
  local uid="$1" systemd="$2" loaded="$3"
  stubs="${tmp}/stubs-$((++hosts))"
  mkdir -p "${stubs}"
  log="${stubs}/calls.log"
  : >"${log}"
  json="${stubs}/etc/docker/daemon.json"
  mkdir -p "$(dirname "${json}")"
  if (($# > 3)); then
    printf '%s\n' "$4" >"${json}"
  fi
  printf '%s\n' "${loaded}" >"${stubs}/loaded.json"
  entry="{\"path\":\"${stubs}/runsc\",\"runtimeArgs\":[\"--platform=ptrace\",\"--network=none\"]}"
  stub() { # name body
    printf '#!%s\necho "%s $*" >> "%s"\n%s\n' "$(command -v bash)" "$1" "${log}" "$2" >"${stubs}/$1"
    chmod +x "${stubs}/$1"
  }
  local reload="jq -c '.runtimes // {}' '${json}' > '${stubs}/loaded.json'"
  stub id "case \"\$1\" in -u) echo ${uid} ;; -g) echo ${uid} ;; -un) echo runner ;; esac"
  stub runsc 'echo "runsc version 0.0~20221219.0"'
  stub docker "[[ \"\$1\" == info ]] && cat '${stubs}/loaded.json'"
  stub apt-get "exit 0"
  stub systemctl "case \"\$1\" in is-system-running) echo ${systemd} ;; cat) [[ ${systemd} == running ]] ;; is-active) [[ ${systemd} == running ]] ;; reload) ${reload} ;; esac"
  stub sudo '[[ "$1" == -n ]] && shift; [[ "$1" == -- ]] && shift; exec "$@"'
  # The daemon: a live process whose command name is dockerd, reloading on SIGHUP. It says
  # when its trap is set, and the case waits for that: a SIGHUP that came before the trap
  # would kill the stub (bash's default for HUP), which on a busy machine it did.
  printf '#!%s\ntrap "echo hup >> %s; %s" HUP\n: > %s\nwhile :; do sleep 0.1; done\n' \
    "$(command -v bash)" "${log}" "${reload}" "${stubs}/trap-set" >"${stubs}/dockerd"
  chmod +x "${stubs}/dockerd"
  # SIGHUP reset to its default first: a shell started with it ignored (under nohup, as a CI
  # job may be) passes that on, and bash cannot trap a signal ignored on entry.
  PATH="${stubs}:${tools}" env --default-signal=HUP "${stubs}/dockerd" &
  daemons+=("$!")
  printf '%s\n' "$!" >"${stubs}/docker.pid"
  local waited=0
  until [[ -e "${stubs}/trap-set" ]]; do
    # An awaited condition with a generous bound, not a guessed sleep.
    ((waited++ < 1200)) || { echo "FAIL  the stub dockerd never set its SIGHUP trap"; exit 1; }
    sleep 0.05
  done
}
hosts=0

on_host() {
  output="$(PATH="${stubs}:${tools}" DOCKER_DAEMON_JSON="${json}" DOCKER_PID_FILE="${stubs}/docker.pid" \
    bash -c 'source "$1"; shift; "$@"' _ "${lib}" "$@" 2>&1)"
  status=$?
}
called() { grep -qxF -- "$1" "${log}"; }
called_like() { grep -q -- "$1" "${log}"; }
reloads() { grep -c '^hup$\|^systemctl reload' "${log}"; }
file_is() { [[ "$(jq -cS . "${json}")" == "$(jq -cS . <<<"$1")" ]]; }

# An operator's daemon.json with other settings and another runtime; the daemon not yet told.
operator='{"log-level":"warn","default-ulimits":{"nofile":{"Name":"nofile","Hard":1024,"Soft":1024}},"runtimes":{"kata":{"path":"/opt/kata"}}}'
host 0 offline '{"runc":{"path":"runc"}}' "${operator}"
on_host ensure_runsc
check "merge: the operator's settings and runtimes are kept, runsc added, one SIGHUP" \
  eval '((status == 0)) && file_is "$(jq -c --argjson e "${entry}" ".runtimes.runsc = \$e" <<<"${operator}")" && [[ "$(reloads)" == 1 ]]'

# Rerun on that host: nothing to write, nothing to reload.
before="$(stat -c %i:%Y "${json}")"
: >"${log}"
on_host ensure_runsc
check "rerun: daemon.json not rewritten and the daemon not reloaded" \
  eval '((status == 0)) && [[ "$(stat -c %i:%Y "${json}")" == "${before}" ]] && [[ "$(reloads)" == 0 ]] && [[ "${output}" == *"not reloading"* ]]'

# No daemon.json at all (this project's CI VM).
host 0 offline '{"runc":{"path":"runc"}}'
on_host ensure_runsc
check "no daemon.json: written with runtimes.runsc only, daemon reloaded" \
  eval '((status == 0)) && file_is "{\"runtimes\":{\"runsc\":${entry}}}" && [[ "$(reloads)" == 1 ]]'

# The file already registers it but the daemon never loaded it (an earlier run was stopped).
host 0 offline '{"runc":{"path":"runc"}}'
printf '{"runtimes":{"runsc":%s}}\n' "${entry}" >"${json}"
before="$(stat -c %i:%Y "${json}")"
on_host ensure_runsc
check "file current, daemon stale: no write, one reload" \
  eval '((status == 0)) && [[ "$(stat -c %i:%Y "${json}")" == "${before}" ]] && [[ "$(reloads)" == 1 ]]'

# An operator's own runsc with other flags: refused, nothing touched.
theirs='{"runtimes":{"runsc":{"path":"/usr/local/bin/runsc","runtimeArgs":["--platform=kvm"]}}}'
host 0 offline '{"runc":{"path":"runc"}}' "${theirs}"
before="$(stat -c %i:%Y "${json}")"
on_host ensure_runsc
check "an operator's different runtimes.runsc: error naming it, file and daemon untouched" \
  eval '((status != 0)) && [[ "${output}" == *"already registers runtimes.runsc"* ]] && [[ "$(stat -c %i:%Y "${json}")" == "${before}" ]] && [[ "$(reloads)" == 0 ]]'

# A daemon.json that is not JSON: refused, untouched.
host 0 offline '{"runc":{"path":"runc"}}' '{"log-level": "warn",'
on_host ensure_runsc
check "daemon.json not JSON: error, file untouched, no reload" \
  eval '((status != 0)) && [[ "${output}" == *"not a JSON object"* ]] && [[ "$(cat "${json}")" == "{\"log-level\": \"warn\"," ]] && [[ "$(reloads)" == 0 ]]'

# GitHub's runner: docker.service under systemd, a user with sudo.
host 1001 running '{"runc":{"path":"runc"}}' '{"exec-opts":["native.cgroupdriver=systemd"]}'
on_host ensure_runsc
check "systemd host as a user: sudo systemctl reload docker.service, never a signal by hand" \
  eval '((status == 0)) && called "sudo -n -- systemctl reload docker.service" && ! grep -qx hup "${log}" && file_is "{\"exec-opts\":[\"native.cgroupdriver=systemd\"],\"runtimes\":{\"runsc\":${entry}}}"'

# A reload that does not take (dockerd kept its old settings): an error, not a skip.
host 0 offline '{"runc":{"path":"runc"}}'
stub docker "[[ \"\$1\" == info ]] && echo '{\"runc\":{\"path\":\"runc\"}}'"
RUNSC_WAIT_SECONDS=2 on_host ensure_runsc
check "daemon still lacks runsc after the reload: fails with the reason" \
  eval '((status != 0)) && [[ "${output}" == *"does not list runtime runsc"* ]]'

# runsc not installed: apt-get install runsc.
host 0 offline '{"runc":{"path":"runc"}}'
mv "${stubs}/runsc" "${stubs}/runsc.later"
stub apt-get "[[ \"\$*\" == *install* ]] && mv '${stubs}/runsc.later' '${stubs}/runsc'; exit 0"
on_host ensure_runsc
check "runsc missing: installed with apt-get install runsc" \
  eval '((status == 0)) && called "apt-get install -y -q runsc"'

check_summary
