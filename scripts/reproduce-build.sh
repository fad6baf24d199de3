#!/usr/bin/env bash
# Builds the release binaries of one commit twice and fails unless both builds are
# bit-identical and neither holds a path, user or host name of the machine that built it
# (issue #49 item 1; docs/rebuild.md).
#
#   scripts/reproduce-build.sh [package...]     default: signer
#
# The two builds differ in everything a rebuild elsewhere would differ in and that we can vary
# cheaply on one machine:
# - the source directory: two fresh clones of the commit in two temporary directories of
#   different path lengths (never this working tree, so local edits cannot leak in);
# - the target directory: each build's own, inside its clone (never ./target);
# - the time: the second build starts after the first one ended, minutes later. Not a faked
#   clock: with libfaketime 0.9.10 (Debian) preloaded, rustc itself never returns, whether run
#   through rustup or straight from the sysroot, with libfaketime or libfaketimeMT, `-f +400d`
#   or an absolute date, with or without FAKETIME_NO_CACHE=1 and DONT_FAKE_MONOTONIC=1 (tried
#   for issue #49: `rustc -vV` killed by timeout every time), and a time namespace moves only
#   the monotonic and boot clocks. A build-time timestamp is caught all the same: two builds
#   minutes apart differ (scripts/tests/reproduce-build.sh's `timestamp` crate);
# - the host name: the second build runs in its own UTS namespace under another host name
#   when root is at hand (directly or through password-less sudo);
# - the user, with REPRO_VARY_USER=1 (off by default: see below): with root at hand, the
#   second build runs as the system user `repro-build`
#   (created on first use, no home, no login shell) in its own mount namespace, with a
#   CARGO_HOME of its own inside its build directory: a copy of the invoking user's crates.io
#   cache and index (the .crate files and index entries, about 130 MB here, seconds to copy;
#   the user extracts the sources itself, so they are its own files under another path, not
#   the invoking user's extracted tree, some of whose files crates ship unreadable to others),
#   and the toolchain's sysroot and cargo's bin directory (cargo-auditable) bind-mounted
#   read-only under other paths, remapped like the first build's. Cargo runs straight from the
#   sysroot there (rustup's proxy is not involved: it resolves the same toolchain for the first).
#   Off by default (it needs root, creates a user and copies the cache); CI turns it on
#   (docs/rebuild.md). It found that the binary depended on where cargo-auditable is
#   installed (issue #49: the signer built as the other user differed, every symbol hash of a
#   workspace crate and with them the symbol order and every address; see build_cmd below);
# - the time zone, locale and umask.
# - the time zone, locale and umask.
#
# What makes the builds agree: `--locked` (the committed Cargo.lock), SOURCE_DATE_EPOCH set to
# the commit's time, a cleared environment (`env -i` plus the few variables a build needs), and
# `--remap-path-prefix` for the clone, CARGO_HOME and the toolchain's sysroot (the pinned
# toolchain has no stable `trim-paths` yet). With REPRO_AUDITABLE=1 (the default when
# cargo-auditable is installed) both builds go through cargo-auditable, as the release
# workflow does, so the dependency list the binaries carry is compared too; cargo is handed
# the wrapper by its bare name, not by where it is installed (see build_cmd below).
#
# Then every binary's sha256 is compared; on a difference diffoscope explains it (installed
# from Debian on first need, as scripts/services.sh installs packages), and `strings` of every
# binary is searched for the build directories, /home/, /root/, /tmp/, /work/, CARGO_HOME,
# RUSTUP_HOME, HOME, and the user and host names (when longer than three characters: shorter
# ones match ordinary words).
#
# Prints one `<sha256>  <package>` line per binary on stdout when the builds agree; everything
# else goes to stderr. Exit status: 0 reproducible, 1 not reproducible or a leak found, 2 usage.
#
# Env: REPRO_SOURCE (a git repository, default this one), REPRO_REV (default HEAD),
# REPRO_WORK (parent of the build directories, default TMPDIR or /tmp), REPRO_OUT (a directory
# that receives the first build's binaries and SHA256SUMS), REPRO_KEEP=1 (keep the build
# directories), REPRO_AUDITABLE (1/0, see above), REPRO_VARY_HOST (1/0, default 1 when root
# is at hand), REPRO_VARY_USER (1/0, default 0; with it, REPRO_WORK must be reachable by other
# users, as /tmp is), CARGO_HOME, RUSTUP_HOME.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib/host.sh
source "${here}/lib/host.sh"

usage() {
  echo "usage: scripts/reproduce-build.sh [package...]" >&2
  exit 2
}
packages=("$@")
((${#packages[@]} > 0)) || packages=(signer)
for p in "${packages[@]}"; do
  [[ "${p}" =~ ^[a-z][a-z0-9_-]*$ ]] || usage
done

source_repo="${REPRO_SOURCE:-${REPO_ROOT}}"
rev="${REPRO_REV:-HEAD}"
commit="$(git -C "${source_repo}" rev-parse --verify "${rev}^{commit}")" ||
  die "${rev} is not a commit of ${source_repo}"
epoch="$(git -C "${source_repo}" log -1 --format=%ct "${commit}")"
cargo_home="${CARGO_HOME:-${HOME}/.cargo}"
rustup_home="${RUSTUP_HOME:-${HOME}/.rustup}"
user_name="$(id -un)"
host_name="$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)"

# Both builds find it on PATH, to which CARGO_HOME/bin is appended (see build).
has_auditable() { PATH="${PATH}:${cargo_home}/bin" command -v cargo-auditable >/dev/null; }
auditable="${REPRO_AUDITABLE:-}"
if [[ -z "${auditable}" ]]; then
  if has_auditable; then auditable=1; else auditable=0; fi
fi
build_cmd=(cargo build)
if [[ "${auditable}" == 1 ]]; then
  has_auditable ||
    die "REPRO_AUDITABLE=1 but cargo-auditable is not installed (scripts/toolchain.sh installs it)"
  # Not `cargo auditable build`: cargo-auditable hands cargo its own absolute path
  # (current_exe) as RUSTC_WORKSPACE_WRAPPER, and cargo hashes the workspace wrapper's path into
  # every workspace member's -C metadata, hence into their symbol names, the symbol order and
  # every address: the binary depended on where cargo-auditable is installed, i.e. on the
  # user's home (issue #49: the signer built as another user differed). cargo-auditable is run
  # directly with CARGO set to a shim (written by build) that replaces that path by the bare
  # name `cargo-auditable`, which cargo finds on PATH and hashes the same everywhere.
  build_cmd=(cargo-auditable auditable build)
fi

vary_host="${REPRO_VARY_HOST:-1}"
vary_user="${REPRO_VARY_USER:-0}"
if ! { is_root || sudo -n true 2>/dev/null; }; then
  [[ "${vary_host}" == 0 ]] || log "no root at hand: both builds run under the host name ${host_name}"
  [[ "${vary_user}" == 0 ]] || log "no root at hand: both builds run as ${user_name}"
  vary_host=0
  vary_user=0
fi
other_user=repro-build
if [[ "${vary_user}" == 1 ]] && ! id -u "${other_user}" >/dev/null 2>&1; then
  log "creating the system user ${other_user} for the second build"
  as_root useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
    "${other_user}" || die "could not create the user ${other_user}"
fi

parent="${REPRO_WORK:-${TMPDIR:-/tmp}}"
mkdir -p "${parent}"
# Different lengths on purpose: a path that leaked into the binary shifts every offset after it.
dir_a="$(mktemp -d "${parent}/repro-a.XXXXXX")"
dir_b="$(mktemp -d "${parent}/repro-second-build-longer-path.XXXXXXXX")"
cleanup() {
  if [[ "${REPRO_KEEP:-0}" == 1 ]]; then
    log "kept ${dir_a} and ${dir_b}"
  else
    rm -rf "${dir_a}" "${dir_b}"
  fi
}
trap cleanup EXIT

# build DIR WHICH: clones the commit into DIR/src and builds the packages there.
build() {
  local dir="$1" which="$2" src="$1/src"
  git clone --quiet --no-checkout "${source_repo}" "${src}"
  git -C "${src}" -c advice.detachedHead=false checkout --quiet "${commit}"
  # The sysroot as rustc names it may be a symlink's target (a toolchain linked to another), so
  # both it and RUSTUP_HOME are remapped; rustc applies the last matching prefix.
  local sysroot
  sysroot="$(cd "${src}" && env -i "PATH=${PATH}" "HOME=${HOME}" "RUSTUP_HOME=${rustup_home}" rustc --print sysroot)"
  local as_other=""
  [[ "${which}" == b && "${vary_user}" == 1 ]] && as_other=1
  # What the build sees as CARGO_HOME and the toolchain: the invoking user's, or for the other
  # user read-only bind mounts of them under its own build directory.
  # cargo-auditable is found on PATH by the bare name (see build_cmd): appended, so that
  # nothing the invoking user's PATH finds first changes.
  local build_cargo_home="${cargo_home}" build_sysroot="${sysroot}" build_path="${PATH}:${cargo_home}/bin" build_home="${HOME}"
  local flags="--remap-path-prefix=${rustup_home}=/rustup"
  if [[ -n "${as_other}" ]]; then
    build_cargo_home="${dir}/cargo"
    build_sysroot="${dir}/ro/toolchain"
    build_path="${build_sysroot}/bin:${dir}/ro/cargo-bin:/usr/local/bin:/usr/bin:/bin"
    build_home="${dir}/home"
    mkdir -p "${build_cargo_home}/registry" "${build_sysroot}" "${dir}/ro/cargo-bin" "${build_home}"
    local d
    for d in cache index; do
      [[ ! -d "${cargo_home}/registry/${d}" ]] || cp -R "${cargo_home}/registry/${d}" "${build_cargo_home}/registry/"
    done
    flags=""
  fi
  flags+=" --remap-path-prefix=${build_sysroot}=/rust/toolchain"
  flags+=" --remap-path-prefix=${build_cargo_home}=/cargo --remap-path-prefix=${src}=/build/src"
  flags="${flags# }"
  local pkg_args=()
  for p in "${packages[@]}"; do pkg_args+=(-p "${p}"); done
  local env_args=(
    env -i
    "PATH=${build_path}" "HOME=${build_home}" "CARGO_HOME=${build_cargo_home}" "RUSTUP_HOME=${rustup_home}"
    "CARGO_TARGET_DIR=${dir}/target" "SOURCE_DATE_EPOCH=${epoch}" "RUSTFLAGS=${flags}"
    "CARGO_TERM_COLOR=never" "CARGO_INCREMENTAL=0"
    # The build's own temporary directory (a C compiler's intermediate files among them), on
    # the file system of the build rather than wherever /tmp is.
    "TMPDIR=${dir}/tmp"
  )
  mkdir -p "${dir}/tmp"
  if [[ "${auditable}" == 1 ]]; then
    # The shim cargo-auditable runs as cargo (see build_cmd). CARGO is unset again so that
    # cargo names itself to build scripts as it does without the shim.
    mkdir -p "${dir}/shim"
    printf '%s\n' '#!/bin/sh' 'unset CARGO' 'RUSTC_WORKSPACE_WRAPPER=cargo-auditable exec cargo "$@"' \
      >"${dir}/shim/cargo"
    chmod 0755 "${dir}/shim/cargo"
    env_args+=("CARGO=${dir}/shim/cargo")
  fi
  if [[ "${which}" == a ]]; then
    env_args+=("TZ=UTC" "LANG=C.UTF-8")
  else
    env_args+=("TZ=Pacific/Kiritimati" "LANG=C")
  fi
  log "build ${which}: ${build_cmd[*]} --locked --release ${pkg_args[*]} in ${src}"
  local cmd=("${env_args[@]}" "${build_cmd[@]}" --locked --release "${pkg_args[@]}")
  if [[ -n "${as_other}" ]]; then
    # Its own mount and UTS namespaces: the sysroot and cargo's bin directory appear read-only
    # inside the build directory (the other user may not even traverse the invoking user's
    # home), the host name changes (when REPRO_VARY_HOST), and the build runs as the other
    # user, in a tree it owns (its CARGO_HOME included), never as root.
    as_root chown -R "${other_user}:" "${dir}"
    as_root setpriv --reuid "${other_user}" --regid "${other_user}" --clear-groups -- test -w "${dir}" ||
      die "${other_user} cannot reach ${dir}: REPRO_WORK (${parent}) must be traversable by other users, as /tmp is (or REPRO_VARY_USER=0)"
    local host=""
    [[ "${vary_host}" == 1 ]] && host=repro-other-host
    # shellcheck disable=SC2016 # expanded by the inner shells
    local inner=(bash -c 'umask 0002 && cd "$1" && shift && exec "$@"' inner "${src}" "${cmd[@]}")
    # shellcheck disable=SC2016 # expanded by the inner shell
    as_root unshare --mount --uts --fork -- bash -c \
      'set -e; mount --make-rprivate /
       if [[ -d "$1" ]]; then mount --bind "$1" "$2" && mount -o remount,bind,ro "$2"; fi
       mount --bind "$3" "$4" && mount -o remount,bind,ro "$4"
       [[ -z "$5" ]] || hostname "$5"
       user="$6"; shift 6
       exec setpriv --reuid "$user" --regid "$user" --clear-groups -- "$@"' \
      outer "${cargo_home}/bin" "${dir}/ro/cargo-bin" "${sysroot}" "${build_sysroot}" "${host}" "${other_user}" \
      "${inner[@]}" >&2 || return 1
    # Back to the invoking user, who removes the tree afterwards.
    as_root chown -R "$(id -u):$(id -g)" "${dir}"
  elif [[ "${which}" == b && "${vary_host}" == 1 ]]; then
    # Its own UTS namespace, so the host name changes for this build only; back to this user
    # at once (setpriv), the build itself never runs as root unless we are root.
    # shellcheck disable=SC2016 # expanded by the inner shells
    local inner=(bash -c 'umask 0002 && cd "$1" && shift && exec "$@"' inner "${src}" "${cmd[@]}")
    # shellcheck disable=SC2016 # expanded by the inner shell
    as_root unshare --uts --fork -- bash -c \
      'hostname repro-other-host && uid="$1" gid="$2" && shift 2 && exec setpriv --reuid "$uid" --regid "$gid" --init-groups -- "$@"' \
      outer "$(id -u)" "$(id -g)" "${inner[@]}" >&2
  else
    (umask 0022 && cd "${src}" && "${cmd[@]}") >&2
  fi
}

# keep DIR: moves the built binaries to DIR/bin and removes the clone and its target
# directory, so that only one build's intermediate files (about 1.5 GB for the signer) are on
# disk at a time.
keep() {
  local dir="$1" p
  mkdir -p "${dir}/bin"
  for p in "${packages[@]}"; do
    [[ -f "${dir}/target/release/${p}" ]] || die "no binary ${p} in target/release (a package whose binary has another name?)"
    mv "${dir}/target/release/${p}" "${dir}/bin/${p}"
  done
  rm -rf "${dir}/target" "${dir}/src"
}

step "reproduce ${packages[*]} at ${commit} (SOURCE_DATE_EPOCH=${epoch}, auditable=${auditable})"
build "${dir_a}" a
keep "${dir_a}"
build "${dir_b}" b
keep "${dir_b}"

# leak BIN WHAT FOUND: reports FOUND (the matching strings of BIN) when it is not empty.
leak() {
  [[ -n "$3" ]] || return 0
  log "LEAK: ${1#"${parent}/"} holds '$2':"
  printf '    %s\n' "$3" >&2
  status=1
}

status=0
sums=()
for p in "${packages[@]}"; do
  a="${dir_a}/bin/${p}"
  b="${dir_b}/bin/${p}"
  sum_a="$(sha256sum "${a}" | cut -d' ' -f1)"
  sum_b="$(sha256sum "${b}" | cut -d' ' -f1)"
  log "${p}: ${sum_a} (build a)"
  log "${p}: ${sum_b} (build b)"
  if [[ "${sum_a}" != "${sum_b}" ]]; then
    log "NOT REPRODUCIBLE: ${p} differs between the two builds"
    status=1
    if ! command -v diffoscope >/dev/null 2>&1; then
      log "installing diffoscope-minimal (Debian package) to explain the difference"
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq diffoscope-minimal >/dev/null 2>&1 || {
        as_root apt-get update -qq >/dev/null 2>&1 &&
          as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq diffoscope-minimal >/dev/null 2>&1
      } || log "could not install diffoscope-minimal"
    fi
    if command -v diffoscope >/dev/null 2>&1; then
      diffoscope --no-progress --max-report-size 200000 "${a}" "${b}" | head -n 200 >&2 || true
    else
      cmp "${a}" "${b}" | head -n 5 >&2 || true
    fi
  fi
  # This machine's build directories, toolchain, crates cache and checkout: wherever they
  # appear, this build put them there. The generic roots (/home/, /root/, /tmp/, /work/) also
  # appear in ordinary string constants (the signer holds a literal `/tmp/home`), so under them
  # only what a compiler leaks is looked for: a source file or a cargo, rustup or target
  # directory. The user name counts as a path component or `user@`, the host name as a word
  # (each only when longer than three characters: `vm` or `ci` match ordinary text).
  exact=("${dir_a}" "${dir_b}" "${cargo_home}" "${rustup_home}")
  [[ "${REPO_ROOT}" == / ]] || exact+=("${REPO_ROOT}")
  patterns=('(/home/|/root/|/tmp/|/work/)[^[:space:]]*(\.(rs|c|h|S|cc|cpp)([:[:space:]]|$)|/\.cargo/|/\.rustup/|/registry/src/|/target/)')
  for word in "${user_name}" "${other_user}"; do
    if ((${#word} > 3)); then patterns+=("(/${word}/|${word}@)"); fi
  done
  for word in "${host_name}" repro-other-host; do
    if ((${#word} > 3)); then patterns+=("\\b${word}\\b"); fi
  done
  for bin in "${a}" "${b}"; do
    strings -a "${bin}" >"${bin}.strings"
    for needle in "${exact[@]}"; do
      leak "${bin}" "${needle}" "$(grep -m 3 -F -- "${needle}" "${bin}.strings" || true)"
    done
    for pattern in "${patterns[@]}"; do
      leak "${bin}" "${pattern}" "$(grep -m 3 -E -- "${pattern}" "${bin}.strings" || true)"
    done
  done
  sums+=("${sum_a}  ${p}")
done

if ((status != 0)); then
  log "not reproducible: see above"
  exit 1
fi
if [[ -n "${REPRO_OUT:-}" ]]; then
  mkdir -p "${REPRO_OUT}"
  for p in "${packages[@]}"; do
    install -m 0755 "${dir_a}/bin/${p}" "${REPRO_OUT}/${p}"
  done
  printf '%s\n' "${sums[@]}" >"${REPRO_OUT}/SHA256SUMS"
fi
log "reproducible: both builds of ${commit} (the second$([[ "${vary_user}" == 1 ]] && echo " as ${other_user}")$([[ "${vary_host}" == 1 ]] && echo " on another host name")) are bit-identical and hold no build path, user or host name"
printf '%s\n' "${sums[@]}"
