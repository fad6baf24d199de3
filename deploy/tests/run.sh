#!/usr/bin/env bash
# Tests of deploy/: deploy/install.sh into throwaway roots (never the real system), the
# installed unit scored there, deploy/exec-start.sh's expansion, deploy/pull-candidates.sh
# against planted and hostile candidate directories, and the unit brought up under a real
# systemd as PID 1 in a container (deploy/tests/systemd-unit.sh). Run by .ci/run; needs the
# shadow tools, systemd-analyze, rsync, cargo, and the Docker Engine with the local registry on
# 127.0.0.1:5000 (scripts/services.sh), and root: install.sh chowns and refuses other callers,
# and the cases read the trees it leaves (0700 directories of other owners). Started by a
# user who is not root (GitHub's runner user), it builds the binaries and installs missing
# tools with that user's toolchain and sudo, then runs itself again through as_root
# (scripts/lib/host.sh: password-less `sudo -n`); scripts/tests/runner-user.sh runs it so.
#
#   [DEPLOY_TESTS_BIN_DIR=DIR] deploy/tests/run.sh
#
# DEPLOY_TESTS_BIN_DIR: a directory with the built `worker` and `examples/bench_feed` to use
# as they are (default: `cargo build` them into ${CARGO_TARGET_DIR:-target}/debug).
#
# Prints one line per case and closes with "N passed, N failed"; exit 1 on any failure.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deploy="$(dirname "$here")"
repo="$(dirname "$deploy")"
install_sh="$deploy/install.sh"
unit="$deploy/worker.service"
# shellcheck source=scripts/lib/host.sh
source "$repo/scripts/lib/host.sh"

for tool in shellcheck rsync; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "installing $tool (Debian package)" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" >/dev/null || {
      as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" >/dev/null
    }
  fi
done

# The worker and the bench_feed stand-in for the systemd case, built with the caller's own
# toolchain (root's sudo would not find a user's cargo) unless handed over.
bin_dir="${DEPLOY_TESTS_BIN_DIR:-}"
if [[ -z "$bin_dir" ]]; then
  bin_dir="${CARGO_TARGET_DIR:-$repo/target}/debug"
  (cd "$repo" && cargo build -q -p worker --bin worker --example bench_feed &&
    cargo build -q -p provenance --bin verify-provenance) ||
    die "cargo build -p worker --bin worker --example bench_feed, -p provenance --bin verify-provenance failed"
fi
bin_dir="$(cd "$bin_dir" && pwd)"

if ! is_root; then
  echo "deploy/tests/run.sh: running the cases as root (as_root: sudo -n), with the binaries of $bin_dir" >&2
  as_root env DEPLOY_TESTS_BIN_DIR="$bin_dir" bash "$here/run.sh"
  exit $?
fi

tmp="$(mktemp -d)"
pulled_tag=""
cleanup() {
  if [[ -n "$pulled_tag" ]]; then
    docker rmi "$pulled_tag" >/dev/null 2>&1 || true
    docker rmi "${pulled_ref:-}" >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

passed=0
failed=0
check() {
  local name="$1"
  shift
  local log="$tmp/case.log"
  rm -f "$tmp/failed"
  # A case fails on its status or on any fail() it called (a later check's success must
  # not hide an earlier failure).
  if "$@" >"$log" 2>&1 && [[ ! -e "$tmp/failed" ]]; then
    echo "ok    $name"
    passed=$((passed + 1))
  else
    echo "FAIL  $name"
    sed 's/^/      /' "$log"
    failed=$((failed + 1))
  fi
}
fail() {
  echo "$*"
  : >>"$tmp/failed"
  return 1
}

# A root with just enough of /etc for the shadow tools: root, and a docker group as Docker
# Engine's package makes it.
fresh_root() {
  local r
  r="$(mktemp -d "$tmp/root.XXXX")"
  mkdir -p "$r/etc"
  printf 'root:x:0:0:root:/root:/bin/bash\n' >"$r/etc/passwd"
  printf 'root:x:0:\ndocker:x:999:\n' >"$r/etc/group"
  printf 'root:*:19000:0:99999:7:::\n' >"$r/etc/shadow"
  printf 'root:*::\ndocker:!::\n' >"$r/etc/gshadow"
  chmod 0640 "$r/etc/shadow" "$r/etc/gshadow"
  printf '%s' "$r"
}

stub_worker="$tmp/worker"
printf '#!/bin/sh\nexit 0\n' >"$stub_worker"
chmod 0755 "$stub_worker"

# Every file and directory under a root with its type, mode, owner and content hash.
tree_state() {
  (cd "$1" && find . -printf '%y %m %u:%g %p\n' | sort &&
    find . -type f -exec sha256sum {} + | sort -k2)
}

# A value of the unit: the words of every `Key=` line, in order.
unit_values() {
  sed -n "s/^$2=//p" "$1" | tr ' ' '\n' | sed '/^$/d'
}

# mode_owner_is ROOT PATH "MODE USER:GROUP", names resolved in ROOT's /etc, not the host's.
mode_owner_is() {
  local r="$1" path="$2" want="$3" got user group
  user="$(awk -F: -v u="$(stat -c %u "$r$path")" '$3 == u { print $1; exit }' "$r/etc/passwd")"
  group="$(awk -F: -v g="$(stat -c %g "$r$path")" '$3 == g { print $1; exit }' "$r/etc/group")"
  got="$(stat -c %a "$r$path") $user:$group"
  [[ "$got" == "$want" ]] || fail "$path: $got, expected $want"
}

# --- install.sh ----------------------------------------------------------------------------

# The reported bug: the unit named /var/lib/verifier/work (ReadWritePaths=, ExecStart=) and
# /usr/share/doc/verifier/operations.md (Documentation=), and nothing created either.
install_creates_every_path_the_unit_names() {
  local r
  r="$(fresh_root)"
  "$install_sh" --root "$r" --worker-bin "$stub_worker" || fail "install.sh exited $?"
  local installed="$r/etc/systemd/system/verifier-worker.service"
  cmp "$unit" "$installed" || fail "the installed unit is not deploy/worker.service"
  local path
  # Directories the sandbox needs to exist at start (a missing one is 226/NAMESPACE).
  for path in $(unit_values "$installed" ReadWritePaths) $(unit_values "$installed" ReadOnlyPaths); do
    [[ -d "$r${path#-}" ]] || fail "ReadWritePaths/ReadOnlyPaths names $path, which install.sh did not create"
  done
  for path in $(unit_values "$installed" StateDirectory); do
    [[ -d "$r/var/lib/$path" ]] || fail "StateDirectory=$path is not created by install.sh"
  done
  for path in $(unit_values "$installed" CacheDirectory); do
    [[ -d "$r/var/cache/$path" ]] || fail "CacheDirectory=$path is not created by install.sh"
  done
  # Directories ExecStart hands the worker, and the binary itself.
  local exec_start
  exec_start="$(sed -n 's/^ExecStart=//p' "$installed")"
  [[ -x "$r${exec_start%% *}" ]] || fail "ExecStart binary ${exec_start%% *} not installed"
  local flag dir
  for flag in --out --state --staging-root --work-dir; do
    dir="$(sed -n "s/.* $flag \([^ ]*\).*/\1/p" <<<"$exec_start")"
    [[ -n "$dir" ]] || fail "ExecStart has no $flag"
    [[ -d "$r$dir" ]] || fail "ExecStart's $flag $dir was not created"
  done
  # Documentation= points at files that exist once installed.
  local doc
  for doc in $(unit_values "$installed" Documentation); do
    case "$doc" in
      file://*) [[ -f "$r${doc#file://}" ]] || fail "Documentation=$doc is not installed" ;;
      man:*)
        local page="${doc#man:}"
        page="${page%%(*}"
        [[ -f "$r/usr/share/man/man1/$page.1" ]] || fail "Documentation=$doc is not installed"
        ;;
      *) fail "Documentation=$doc: unexpected scheme" ;;
    esac
  done
  # The env file holds every variable ExecStart names.
  local var
  for var in $(grep -oE '[$][{]?[A-Z_]+' <<<"$exec_start" | tr -d '{$'); do
    grep -q "^$var=" "$r/etc/verifier/worker.env" || fail "worker.env lacks $var, which ExecStart names"
  done
  # The user, its group membership, modes and owners.
  grep -q '^verifier:x:[0-9]*:[0-9]*:[^:]*:/var/lib/verifier:/usr/sbin/nologin$' "$r/etc/passwd" ||
    fail "no verifier user with home /var/lib/verifier and no login: $(cat "$r/etc/passwd")"
  grep -q '^docker:x:999:verifier$' "$r/etc/group" || fail "verifier is not in docker: $(cat "$r/etc/group")"
  # The modes the unit's StateDirectoryMode= and CacheDirectoryMode= set at each start.
  local state_mode cache_mode
  state_mode="$(sed -n 's/^StateDirectoryMode=0//p' "$installed")"
  cache_mode="$(sed -n 's/^CacheDirectoryMode=0//p' "$installed")"
  [[ "$state_mode" == 750 && "$cache_mode" == 700 ]] ||
    fail "unit modes: state $state_mode cache $cache_mode (out/ must be group-readable, staging 0700)"
  mode_owner_is "$r" "/var/lib/verifier" "$state_mode verifier:verifier" &&
    mode_owner_is "$r" "/var/lib/verifier/state" "$state_mode verifier:verifier" &&
    mode_owner_is "$r" "/var/lib/verifier/out" "$state_mode verifier:verifier" &&
    mode_owner_is "$r" "/var/cache/verifier" "$cache_mode verifier:verifier" &&
    mode_owner_is "$r" "/var/cache/verifier/staging" "$cache_mode verifier:verifier" &&
    mode_owner_is "$r" "/var/cache/verifier/work" "$cache_mode verifier:verifier" &&
    mode_owner_is "$r" "/etc/verifier" "755 root:root" &&
    mode_owner_is "$r" "/etc/verifier/worker.env" "644 root:root" &&
    mode_owner_is "$r" /etc/systemd/system/verifier-worker.service "644 root:root" &&
    mode_owner_is "$r" "/usr/local/bin/worker" "755 root:root"
}

# The unit as installed, scored inside the root (not the checked-in file; `verify --root`
# would need a whole systemd tree there, deploy/verify-unit.sh verifies the file).
installed_unit_scores_in_the_root() {
  local r out
  r="$(fresh_root)"
  "$install_sh" --root "$r" --worker-bin "$stub_worker" >/dev/null || fail "install.sh exited $?"
  out="$(systemd-analyze security --offline=yes --root="$r" --threshold=15 verifier-worker.service 2>&1)" ||
    fail "$out"
  grep -F 'Overall exposure level for verifier-worker.service: 1.5' <<<"$out" ||
    fail "unexpected score: $(tail -1 <<<"$out")"
}

# Without install.sh too (a hand install, a wiped /var/lib): every directory the unit names
# is one systemd creates before the start (StateDirectory=), so the sandbox's mount setup
# cannot fail on a missing one (226/NAMESPACE). And the archive host is configurable.
unit_creates_every_directory_it_names() {
  local created=() path flag dir exec_start
  for path in $(unit_values "$unit" StateDirectory); do created+=("/var/lib/$path"); done
  for path in $(unit_values "$unit" CacheDirectory); do created+=("/var/cache/$path"); done
  exec_start="$(sed -n 's/^ExecStart=//p' "$unit")"
  local named=()
  # A path written with a leading '-' is optional: systemd skips it when it is missing rather
  # than fail the start (/run/lock, which every systemd host has, for the sandbox uid leases).
  for path in $(unit_values "$unit" ReadWritePaths); do
    [[ "$path" == -* ]] || named+=("$path")
  done
  for flag in --out --state --staging-root --work-dir; do
    dir="$(sed -n "s/.* $flag \([^ ]*\).*/\1/p" <<<"$exec_start")"
    named+=("$dir")
  done
  for path in "${named[@]}"; do
    [[ " ${created[*]} " == *" $path "* ]] ||
      fail "the unit names $path, which its StateDirectory= does not create (${created[*]})"
  done
  grep -qF -- "--archive-base \${VERIFIER_ARCHIVE_BASE}" <<<"$exec_start" ||
    fail "ExecStart does not pass --archive-base from the env file"
}

second_run_changes_nothing() {
  local r before after out
  r="$(fresh_root)"
  "$install_sh" --root "$r" --worker-bin "$stub_worker" >/dev/null || fail "first run exited $?"
  before="$(tree_state "$r")"
  out="$("$install_sh" --root "$r" --worker-bin "$stub_worker")" || fail "second run exited $?: $out"
  after="$(tree_state "$r")"
  [[ "$before" == "$after" ]] || fail "second run changed the tree: $(diff <(echo "$before") <(echo "$after"))"
  ! grep -q '^+ ' <<<"$out" || fail "second run ran commands: $out"
  grep -q '^nothing to do' <<<"$out" || fail "second run did not say nothing to do: $out"
}

existing_env_file_is_never_overwritten() {
  local r out status=0
  r="$(fresh_root)"
  "$install_sh" --root "$r" >/dev/null || fail "first run exited $?"
  sed -i 's|^VERIFIER_API=.*|VERIFIER_API=https://platform.operator.example|' "$r/etc/verifier/worker.env"
  cp "$r/etc/verifier/worker.env" "$tmp/edited.env"
  "$install_sh" --root "$r" >/dev/null || fail "rerun exited $?"
  cmp "$tmp/edited.env" "$r/etc/verifier/worker.env" || fail "the operator's env file was replaced"
  # An env file from before VERIFIER_ARCHIVE_BASE existed: kept, and the run fails naming it.
  sed -i '/^VERIFIER_ARCHIVE_BASE=/d;/^VERIFIER_OPTIONS=/d' "$r/etc/verifier/worker.env"
  cp "$r/etc/verifier/worker.env" "$tmp/old.env"
  out="$("$install_sh" --root "$r" 2>&1)" || status=$?
  ((status == 1)) || fail "an env file lacking variables: exit $status, expected 1: $out"
  grep -q 'lacks VERIFIER_ARCHIVE_BASE VERIFIER_OPTIONS' <<<"$out" || fail "no clear message: $out"
  cmp "$tmp/old.env" "$r/etc/verifier/worker.env" || fail "the old env file was replaced"
}

dry_run_changes_nothing() {
  local r before after out
  r="$(fresh_root)"
  before="$(tree_state "$r")"
  out="$("$install_sh" --root "$r" --dry-run --worker-bin "$stub_worker")" || fail "dry run exited $?: $out"
  after="$(tree_state "$r")"
  [[ "$before" == "$after" ]] || fail "the dry run changed the tree"
  grep -q '^+ useradd' <<<"$out" || fail "the dry run did not show the useradd: $out"
  grep -q "^+ install -m 0644 -o 0 -g 0 .*worker.env.example $r/etc/verifier/worker.env$" <<<"$out" ||
    fail "the dry run did not show the env file: $out"
}

# On the real root a dry run reads the host's user database through getent, which fails for
# a user not there yet; that once ended the run silently after the first lines.
dry_run_on_the_real_root_runs_to_its_summary() {
  local out
  out="$("$install_sh" --dry-run 2>&1)" || fail "exit $?: $out"
  grep -Eq '^(would make [0-9]+ change\(s\)|nothing to do: everything was already installed)$' <<<"$out" ||
    fail "no summary line: $out"
}

refuses_to_write_through_a_symlink() {
  local r status=0 out
  r="$(fresh_root)"
  mkdir -p "$r/etc/verifier"
  ln -s "$tmp/elsewhere.env" "$r/etc/verifier/worker.env"
  out="$("$install_sh" --root "$r" 2>&1)" || status=$?
  ((status == 1)) || fail "exit $status: $out"
  grep -q 'is a symbolic link' <<<"$out" || fail "no clear message: $out"
  [[ ! -e "$tmp/elsewhere.env" ]] || fail "wrote through the link"
}

# Issue #49: a worker binary was installed whatever its bytes; with the release's SHA256SUMS
# a copy that differs in one byte is refused before anything changes.
# refused WHAT CMD...: runs CMD, an install into the root $r, expecting exit 1 with the root as
# it was; leaves its output (stdout and stderr) in `out` and the root's state in `before` for
# the case's own checks. WHAT names the refused input in the message of a changed root.
refused() {
  local what="$1" status=0
  shift
  before="$(tree_state "$r")"
  out="$("$@" 2>&1)" || status=$?
  ((status == 1)) || fail "exit $status: $out"
  [[ "$before" == "$(tree_state "$r")" ]] || fail "the root changed before the $what was refused"
}

worker_bin_differing_from_the_release_sums_is_refused() {
  local r before status=0 out
  r="$(fresh_root)"
  mkdir -p "$tmp/release"
  cp "$stub_worker" "$tmp/release/worker"
  (cd "$tmp/release" && sha256sum worker >SHA256SUMS)
  cp "$tmp/release/worker" "$tmp/release/worker-flipped"
  # One byte in the middle replaced by another: same size, other digest.
  local size offset byte
  size="$(stat -c %s "$tmp/release/worker-flipped")"
  offset=$((size / 2))
  byte="$(od -An -tu1 -j "$offset" -N1 "$tmp/release/worker-flipped" | tr -d ' ')"
  printf '%b' "\\$(printf '%03o' $(((byte + 1) % 256)))" |
    dd of="$tmp/release/worker-flipped" bs=1 seek="$offset" conv=notrunc status=none
  refused binary "$install_sh" --root "$r" --worker-bin "$tmp/release/worker-flipped" --sha256sums "$tmp/release/SHA256SUMS"
  grep -q "does not match the release's SHA256SUMS" <<<"$out" || fail "no clear message: $out"
  # Matching sums alone install nothing either: a release's binary needs its provenance.
  status=0
  out="$("$install_sh" --root "$r" --worker-bin "$tmp/release/worker" --sha256sums "$tmp/release/SHA256SUMS" 2>&1)" || status=$?
  ((status == 1)) || fail "sums without provenance: exit $status: $out"
  grep -q "without --provenance" <<<"$out" || fail "no clear message: $out"
  [[ "$before" == "$(tree_state "$r")" ]] || fail "the root changed without provenance"
}

# Issue #49 item 3: a release's worker is installed only when its Sigstore provenance verifies
# offline against deploy/sigstore/trusted_root.json. A real GitHub Actions SLSA bundle and the
# file it attests (crates/provenance/tests/fixtures: pypi-attestations 0.0.19, built by
# trailofbits/pypi-attestations' release.yml at 08802efe…) stand in for a release's worker.
prov_fixtures="$repo/crates/provenance/tests/fixtures"
prov_release=trailofbits/pypi-attestations@08802efe1f8e5fec4ad842d6b8ce97656092ee72
prov_release_dir() { # dir [flip]: the "worker", its SHA256SUMS (written after any flip)
  mkdir -p "$1"
  cp "$prov_fixtures/pypi_attestations-0.0.19.tar.gz" "$1/worker"
  chmod 0755 "$1/worker"
  if [[ -n "${2:-}" ]]; then
    local offset byte
    offset=$(($(stat -c %s "$1/worker") / 2))
    byte="$(od -An -tu1 -j "$offset" -N1 "$1/worker" | tr -d ' ')"
    printf '%b' "\\$(printf '%03o' $(((byte + 1) % 256)))" | dd of="$1/worker" bs=1 seek="$offset" conv=notrunc status=none
  fi
  (cd "$1" && sha256sum worker >SHA256SUMS)
}
install_release() { # dir [env...]: install.sh with the fixture's bundle, as the fixture's signer
  local dir="$1"
  shift
  env PROVENANCE_VERIFIER="$bin_dir/verify-provenance" "$@" "$install_sh" --root "$r" \
    --worker-bin "$dir/worker" --sha256sums "$dir/SHA256SUMS" \
    --provenance "$prov_fixtures/pypi_attestations-0.0.19.tar.gz.slsa.sigstore.json" --release "$prov_release"
}
prov_signer=(SIGNER_WORKFLOW=release.yml SIGNER_REF=refs/tags/v0.0.19 SOURCE_REF=refs/tags/v0.0.19)

worker_bin_whose_provenance_verifies_offline_is_installed() {
  local out
  r="$(fresh_root)"
  prov_release_dir "$tmp/prov-good"
  out="$(install_release "$tmp/prov-good" "${prov_signer[@]}" 2>&1)" || fail "exit $?: $out"
  grep -q "^verified: " <<<"$out" || fail "no verification said: $out"
  cmp -s "$tmp/prov-good/worker" "$r/usr/local/bin/worker" || fail "the verified binary was not installed"
}

# Whoever hands over the binary can hand over matching sums too: one byte changed and the sums
# rewritten pass the checksum, not the provenance.
worker_bin_with_one_byte_changed_and_sums_to_match_is_refused_by_its_provenance() {
  local before out
  r="$(fresh_root)"
  prov_release_dir "$tmp/prov-flipped" flip
  refused binary install_release "$tmp/prov-flipped" "${prov_signer[@]}"
  grep -q "its provenance does not verify" <<<"$out" || fail "no clear message: $out"
  grep -q "artifact hash does not match" <<<"$out" || fail "not refused for its digest: $out"
}

# The default signer is the release repository's own release-build workflow on main: a real
# bundle signed by another workflow (the fixture's) is refused.
worker_bin_signed_by_another_workflow_is_refused() {
  local before out
  r="$(fresh_root)"
  prov_release_dir "$tmp/prov-other"
  refused binary install_release "$tmp/prov-other"
  grep -q "identity mismatch" <<<"$out" || fail "no clear message: $out"
}

# install.sh reads verify-provenance's exit code: 4 is a refused binary, 78 a trusted root it
# cannot use, which is said as such rather than blamed on the binary.
worker_bin_checked_against_an_unusable_trusted_root_is_not_installed_and_the_root_is_named() {
  local before out
  r="$(fresh_root)"
  prov_release_dir "$tmp/prov-root"
  printf '{}\n' >"$tmp/not-a-trusted-root.json"
  refused binary install_release "$tmp/prov-root" "${prov_signer[@]}" TRUSTED_ROOT="$tmp/not-a-trusted-root.json"
  grep -q "trusted root $tmp/not-a-trusted-root.json is unusable (verify-provenance exit 78)" <<<"$out" || fail "no clear message: $out"
  ! grep -q "its provenance does not verify" <<<"$out" || fail "blamed on the binary: $out"
}

refuses_a_root_without_a_docker_group() {
  local r status=0 out
  r="$(fresh_root)"
  printf 'root:x:0:\n' >"$r/etc/group"
  out="$("$install_sh" --root "$r" 2>&1)" || status=$?
  ((status == 1)) || fail "exit $status: $out"
  grep -q "no 'docker' group" <<<"$out" || fail "no clear message: $out"
  ! grep -q '^verifier:' "$r/etc/passwd" || fail "a user was created anyway"
}

pull_list_with_a_tag_is_refused_before_anything_changes() {
  local r before out
  r="$(fresh_root)"
  printf '# images\n127.0.0.1:5000/verifier-busybox@sha256:%s\n127.0.0.1:5000/verifier-busybox:latest\n' \
    "$(printf 'a%.0s' $(seq 64))" >"$tmp/images.txt"
  refused list "$install_sh" --root "$r" --pull-images "$tmp/images.txt"
  grep -q "images.txt:3: '127.0.0.1:5000/verifier-busybox:latest' is not an image reference by digest" <<<"$out" ||
    fail "no clear message: $out"
}

# A real pull from the local registry: a fresh repository name whose only local reference
# is removed first, so the image is absent by that name until install.sh pulls it.
pull_list_pulls_by_digest() {
  local r out busybox
  busybox="$(jq -r .busybox "$repo/.work/images.json")" || fail "no .work/images.json (scripts/services.sh)"
  pulled_tag="127.0.0.1:5000/deploy-install-test:$$"
  docker tag "$busybox" "$pulled_tag" || fail "could not tag $busybox"
  docker push --quiet "$pulled_tag" >/dev/null || fail "could not push $pulled_tag to the local registry"
  pulled_ref="$(docker image inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$pulled_tag" |
    grep '^127.0.0.1:5000/deploy-install-test@')" || fail "no repo digest for $pulled_tag"
  docker rmi "$pulled_tag" >/dev/null
  ! docker image inspect "$pulled_ref" >/dev/null 2>&1 || fail "$pulled_ref still present before the pull"
  printf '%s\n' "$pulled_ref" >"$tmp/images.txt"
  r="$(fresh_root)"
  out="$("$install_sh" --root "$r" --pull-images "$tmp/images.txt" 2>&1)" || fail "exit $?: $out"
  grep -qF "+ docker pull --quiet --platform linux/amd64 $pulled_ref" <<<"$out" || fail "no pull shown: $out"
  docker image inspect "$pulled_ref" >/dev/null || fail "$pulled_ref not present after install.sh"
  out="$("$install_sh" --root "$r" --pull-images "$tmp/images.txt" 2>&1)" || fail "rerun exit $?: $out"
  grep -qF "ok: image $pulled_ref is present" <<<"$out" || fail "rerun pulled again: $out"
}

# --- exec-start.sh -------------------------------------------------------------------------

# The command a host without systemd runs is the unit's, expanded by systemd's rules.
exec_start_expands_like_systemd() {
  local r out
  r="$(fresh_root)"
  "$install_sh" --root "$r" >/dev/null || fail "install.sh exited $?"
  local env="$r/etc/verifier/worker.env"
  sed -i 's|^VERIFIER_OPTIONS=.*|VERIFIER_OPTIONS=--pull  --parallel 2|' "$env"
  out="$("$deploy/exec-start.sh" --root "$r" --print)" || fail "exit $?: $out"
  [[ "$(head -n 2 <<<"$out" | tr '\n' ' ')" == "/usr/local/bin/worker serve " ]] || fail "start: $out"
  grep -A1 -xF -- '--archive-base' <<<"$out" | grep -qxF 'https://codeload.github.com' ||
    fail "no --archive-base from the env file: $out"
  [[ "$(tail -n 3 <<<"$out" | tr '\n' ' ')" == "--pull --parallel 2 " ]] ||
    fail "\$VERIFIER_OPTIONS not split into words: $(tail -n 4 <<<"$out")"
  # Empty: no argument at all (not an empty one).
  sed -i 's|^VERIFIER_OPTIONS=.*|VERIFIER_OPTIONS=|' "$env"
  out="$("$deploy/exec-start.sh" --root "$r" --print)" || fail "exit $?: $out"
  [[ "$(tail -n 1 <<<"$out")" == "127.0.0.1:9464" ]] || fail "empty options left an argument: $(tail -n 2 <<<"$out")"
  # A variable the unit names and the file lacks is an error, not an empty argument.
  sed -i '/^VERIFIER_ARCHIVE_BASE=/d' "$env"
  local status=0
  out="$("$deploy/exec-start.sh" --root "$r" --print 2>&1)" || status=$?
  ((status == 1)) || fail "unset variable: exit $status: $out"
  grep -qF "names \${VERIFIER_ARCHIVE_BASE}" <<<"$out" || fail "message: $out"
}

# The unit checks the host with `worker doctor` before every start (ExecStartPre=), on the
# staging root ExecStart hands the worker, with the env file's VERIFIER_DOCTOR_OPTIONS split
# into words; exec-start.sh runs the same check first on hosts without systemd.
unit_runs_worker_doctor_before_serve() {
  local r out pre start_root pre_root
  r="$(fresh_root)"
  "$install_sh" --root "$r" >/dev/null || fail "install.sh exited $?"
  local installed="$r/etc/systemd/system/verifier-worker.service"
  pre="$(sed -n 's/^ExecStartPre=//p' "$installed")"
  [[ "$pre" == "/usr/local/bin/worker doctor "* ]] || fail "ExecStartPre is not worker doctor: '$pre'"
  start_root="$(sed -n 's/^ExecStart=//p' "$installed" | grep -o -- '--staging-root [^ ]*')"
  pre_root="$(grep -o -- '--staging-root [^ ]*' <<<"$pre")"
  [[ -n "$pre_root" && "$pre_root" == "$start_root" ]] ||
    fail "doctor checks '$pre_root', serve uses '$start_root'"
  grep -q '^VERIFIER_DOCTOR_OPTIONS=' "$r/etc/verifier/worker.env" ||
    fail "worker.env lacks VERIFIER_DOCTOR_OPTIONS, which ExecStartPre names"
  sed -i 's|^VERIFIER_DOCTOR_OPTIONS=.*|VERIFIER_DOCTOR_OPTIONS=--oci-runtime runsc  --rpc https://rpc.example|' \
    "$r/etc/verifier/worker.env"
  out="$("$deploy/exec-start.sh" --root "$r" --print-pre)" || fail "exit $?: $out"
  [[ "$(tr '\n' ' ' <<<"$out")" == "/usr/local/bin/worker doctor --staging-root /var/cache/verifier/staging --oci-runtime runsc --rpc https://rpc.example " ]] ||
    fail "pre: $out"
  # An env file from before ExecStartPre= (no VERIFIER_DOCTOR_OPTIONS): the doctor's defaults.
  sed -i '/^VERIFIER_DOCTOR_OPTIONS=/d' "$r/etc/verifier/worker.env"
  out="$("$deploy/exec-start.sh" --root "$r" --print-pre)" || fail "exit $?: $out"
  [[ "$(tr '\n' ' ' <<<"$out")" == "/usr/local/bin/worker doctor --staging-root /var/cache/verifier/staging " ]] ||
    fail "pre without the variable: $out"
}

# --- pull-candidates.sh --------------------------------------------------------------------
pull_sh="$deploy/pull-candidates.sh"
name_of() { printf 'candidate-%s.json' "$(printf '%s' "$1" | sha256sum | cut -c1-64)"; }
# A worker out directory: one good candidate with its statement, and the manifest listing
# the given job ids.
out_dir_listing() {
  local d="$1" id
  shift
  mkdir -p "$d"
  local entries=()
  for id in "$@"; do entries+=("{\"job_id\":\"$id\",\"file\":\"$(name_of "$id")\"}"); done
  local IFS=,
  printf '{"schema":"agent-bounties/regression-candidates-v1","network":"base-mainnet","candidates":[%s]}' \
    "${entries[*]}" >"$d/manifest.json"
}

pull_copies_exactly_the_listed_candidates() {
  local src="$tmp/pull1/out" dst="$tmp/pull1/dst" out
  out_dir_listing "$src" job-a job-b
  echo '{"candidate":"a"}' >"$src/$(name_of job-a)"
  echo '{"statement":"a"}' >"$src/$(name_of job-a | sed 's/\.json$/.intoto.json/')"
  echo '{"candidate":"b"}' >"$src/$(name_of job-b)"
  echo '{"candidate":"unlisted"}' >"$src/$(name_of job-c)"
  echo 'ledger' >"$src/ledger.sqlite"
  out="$("$pull_sh" --from "$src" --to "$dst" 2>&1)" || fail "exit $?: $out"
  grep -q "^pulled 2 of 2 listed candidate(s)" <<<"$out" || fail "summary: $out"
  local got
  got="$(find "$dst" -mindepth 1 -printf '%f\n' | sort | tr '\n' ' ')"
  [[ "$got" == "$(printf '%s\n' "$(name_of job-a)" "$(name_of job-a | sed 's/\.json$/.intoto.json/')" \
    "$(name_of job-b)" manifest.json | sort | tr '\n' ' ')" ]] || fail "pulled: $got"
  cmp "$src/manifest.json" "$dst/manifest.json" || fail "manifest changed in transit"
}

# A compromised worker host plants a symlink (to the signer host's files, once copied),
# an oversized file and a directory where candidates should be.
pull_refuses_links_oversize_and_directories() {
  local src="$tmp/pull2/out" dst="$tmp/pull2/dst" out
  out_dir_listing "$src" job-link job-big job-dir job-ok
  ln -s /etc/shadow "$src/$(name_of job-link)"
  head -c $((16 * 1024 * 1024 + 1)) /dev/zero >"$src/$(name_of job-big)"
  mkdir "$src/$(name_of job-dir)"
  echo '{}' >"$src/$(name_of job-dir)/inner.json"
  echo '{"candidate":"ok"}' >"$src/$(name_of job-ok)"
  out="$("$pull_sh" --from "$src" --to "$dst" 2>&1)" || fail "exit $?: $out"
  grep -q "^pulled 1 of 4 listed candidate(s)" <<<"$out" || fail "summary: $out"
  [[ ! -e "$dst/$(name_of job-link)" && ! -L "$dst/$(name_of job-link)" ]] || fail "the symlink was copied"
  [[ ! -e "$dst/$(name_of job-big)" ]] || fail "the oversized file was copied"
  [[ ! -e "$dst/$(name_of job-dir)/inner.json" ]] || fail "the directory's content was copied"
  [[ -f "$dst/$(name_of job-ok)" ]] || fail "the good candidate is missing"
}

pull_refuses_a_manifest_naming_other_files() {
  local src="$tmp/pull3/out" dst="$tmp/pull3/dst" out status=0
  mkdir -p "$src"
  printf '{"schema":"x","network":"base-mainnet","candidates":[{"job_id":"j","file":"../../etc/passwd"}]}' \
    >"$src/manifest.json"
  out="$("$pull_sh" --from "$src" --to "$dst" 2>&1)" || status=$?
  ((status == 1)) || fail "exit $status: $out"
  grep -q "names '../../etc/passwd', not a candidate-<64 hex>.json file" <<<"$out" || fail "message: $out"
  [[ ! -e "$dst/manifest.json" ]] || fail "a manifest was left in $dst"
  # Too many entries, and not a manifest at all.
  local many
  many="$(jq -n --arg f "$(name_of x)" '{candidates: [range(1001) | {job_id: "x", file: $f}]}')"
  printf '%s' "$many" >"$src/manifest.json"
  status=0
  out="$("$pull_sh" --from "$src" --to "$tmp/pull3/dst2" 2>&1)" || status=$?
  ((status == 1)) || fail "1001 entries: exit $status: $out"
  echo '[1,2]' >"$src/manifest.json"
  status=0
  out="$("$pull_sh" --from "$src" --to "$tmp/pull3/dst3" 2>&1)" || status=$?
  ((status == 1)) || fail "not a manifest: exit $status: $out"
  # A manifest that is a symlink is not followed.
  rm "$src/manifest.json"
  printf '{"candidates":[]}' >"$tmp/pull3/elsewhere.json"
  ln -s "$tmp/pull3/elsewhere.json" "$src/manifest.json"
  status=0
  out="$("$pull_sh" --from "$src" --to "$tmp/pull3/dst4" 2>&1)" || status=$?
  ((status == 1)) || fail "symlinked manifest: exit $status: $out"
}

# The production transport: ssh to an account whose authorized_keys forces `rrsync -ro` on
# the out directory (forced-command-ssh.sh runs what sshd would). The pull works through it,
# and the same account can neither write there nor read outside it.
pull_through_the_read_only_forced_command() {
  local src="$tmp/pull5/out" dst="$tmp/pull5/dst" out status=0
  out_dir_listing "$src" job-a
  echo '{"candidate":"a"}' >"$src/$(name_of job-a)"
  echo 'outside' >"$tmp/pull5/secret"
  out="$(RSYNC_RSH="$here/forced-command-ssh.sh" FORCED_RRSYNC_DIR="$src" \
    "$pull_sh" --from worker-host: --to "$dst" 2>&1)" || fail "exit $?: $out"
  grep -q "^pulled 1 of 1 listed candidate(s) from worker-host:" <<<"$out" || fail "summary: $out"
  cmp "$src/$(name_of job-a)" "$dst/$(name_of job-a)" || fail "candidate differs"
  echo planted >"$tmp/planted.json"
  out="$(RSYNC_RSH="$here/forced-command-ssh.sh" FORCED_RRSYNC_DIR="$src" \
    rsync "$tmp/planted.json" worker-host:planted.json 2>&1)" || status=$?
  ((status != 0)) || fail "a write through the pull account succeeded"
  [[ ! -e "$src/planted.json" ]] || fail "planted.json reached the out directory"
  status=0
  out="$(RSYNC_RSH="$here/forced-command-ssh.sh" FORCED_RRSYNC_DIR="$src" \
    rsync worker-host:../secret "$tmp/pull5/leak" 2>&1)" || status=$?
  [[ ! -e "$tmp/pull5/leak" ]] || fail "read outside the out directory: $out"
}

pull_into_a_used_directory_is_refused() {
  local src="$tmp/pull4/out" dst="$tmp/pull4/dst" out status=0
  out_dir_listing "$src"
  mkdir -p "$dst"
  echo old >"$dst/$(name_of old)"
  out="$("$pull_sh" --from "$src" --to "$dst" 2>&1)" || status=$?
  ((status == 1)) || fail "exit $status: $out"
  grep -q "is not empty" <<<"$out" || fail "message: $out"
}

check deploy_scripts_pass_shellcheck shellcheck -x "$deploy"/*.sh "$here"/*.sh
check unit_creates_every_directory_it_names unit_creates_every_directory_it_names
check install_creates_every_path_the_unit_names install_creates_every_path_the_unit_names
check installed_unit_scores_in_the_root installed_unit_scores_in_the_root
check second_run_changes_nothing second_run_changes_nothing
check existing_env_file_is_never_overwritten existing_env_file_is_never_overwritten
check dry_run_changes_nothing dry_run_changes_nothing
check dry_run_on_the_real_root_runs_to_its_summary dry_run_on_the_real_root_runs_to_its_summary
check refuses_to_write_through_a_symlink refuses_to_write_through_a_symlink
check refuses_a_root_without_a_docker_group refuses_a_root_without_a_docker_group
check worker_bin_differing_from_the_release_sums_is_refused worker_bin_differing_from_the_release_sums_is_refused
check worker_bin_whose_provenance_verifies_offline_is_installed worker_bin_whose_provenance_verifies_offline_is_installed
check worker_bin_with_one_byte_changed_and_sums_to_match_is_refused_by_its_provenance worker_bin_with_one_byte_changed_and_sums_to_match_is_refused_by_its_provenance
check worker_bin_signed_by_another_workflow_is_refused worker_bin_signed_by_another_workflow_is_refused
check worker_bin_checked_against_an_unusable_trusted_root_is_not_installed_and_the_root_is_named worker_bin_checked_against_an_unusable_trusted_root_is_not_installed_and_the_root_is_named
check pull_list_with_a_tag_is_refused_before_anything_changes pull_list_with_a_tag_is_refused_before_anything_changes
check pull_list_pulls_by_digest pull_list_pulls_by_digest
check exec_start_expands_like_systemd exec_start_expands_like_systemd
check unit_runs_worker_doctor_before_serve unit_runs_worker_doctor_before_serve
check pull_copies_exactly_the_listed_candidates pull_copies_exactly_the_listed_candidates
check pull_refuses_links_oversize_and_directories pull_refuses_links_oversize_and_directories
check pull_refuses_a_manifest_naming_other_files pull_refuses_a_manifest_naming_other_files
check pull_through_the_read_only_forced_command pull_through_the_read_only_forced_command
check pull_into_a_used_directory_is_refused pull_into_a_used_directory_is_refused

# --- the unit under systemd as PID 1 --------------------------------------------------------
# In a container (systemd-unit.sh says how and why); the real worker and the bench_feed
# stand-in, built (or handed over) before the cases ran.
unit_starts_and_stops_under_systemd_as_pid_1() {
  "$here/systemd-unit.sh" "$bin_dir/worker" "$bin_dir/examples/bench_feed"
}
check unit_starts_and_stops_under_systemd_as_pid_1 unit_starts_and_stops_under_systemd_as_pid_1

echo "$passed passed, $failed failed"
((failed == 0))
