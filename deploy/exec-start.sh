#!/usr/bin/env bash
# Runs the installed unit's ExecStartPre= (`worker doctor`; a failure stops here with its exit
# status) and then its ExecStart=, exactly as systemd would build them, for a host without
# systemd as PID 1 (a container, or a supervisor such as runit, s6 or supervisord): the
# variables of its EnvironmentFile= substituted by systemd's rules (`${VAR}` is one
# argument, `$VAR` alone is split at whitespace and may vanish), run as its User= with its
# Group= and SupplementaryGroups= (the user's groups), no new privileges, an environment of
# only those variables and PATH. It does not reproduce the unit's sandboxing
# (ProtectSystem=, SystemCallFilter=, ...): without systemd, that is the host's to provide.
#
#   deploy/exec-start.sh [--root DIR] [--print | --print-pre]
#
#   --root DIR  read DIR/etc/systemd/system/verifier-worker.service and its env file under DIR
#               (with --print only: nothing runs from a temporary root)
#   --print     print the command one argument per line instead of running it
#   --print-pre print ExecStartPre='s command that way instead
#
# Exit status: the worker's own when it runs (exec), the doctor's when it fails, 1 when the unit or env file is unusable
# or names an unset variable, 2 on bad usage.
set -euo pipefail

root=""
print=""
print_pre=""
while (($#)); do
  case "$1" in
    --root)
      (($# >= 2)) || exit 2
      root="${2%/}"
      shift 2
      ;;
    --print)
      print=1
      shift
      ;;
    --print-pre)
      print_pre=1
      shift
      ;;
    *)
      echo "usage: deploy/exec-start.sh [--root DIR] [--print | --print-pre]" >&2
      exit 2
      ;;
  esac
done
die() {
  printf 'exec-start.sh: %s\n' "$*" >&2
  exit 1
}
[[ -z "$root" || -n "$print$print_pre" ]] || die "--root only with --print or --print-pre"

unit="$root/etc/systemd/system/verifier-worker.service"
[[ -f "$unit" ]] || die "$unit is not installed (deploy/install.sh)"
value_of() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
exec_start="$(value_of ExecStart)"
exec_start_pre="$(value_of ExecStartPre)"
env_file="$(value_of EnvironmentFile)"
user="$(value_of User)"
[[ -n "$exec_start" && -n "$env_file" && -n "$user" ]] ||
  die "$unit lacks ExecStart=, EnvironmentFile= or User="
env_path="$root${env_file#-}"
[[ -f "$env_path" ]] || die "$env_path is missing"

# The env file as systemd reads the simple form: KEY=VALUE lines, # comments. Quotes and
# backslashes would be interpreted by systemd; refuse them rather than guess.
declare -A vars=()
while IFS= read -r line || [[ -n "$line" ]]; do
  [[ "$line" =~ ^[[:space:]]*(#.*)?$ ]] && continue
  [[ "$line" =~ ^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] ||
    die "$env_path: cannot read '$line'"
  value="${BASH_REMATCH[2]}"
  [[ "$value" != *[\"\'\\]* ]] ||
    die "$env_path: ${BASH_REMATCH[1]} has quotes or backslashes; write the value plainly"
  vars["${BASH_REMATCH[1]}"]="$value"
done <"$env_path"
# Optional: an env file from before ExecStartPre= existed lacks it; empty means no argument.
[[ -v "vars[VERIFIER_DOCTOR_OPTIONS]" ]] || vars[VERIFIER_DOCTOR_OPTIONS]=""

# The unit's commands have no quotes; their words are separated by spaces. expand KEY LINE
# sets argv to LINE's words with the env file's variables substituted.
expand() {
  local key="$1" line="$2" word name out rest
  [[ "$line" != *[\"\'\\]* ]] || die "$key= with quotes is not supported here"
  read -r -a words <<<"$line"
  argv=()
  for word in "${words[@]}"; do
    if [[ "$word" =~ ^\$([A-Za-z_][A-Za-z0-9_]*)$ ]]; then
      name="${BASH_REMATCH[1]}"
      [[ -v "vars[$name]" ]] || die "$key names \$$name, which $env_path does not set"
      read -r -a split <<<"${vars[$name]}"
      argv+=("${split[@]}")
      continue
    fi
    out=""
    rest="$word"
    while [[ "$rest" =~ ^([^$]*)\$\{([A-Za-z_][A-Za-z0-9_]*)\}(.*)$ ]]; do
      name="${BASH_REMATCH[2]}"
      [[ -v "vars[$name]" ]] || die "$key names \${$name}, which $env_path does not set"
      out+="${BASH_REMATCH[1]}${vars[$name]}"
      rest="${BASH_REMATCH[3]}"
    done
    [[ "$rest" != *'$'* ]] || die "$key word '$word' uses a \$ form this script does not expand"
    argv+=("$out$rest")
  done
}

pre_argv=()
if [[ -n "$exec_start_pre" ]]; then
  expand ExecStartPre "$exec_start_pre"
  pre_argv=("${argv[@]}")
fi
expand ExecStart "$exec_start"

if [[ -n "$print_pre" ]]; then
  ((${#pre_argv[@]})) || die "$unit has no ExecStartPre="
  printf '%s\n' "${pre_argv[@]}"
  exit 0
fi
if [[ -n "$print" ]]; then
  printf '%s\n' "${argv[@]}"
  exit 0
fi
environment=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for name in "${!vars[@]}"; do environment+=("$name=${vars[$name]}"); done
cd /
as_user() {
  setpriv --reuid="$user" --regid="$user" --init-groups --no-new-privs --inh-caps=-all \
    env -i "${environment[@]}" "$@"
}
if ((${#pre_argv[@]})); then
  status=0
  as_user "${pre_argv[@]}" || status=$?
  ((status == 0)) || exit "$status"
fi
exec setpriv --reuid="$user" --regid="$user" --init-groups --no-new-privs --inh-caps=-all \
  env -i "${environment[@]}" "${argv[@]}"
