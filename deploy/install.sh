#!/usr/bin/env bash
# Installs `worker serve` on a dedicated Docker host as deploy/worker.service expects it
# (docs/operations.md, "A dedicated host"). Idempotent: a second run changes nothing and
# says so; an existing /etc/verifier/worker.env is never overwritten.
#
#   deploy/install.sh [--root DIR] [--dry-run]
#                     [--worker-bin PATH [--sha256sums FILE --provenance FILE --release REPO@COMMIT]]
#                     [--pull-images FILE] [--enable]
#
#   --root DIR          install into DIR instead of / (DIR/etc/passwd, DIR/etc/group, ...);
#                       nothing outside DIR is touched except the Docker Engine's image store
#                       when --pull-images is given. systemctl is never called.
#   --dry-run           print what would change (lines starting with "+ ") and change nothing.
#   --worker-bin PATH   install PATH as /usr/local/bin/worker (the unit's ExecStart).
#   --sha256sums FILE   the release's SHA256SUMS (docs/rebuild.md): PATH's sha256 must be its
#                       `worker` line, or nothing at all is installed (exit 1). A release's
#                       binary is installed only with its provenance (--provenance).
#   --provenance FILE   the release's Sigstore provenance bundle (docs/rebuild.md): verified
#                       offline by verify-provenance (crates/provenance) against the trusted
#                       root pinned in deploy/sigstore/trusted_root.json, nothing fetched:
#                       PATH's sha256 attested as SLSA provenance by REPO's release-build
#                       workflow on main, built from COMMIT on a GitHub-hosted runner; else
#                       nothing at all is installed (exit 1). verify-provenance is
#                       PROVENANCE_VERIFIER, else on PATH, else target/release/ of this checkout
#                       (`cargo build --release --locked -p provenance`).
#   --release REPO@COMMIT  the release the binary claims to be: owner/name and its 40-hex commit.
#                       A binary given without --sha256sums and --provenance (your own build) is
#                       installed unverified, and the run says so.
#   --pull-images FILE  pull each image FILE lists (one per line, name@sha256:<64 hex>;
#                       blank lines and # comments allowed) so the first jobs need no pull.
#                       A reference without a digest is refused before anything is pulled.
#   --enable            after installing, `systemctl enable --now verifier-worker` and its
#                       health check's timer (only with systemd as PID 1 and no --root).
#
# Upgrades: when the unit or the worker binary changed and the service is running, it is
# restarted (`systemctl restart`, said on its own line), so the process that runs afterwards
# is the new build; a run that changes neither restarts nothing. Without systemd, the note at
# the end says to restart the worker's supervisor.
#
# What it does, each step skipped when already so:
#   the `verifier` system user and group (home /var/lib/verifier, no login shell), a member
#   of `docker` (which must exist: install Docker Engine first); /var/lib/verifier, its
#   state/ and out/ 0750 (group verifier: a pull account in that group can read out/), and
#   /var/cache/verifier, its staging/ and work/ 0700, all owned by verifier; /etc/verifier 0755 and worker.env 0644 root (it holds no secret);
#   /etc/systemd/system/verifier-worker.service, and verifier-worker-health.service and .timer
#   (every minute, health-check.sh restarts a worker that runs but is stuck); /usr/share/doc/verifier/operations.md (the
#   unit's Documentation=) and the worker man pages under /usr/share/man/man1;
#   exec-start.sh (a host without systemd), pull-candidates.sh (the signer's host) and
#   health-check.sh under /usr/local/lib/verifier.
#
# Exit status: 0 installed (or nothing to do), 1 a step failed or the existing env file
# lacks a variable the unit needs, 2 bad usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

USER_NAME=verifier
DOCKER_GROUP=docker
UNIT_NAME=verifier-worker.service
# The variables the unit's ExecStart names; an env file lacking one starts a worker with an
# empty argument.
REQUIRED_VARS=(VERIFIER_API VERIFIER_NETWORK VERIFIER_ADDRESS VERIFIER_ARCHIVE_BASE
  VERIFIER_SHARD VERIFIER_POLL_SECONDS VERIFIER_METRICS_LISTEN VERIFIER_OPTIONS)
# ExecStartPre='s $VERIFIER_DOCTOR_OPTIONS may be absent from an older env file: systemd (and
# exec-start.sh) expand it to no argument, and the doctor runs with its defaults.

root=/
dry_run=""
worker_bin=""
sums_file=""
bundle_file=""
release=""
images_file=""
enable=""

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit 2
}
die() {
  printf 'install.sh: %s\n' "$*" >&2
  exit 1
}
say() { printf '%s\n' "$*"; }

# value NAME "$@": the option's value, the argument after it, into NAME; usage when it has none.
value() {
  (($# >= 3)) || usage
  printf -v "$1" '%s' "$3"
}

while (($#)); do
  case "$1" in
    --root) value root "$@"; shift 2 ;;
    --worker-bin) value worker_bin "$@"; shift 2 ;;
    --sha256sums) value sums_file "$@"; shift 2 ;;
    --provenance) value bundle_file "$@"; shift 2 ;;
    --release) value release "$@"; shift 2 ;;
    --pull-images) value images_file "$@"; shift 2 ;;
    --dry-run)
      dry_run=1
      shift
      ;;
    --enable)
      enable=1
      shift
      ;;
    -h | --help) usage ;;
    *)
      printf 'install.sh: unknown argument %q\n' "$1" >&2
      usage
      ;;
  esac
done

[[ -d "$root" ]] || die "--root $root is not a directory"
root="$(cd "$root" && pwd)"
# Paths below are written as on the target system; p() puts them under the root.
p() {
  if [[ "$root" == / ]]; then printf '%s' "$1"; else printf '%s%s' "$root" "$1"; fi
}
if [[ -z "$dry_run" && "$(id -u)" -ne 0 ]]; then
  die "run as root (or with --dry-run to see what it would do)"
fi
if [[ -n "$enable" && "$root" != / ]]; then
  die "--enable and --root do not go together: a temporary root has no systemd"
fi

# Every change goes through run: printed with a "+ " prefix, and only printed in a dry run.
changes=0
run() {
  changes=$((changes + 1))
  printf '+'
  printf ' %q' "$@"
  printf '\n'
  [[ -n "$dry_run" ]] || "$@"
}

# The shadow tools edit DIR/etc/* with --prefix, without chrooting into DIR.
prefix_args=()
[[ "$root" == / ]] || prefix_args=(--prefix "$root")

# A field of an /etc/passwd or /etc/group entry on the target system.
entry_field() {
  local db="$1" name="$2" field="$3"
  if [[ "$root" == / ]]; then
    { getent "$db" "$name" || true; } | cut -d: -f"$field"
  else
    [[ -f "$(p "/etc/$db")" ]] || return 0
    awk -F: -v n="$name" -v f="$field" '$1 == n { print $f; exit }' "$(p "/etc/$db")"
  fi
}

# --- the images list is checked before anything changes ------------------------------------
images=()
if [[ -n "$images_file" ]]; then
  [[ -f "$images_file" ]] || die "--pull-images $images_file is not a file"
  lineno=0
  while IFS= read -r line || [[ -n "$line" ]]; do
    lineno=$((lineno + 1))
    line="${line%%#*}"
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    [[ -z "$line" ]] && continue
    # By digest only: a tag names whatever the registry serves today, and the worker runs
    # manifests' images by digest anyway.
    if [[ ! "$line" =~ ^[a-z0-9][a-z0-9._:/-]*@sha256:[0-9a-f]{64}$ ]]; then
      die "$images_file:$lineno: '$line' is not an image reference by digest (name@sha256:<64 hex>)"
    fi
    images+=("$line")
  done <"$images_file"
fi
if [[ -n "$worker_bin" ]]; then
  [[ -f "$worker_bin" && -x "$worker_bin" ]] || die "--worker-bin $worker_bin is not an executable file"
fi
if [[ -n "$sums_file" ]]; then
  [[ -n "$worker_bin" ]] || die "--sha256sums checks the --worker-bin binary; give both"
  [[ -f "$sums_file" ]] || die "--sha256sums $sums_file is not a file"
  # Before any change: a binary that is not the release's is never installed, let alone run.
  expected="$(awk '$2 == "worker" || $2 == "*worker" { print $1 }' "$sums_file")"
  [[ "$expected" =~ ^[0-9a-f]{64}$ ]] || die "$sums_file has no single sha256 for worker"
  actual="$(sha256sum "$worker_bin" | cut -d' ' -f1)"
  [[ "$actual" == "$expected" ]] ||
    die "--worker-bin $worker_bin does not match the release's SHA256SUMS (sha256 $actual, expected $expected); nothing installed"
  [[ -n "$bundle_file" ]] ||
    die "--sha256sums without --provenance: a release's binary is installed only with its provenance verified; nothing installed"
fi
if [[ -n "$bundle_file" ]]; then
  [[ -n "$worker_bin" ]] || die "--provenance checks the --worker-bin binary; give both"
  [[ "$release" =~ ^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)@([0-9a-f]{40})$ ]] ||
    die "--provenance needs --release OWNER/REPO@COMMIT (the 40-hex commit of the release)"
  release_repo="${BASH_REMATCH[1]}"
  release_commit="${BASH_REMATCH[2]}"
  trusted_root="${TRUSTED_ROOT:-$repo/deploy/sigstore/trusted_root.json}"
  prov_verifier="${PROVENANCE_VERIFIER:-$(command -v verify-provenance || true)}"
  [[ -n "$prov_verifier" ]] || prov_verifier="$repo/target/release/verify-provenance"
  [[ -x "$prov_verifier" ]] ||
    die "no verify-provenance (PROVENANCE_VERIFIER, PATH or $prov_verifier): build it with cargo build --release --locked -p provenance; nothing installed"
  identity="https://github.com/$release_repo/.github/workflows/${SIGNER_WORKFLOW:-regression-verifier-release-build.yml}@${SIGNER_REF:-refs/heads/main}"
  # Before any change, like the sums: a binary whose provenance does not verify is never
  # installed, let alone run.
  prov_status=0
  "$prov_verifier" --trusted-root "$trusted_root" --bundle "$bundle_file" --artifact "$worker_bin" \
    --identity "$identity" --source-digest "$release_commit" --source-ref "${SOURCE_REF:-refs/heads/main}" ||
    prov_status=$?
  # The shared exit numbering (docs/reference.md "Exit codes"): 4 is a refusal of the binary;
  # anything else is the verifier unable to judge, which must not be blamed on the binary.
  case "$prov_status" in
    0) ;;
    4) die "--worker-bin $worker_bin: its provenance does not verify against $trusted_root (signer $identity, commit $release_commit); nothing installed" ;;
    78) die "trusted root $trusted_root is unusable (verify-provenance exit 78); nothing installed" ;;
    *) die "verify-provenance could not judge --worker-bin $worker_bin (exit $prov_status); nothing installed" ;;
  esac
elif [[ -n "$worker_bin" ]]; then
  say "note: --worker-bin $worker_bin is installed unverified (no --sha256sums and --provenance: not a release's binary)"
fi

say "installing into $root${dry_run:+ (dry run: nothing is changed)}"

# --- user and groups -----------------------------------------------------------------------
if [[ -z "$(entry_field group "$DOCKER_GROUP" 1)" ]]; then
  die "no '$DOCKER_GROUP' group on the target: install Docker Engine first (its socket is group $DOCKER_GROUP)"
fi
if [[ -z "$(entry_field passwd "$USER_NAME" 1)" ]]; then
  run useradd "${prefix_args[@]}" --system --user-group --home-dir /var/lib/verifier \
    --no-create-home --shell /usr/sbin/nologin --comment "regression verifier worker" "$USER_NAME"
else
  say "ok: user $USER_NAME exists"
fi
members="$(entry_field group "$DOCKER_GROUP" 4)"
if [[ ",$members," == *",$USER_NAME,"* ]]; then
  say "ok: $USER_NAME is in group $DOCKER_GROUP"
else
  run usermod "${prefix_args[@]}" --append --groups "$DOCKER_GROUP" "$USER_NAME"
fi
uid="$(entry_field passwd "$USER_NAME" 3)"
gid="$(entry_field passwd "$USER_NAME" 4)"
if [[ -z "$uid" || -z "$gid" ]]; then
  # Only in a dry run of a fresh install: the user does not exist yet.
  [[ -n "$dry_run" ]] || die "user $USER_NAME has no uid after useradd"
  uid="$USER_NAME"
  gid="$USER_NAME"
fi

# --- directories ---------------------------------------------------------------------------
# ensure_dir PATH MODE UID GID
ensure_dir() {
  local path="$1" mode="$2" owner="$3" group="$4" target
  target="$(p "$path")"
  if [[ -d "$target" && ! -L "$target" ]] &&
    [[ "$(stat -c '%a %u %g' "$target")" == "$(printf '%o' "$((8#$mode))") $owner $group" ]]; then
    say "ok: $path ($mode)"
    return
  fi
  [[ -L "$target" ]] && die "$target is a symbolic link; refusing to install through it"
  run install -d -m "$mode" -o "$owner" -g "$group" "$target"
}
ensure_dir /etc 0755 0 0
ensure_dir /etc/verifier 0755 0 0
ensure_dir /etc/systemd 0755 0 0
ensure_dir /etc/systemd/system 0755 0 0
ensure_dir /var 0755 0 0
ensure_dir /var/lib 0755 0 0
# The modes the unit's StateDirectory= and CacheDirectory= reset at every start.
ensure_dir /var/lib/verifier 0750 "$uid" "$gid"
ensure_dir /var/lib/verifier/state 0750 "$uid" "$gid"
ensure_dir /var/lib/verifier/out 0750 "$uid" "$gid"
ensure_dir /var/cache 0755 0 0
ensure_dir /var/cache/verifier 0700 "$uid" "$gid"
# The worker refuses a staging root that is not 0700 and its own.
ensure_dir /var/cache/verifier/staging 0700 "$uid" "$gid"
ensure_dir /var/cache/verifier/work 0700 "$uid" "$gid"
# The unit's ReadWritePaths=: where every worker on the host leases its sandboxes' uids
# (docs/operations.md, "One host uid per sandbox"); present on every systemd host already.
ensure_dir /run 0755 0 0
ensure_dir /run/lock 1777 0 0
ensure_dir /usr 0755 0 0
ensure_dir /usr/local 0755 0 0
ensure_dir /usr/local/bin 0755 0 0
ensure_dir /usr/local/lib 0755 0 0
ensure_dir /usr/local/lib/verifier 0755 0 0
ensure_dir /usr/share 0755 0 0
ensure_dir /usr/share/doc 0755 0 0
ensure_dir /usr/share/doc/verifier 0755 0 0
ensure_dir /usr/share/man 0755 0 0
ensure_dir /usr/share/man/man1 0755 0 0

# --- files ---------------------------------------------------------------------------------
# ensure_file SOURCE PATH MODE: replaced when its content or mode differs.
ensure_file() {
  local source="$1" path="$2" mode="$3" target
  target="$(p "$path")"
  [[ -L "$target" ]] && die "$target is a symbolic link; refusing to install through it"
  if [[ -f "$target" ]] && cmp -s "$source" "$target" &&
    [[ "$(stat -c '%a %u %g' "$target")" == "$(printf '%o' "$((8#$mode))") 0 0" ]]; then
    say "ok: $path"
    return
  fi
  run install -m "$mode" -o 0 -g 0 "$source" "$target"
}
# What the running service would keep running until it is restarted.
restart_for=()
before=$changes
ensure_file "$here/worker.service" "/etc/systemd/system/$UNIT_NAME" 0644
((changes == before)) || restart_for+=("the unit")
for health in verifier-worker-health.service verifier-worker-health.timer; do
  ensure_file "$here/$health" "/etc/systemd/system/$health" 0644
done
ensure_file "$repo/docs/operations.md" /usr/share/doc/verifier/operations.md 0644
# For a host without systemd (a supervisor runs exec-start.sh), and for the signer's host.
ensure_file "$here/exec-start.sh" /usr/local/lib/verifier/exec-start.sh 0755
ensure_file "$here/pull-candidates.sh" /usr/local/lib/verifier/pull-candidates.sh 0755
ensure_file "$here/health-check.sh" /usr/local/lib/verifier/health-check.sh 0755
for page in "$repo"/docs/man/worker*.1; do
  ensure_file "$page" "/usr/share/man/man1/$(basename "$page")" 0644
done
if [[ -n "$worker_bin" ]]; then
  before=$changes
  ensure_file "$worker_bin" /usr/local/bin/worker 0755
  ((changes == before)) || restart_for+=("the worker binary")
elif [[ ! -x "$(p /usr/local/bin/worker)" ]]; then
  say "note: /usr/local/bin/worker is missing; give --worker-bin or install the release binary there"
fi

# The env file is the operator's once it exists: never replaced, only checked.
env_file=/etc/verifier/worker.env
env_status=0
if [[ -L "$(p "$env_file")" ]]; then
  die "$(p "$env_file") is a symbolic link; refusing to read or write through it"
elif [[ -e "$(p "$env_file")" ]]; then
  missing=()
  for var in "${REQUIRED_VARS[@]}"; do
    grep -Eq "^[[:space:]]*$var=" "$(p "$env_file")" || missing+=("$var")
  done
  if ((${#missing[@]})); then
    printf 'install.sh: %s exists and was kept, but lacks %s: copy them from %s\n' \
      "$env_file" "${missing[*]}" "$here/worker.env.example" >&2
    env_status=1
  else
    say "ok: $env_file exists (kept as it is)"
  fi
else
  run install -m 0644 -o 0 -g 0 "$here/worker.env.example" "$(p "$env_file")"
  say "note: edit $env_file (VERIFIER_API, VERIFIER_ADDRESS, VERIFIER_ARCHIVE_BASE) before starting"
fi

# --- images --------------------------------------------------------------------------------
for image in "${images[@]}"; do
  if [[ -z "$dry_run" ]] && docker image inspect "$image" >/dev/null 2>&1; then
    say "ok: image $image is present"
  elif [[ -n "$dry_run" ]] && command -v docker >/dev/null 2>&1 &&
    docker image inspect "$image" >/dev/null 2>&1; then
    say "ok: image $image is present"
  else
    run docker pull --quiet --platform linux/amd64 "$image"
  fi
done

# --- systemd -------------------------------------------------------------------------------
systemd_running=""
[[ "$root" == / && -d /run/systemd/system ]] && systemd_running=1
if [[ -n "$systemd_running" ]]; then
  # Read before anything starts it: a service started below runs the new build already.
  was_active=""
  systemctl is-active --quiet "$UNIT_NAME" && was_active=1
  ((changes == 0)) || run systemctl daemon-reload
  if [[ -n "$enable" ]]; then
    ((env_status == 0)) || die "not enabling: fix $env_file first"
    run systemctl enable --now "$UNIT_NAME"
    run systemctl enable --now verifier-worker-health.timer
  fi
  if [[ -n "$was_active" ]] && ((${#restart_for[@]})); then
    changed="${restart_for[*]}"
    changed="${changed/ the worker/ and the worker}"
    # A restart with an env file the unit cannot start from would take the host down.
    ((env_status == 0)) ||
      die "not restarting $UNIT_NAME ($changed changed): fix $env_file first; the running service still runs the old build"
    run systemctl restart "$UNIT_NAME" ||
      die "systemctl restart $UNIT_NAME failed: journalctl -u $UNIT_NAME -n 50"
    say "${dry_run:+would have }restarted $UNIT_NAME: $changed changed, and the running service ran the old one until now"
  fi
elif [[ -n "$enable" ]]; then
  die "--enable: systemd is not PID 1 here; start the worker as docs/operations.md says for a host without systemd"
fi

if ((changes == 0)); then
  say "nothing to do: everything was already installed"
else
  say "${dry_run:+would make }$changes change(s)"
fi
if [[ "$root" == / && -z "$systemd_running" ]]; then
  say "note: systemd is not PID 1 here; the unit is installed but cannot be started (see docs/operations.md, \"Without systemd\")"
  if ((${#restart_for[@]})); then
    say "note: ${restart_for[*]} changed: restart the worker's supervisor so it runs the new build"
  fi
elif [[ "$root" == / && -z "$enable" ]]; then
  say "next: systemctl enable --now $UNIT_NAME verifier-worker-health.timer"
fi
exit "$env_status"
