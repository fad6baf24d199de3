#!/usr/bin/env bash
# The privileged steps of .ci/run as GitHub's runner runs them (issue #51 item 1): as an
# unprivileged user with password-less sudo and membership of the docker group, in a checkout
# it owns, with its own HOME and a CARGO_TARGET_DIR it can write, and no cargo on its PATH
# (the binaries are built here first, by the caller, and handed over: compiling the workspace
# again as that user would cost half an hour of CI's budget). Every step that needs root must
# reach it through as_root (scripts/lib/host.sh) or `sudo -n`, or it fails here as on GitHub.
#
#   scripts/tests/runner-user.sh
#
# Run as root (this project's CI) or as a user with password-less sudo: it creates, once,
# the user $RUNNER_USER (default verifier-ci-runner) with a home, /etc/sudoers.d/$RUNNER_USER
# (`ALL=(ALL) NOPASSWD:ALL`, as GitHub's image has for `runner`) and membership of docker,
# installs sudo when it is missing, and replaces the user's checkout
# (~$RUNNER_USER/checkout: the working tree's tracked and unignored files, plus
# .work/images.json of scripts/services.sh) and ~$RUNNER_USER/target (removed again at the
# end). Nothing else is removed, and the user is kept for the next run. On GitHub itself
# .ci/run skips this script: there every step already runs as the runner user. Needs the services up (scripts/services.sh).
#
# The steps, each run as that user:
#   sudo_and_docker        `sudo -n true` works, and `docker version` answers without sudo.
#   deploy_tests           deploy/tests/run.sh with the prebuilt worker, verify-provenance and bench_feed
#                          (DEPLOY_TESTS_BIN_DIR): install.sh into throwaway roots and the
#                          unit under systemd as PID 1 (systemd-unit.sh), the cases as root
#                          through the script's own as_root.
#   systemd_unit_unprivileged  deploy/tests/systemd-unit.sh run by the user itself: Docker
#                          through the group, the staging root's `install -d -o` (and
#                          debootstrap, when its image is not built yet) through as_root.
#   tmpfs_stale_mounts     the e2e test a_killed_runs_tmpfs_mounts_do_not_stop_the_next_run
#                          (the suite's test binary): mount and umount through `sudo -n`.
#   worker_root_tests      the worker integration tests that chown, make a setuid-root probe
#                          or drop to uid 65534 (test_root: `sudo -n chown`, `sudo -n setpriv`).
#   key_file_owner_tests   the signer's and keeper's tests of a key file another user owns
#                          (test_root: `sudo -n chown`).
#   chaos_seed_unprivileged  one short chaos schedule with disk faults, run by the user: the
#                          tmpfs mounts ci_seeds_keep_every_money_path_invariant makes (the
#                          same driver, e2e::chaos::run), through `sudo -n`, writable by the user.
#   chaos_seed_as_root     the same through as_root, as .ci/run runs its Docker-restart seeds
#                          (without --allow-docker-restart: other tests share the daemon).
#
# Prints one line per step and closes with "N passed, N failed"; exit 1 on any failure.
# The `bash -c` scripts of the steps expand their own arguments:
# shellcheck disable=SC2016
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
# shellcheck source=scripts/lib/host.sh
source scripts/lib/host.sh

user="${RUNNER_USER:-verifier-ci-runner}"
repo="$PWD"
target="${CARGO_TARGET_DIR:-$repo/target}/debug"

# --- the user, as GitHub's image has it ----------------------------------------------------
if ! command -v sudo >/dev/null 2>&1; then
  log "installing sudo (Debian package): the runner user reaches root only through it"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sudo >/dev/null || {
    as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sudo >/dev/null
  } || die "could not install sudo"
fi
if ! getent passwd "$user" >/dev/null; then
  log "creating the user $user"
  as_root useradd --create-home --shell /bin/bash --user-group "$user" || die "useradd $user failed"
fi
if ! id -nG "$user" | tr ' ' '\n' | grep -qx docker; then
  as_root usermod -a -G docker "$user" || die "could not add $user to docker"
fi
sudoers="/etc/sudoers.d/$user"
rule="$user ALL=(ALL) NOPASSWD:ALL"
if [[ "$(as_root cat "$sudoers" 2>/dev/null)" != "$rule" ]]; then
  drop_in="$(mktemp)"
  printf '%s\n' "$rule" >"$drop_in"
  as_root visudo -cqf "$drop_in" || die "visudo refuses $rule"
  as_root install -m 0440 -o 0 -g 0 "$drop_in" "$sudoers" || die "could not write $sudoers"
  rm -f "$drop_in"
fi
home="$(getent passwd "$user" | cut -d: -f6)"
[[ -d "$home" ]] || die "$user has no home directory ($home)"

# --- the binaries, built by the caller -----------------------------------------------------
step "building worker, signer, keeper, bounty-e2e, verify-provenance, bench_feed and the test binaries (as $(id -un))"
cargo build -q -p e2e -p worker -p signer -p keeper \
  --bin bounty-e2e --bin worker --bin signer --bin keeper --example bench_feed ||
  die "cargo build failed"
# deploy/tests/run.sh installs a release's worker only through verify-provenance (issue #49),
# taken from the handed-over binaries like the worker; built on its own, as run.sh does.
cargo build -q -p provenance --bin verify-provenance || die "cargo build -p provenance failed"
# The suite's own build (scripts/test.sh's `cargo nextest run --workspace` has just made it in
# .ci/run, so nothing is compiled again; `-p` would unify features differently and rebuild).
test_bins="$(cargo test -q --workspace --no-run --message-format=json 2>/dev/null |
  jq -r 'select(.profile.test == true) | "\(.target.src_path) \(.executable)"')" ||
  die "cargo test --workspace --no-run failed"
test_bin() {
  awk -v src="$repo/$1" '$1 == src { print $2 }' <<<"$test_bins" | tail -n 1
}
e2e_tests="$(test_bin crates/e2e/src/lib.rs)"
worker_it="$(test_bin crates/worker/tests/it/main.rs)"
signer_chain="$(test_bin crates/signer/tests/sign_chain.rs)"
keeper_resume="$(test_bin crates/keeper/tests/resume.rs)"
for bin in "$e2e_tests" "$worker_it" "$signer_chain" "$keeper_resume"; do
  [[ -x "$bin" ]] || die "a test binary was not built (e2e lib, worker it, signer sign_chain, keeper resume)"
done

# --- the user's checkout and target dir ----------------------------------------------------
as_user() {
  as_root runuser -u "$user" -- env -i HOME="$home" USER="$user" LOGNAME="$user" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    CARGO_TARGET_DIR="$home/target" "$@"
}
checkout="$home/checkout"
bins="$home/target/debug"
step "copying the working tree to $checkout and the binaries to $bins"
as_root rm -rf "$checkout" "$home/target"
as_user mkdir -p "$checkout/.work" "$bins/examples" "$bins/deps"
git ls-files -z --cached --others --exclude-standard | grep -zv '^\.work/' |
  tar --null -T - -c --ignore-failed-read 2>/dev/null | as_user tar -x -C "$checkout" ||
  die "could not copy the working tree"
as_user tee "$checkout/.work/images.json" <.work/images.json >/dev/null
hand_over() {
  as_user tee "$2" <"$1" >/dev/null || die "could not hand over $1"
  as_user chmod 0755 "$2" || die "could not hand over $1"
}
for bin in worker signer keeper bounty-e2e verify-provenance examples/bench_feed; do
  hand_over "$target/$bin" "$bins/$bin"
done
hand_over "$e2e_tests" "$bins/deps/e2e-tests"

# --- the steps -----------------------------------------------------------------------------
passed=0
failed=0
logs="$(mktemp -d)"
# The handed-over binaries (about 175 MiB) go at the end; the checkout (a few MiB) stays for
# a look after a failure and is replaced by the next run.
trap 'rm -rf "$logs"; as_root rm -rf "$home/target"' EXIT
check() {
  local name="$1" started=$SECONDS
  shift
  if "$@" >"$logs/$name.log" 2>&1; then
    echo "ok    $name ($((SECONDS - started)) s)"
    # What passed: a test binary's or script's own count, a chaos schedule's summary row.
    grep -E '^(test result:|[0-9]+ passed, [0-9]+ failed$|\| [0-9]+ \| [0-9]+ \||\| disk-full )' \
      "$logs/$name.log" | sed 's/^/      /'
    passed=$((passed + 1))
  else
    echo "FAIL  $name ($((SECONDS - started)) s)"
    tail -n 60 "$logs/$name.log" | sed 's/^/      /'
    failed=$((failed + 1))
  fi
}

sudo_and_docker() {
  as_user bash -c '[[ "$(id -u)" != 0 ]] && ! command -v cargo && sudo -n true && docker version --format "{{.Server.Version}}"'
}
deploy_tests() {
  as_user env DEPLOY_TESTS_BIN_DIR="$bins" "$checkout/deploy/tests/run.sh"
}
systemd_unit_unprivileged() {
  as_user "$checkout/deploy/tests/systemd-unit.sh" "$bins/worker" "$bins/examples/bench_feed"
}
tmpfs_stale_mounts() {
  as_user bash -c 'cd "$1" && "$2" --exact chaos::workdir::tests::a_killed_runs_tmpfs_mounts_do_not_stop_the_next_run' \
    _ "$checkout/crates/e2e" "$bins/deps/e2e-tests"
}
# The suite's tests that need root, run as the user through test_root's `sudo -n`: the
# worker's (a chown to another user, a setuid-root probe, a drop to uid 65534 with setpriv)
# and the signer's and keeper's key file of another user (a chown). The binaries are the
# suite's (they name this checkout's fixtures by path), so the user reads this checkout: its
# .work/images.json, private to whoever ran scripts/services.sh, is bind-mounted readable in a
# mount namespace of the step's own, and git is told the checkout is safe (on GitHub the user
# owns both).
suite_test_as_user() {
  as_user bash -c 'git config --global --get-all safe.directory | grep -qxF "$1" ||
    git config --global --add safe.directory "$1"' _ "$repo" || return 1
  as_root unshare --mount --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' \
    _ "$checkout/.work/images.json" "$repo/.work/images.json" \
    runuser -u "$user" -- env -i HOME="$home" USER="$user" LOGNAME="$user" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    "$@" --exact --test-threads 1
}
worker_root_tests() {
  suite_test_as_user "$worker_it" \
    docker::doctor::a_user_without_access_to_the_docker_socket_is_told_permission_denied_not_start_the_daemon \
    docker::sandbox_profile::setuid_root_binary_does_not_elevate \
    docker::rehearse::a_repository_git_refuses_is_refused_with_the_reason_not_staged_as_the_working_copy
}
key_file_owner_tests() {
  suite_test_as_user "$signer_chain" binary_refuses_a_key_file_owned_by_another_user_with_exit_78 &&
    suite_test_as_user "$keeper_resume" \
      binary_refuses_a_key_file_of_another_user_or_under_a_symlinked_directory_with_exit_78
}
# A short schedule (seed 5: 2 bounties, 3 faults, one of them filling a tmpfs, so the driver
# mounts both and the binaries write to them; about 5 s). Passes when the driver exits 0 (no
# invariant broken) and the disk-full fault fired.
chaos_seed() {
  local how="$1" work="$2" out
  out="$(as_user bash -c 'source "$1/scripts/lib/host.sh" && cd "$1" && shift &&
    if [[ "$1" == as_root ]]; then shift; as_root "$@"; else shift; "$@"; fi' _ "$checkout" "$how" \
    "$bins/bounty-e2e" --repo "$checkout" --bin-dir "$bins" --work-dir "$work" \
    chaos --seed 5 --bounties 2 --faults 3 --no-clock 2>&1)" || {
    printf '%s\n' "$out"
    return 1
  }
  printf '%s\n' "$out"
  grep -Eq '^\| disk-full \| [0-9]+ \| [1-9]' <<<"$out" || {
    echo "no disk-full fault fired: the tmpfs mounts were not exercised"
    return 1
  }
}
chaos_seed_unprivileged() {
  chaos_seed direct "$checkout/.work/chaos-runner-user"
}
chaos_seed_as_root() {
  chaos_seed as_root "$checkout/.work/chaos-runner-user-root"
}

check sudo_and_docker sudo_and_docker
check deploy_tests deploy_tests
check systemd_unit_unprivileged systemd_unit_unprivileged
check tmpfs_stale_mounts tmpfs_stale_mounts
check worker_root_tests worker_root_tests
check key_file_owner_tests key_file_owner_tests
check chaos_seed_unprivileged chaos_seed_unprivileged
check chaos_seed_as_root chaos_seed_as_root

echo "$passed passed, $failed failed"
((failed == 0))
