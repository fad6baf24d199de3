#!/usr/bin/env bash
# Tests of scripts/reproduce-build.sh on tiny crates built for real (a few seconds each): a
# crate that builds reproducibly passes, and each way a build can carry where, when or by whom
# it was built is caught. The leaking crates are the attacks on the script: a build script
# that embeds the build time, the source directory (env!("CARGO_MANIFEST_DIR"), which
# --remap-path-prefix does not reach), the host name and the user who built it.
#
#   scripts/tests/reproduce-build.sh        prints one line per case and "N passed, N failed"
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script="${here}/../reproduce-build.sh"
toolchain="${here}/../../rust-toolchain.toml"

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
# The second build runs as another user (repro-build), who must reach its build directory.
chmod 0711 "${tmp}"

# shellcheck source=scripts/tests/check.sh
source "${here}/check.sh"

# crate NAME MAIN_RS [BUILD_RS]: a git repository holding one binary crate without
# dependencies, its Cargo.lock committed (the script builds --locked).
crate() {
  local name="$1" main_rs="$2" build_rs="${3:-}" repo="${tmp}/$1"
  mkdir -p "${repo}/src"
  cp "${toolchain}" "${repo}/rust-toolchain.toml"
  printf '[package]\nname = "%s"\nversion = "0.1.0"\nedition = "2021"\n' "${name}" >"${repo}/Cargo.toml"
  printf '%s\n' "${main_rs}" >"${repo}/src/main.rs"
  [[ -z "${build_rs}" ]] || printf '%s\n' "${build_rs}" >"${repo}/build.rs"
  (cd "${repo}" && cargo generate-lockfile -q --offline && git init -q &&
    git add . && git -c user.name=t -c user.email=t@t commit -q -m crate) || return 1
  echo "${repo}"
}

# reproduce REPO NAME: the script's exit status on the crate; its stderr in ${tmp}/NAME.log.
# Without cargo auditable unless the case asks for it (REPRO_AUDITABLE=1).
reproduce() {
  REPRO_SOURCE="$1" REPRO_WORK="${tmp}/work" REPRO_AUDITABLE="${REPRO_AUDITABLE:-0}" \
    "${script}" "$2" >"${tmp}/$2.out" 2>"${tmp}/$2.log"
}

refused_for() {
  local name="$1" why="$2" status=0
  reproduce "${tmp}/${name}" "${name}" || status=$?
  if ((status != 1)); then
    echo "  expected exit 1, got ${status}" >&2
    return 1
  fi
  grep -q -- "${why}" "${tmp}/${name}.log" || {
    echo "  no '${why}' in its log:" >&2
    tail -n 20 "${tmp}/${name}.log" >&2
    return 1
  }
}

passes() {
  local name="$1"
  reproduce "${tmp}/${name}" "${name}" || {
    tail -n 30 "${tmp}/${name}.log" >&2
    return 1
  }
  grep -Eq "^[0-9a-f]{64}  ${name}\$" "${tmp}/${name}.out"
}

# passes_auditable NAME: passes, and the binary carries cargo auditable's dependency list (the
# .dep-v0 section), so the wrapper did run in both builds.
passes_auditable() {
  REPRO_OUT="${tmp}/$1.bin" passes "$1" || return 1
  readelf -S "${tmp}/$1.bin/$1" | grep -q '\.dep-v0' || {
    echo "  no .dep-v0 section in $1: cargo-auditable did not run" >&2
    return 1
  }
}

crate clean 'fn main() { let at = std::panic::Location::caller(); println!("clean {at}"); }' >/dev/null
crate timestamp 'fn main() { println!("built at {}", env!("BUILT_AT")); }' \
  'fn main() {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    println!("cargo:rustc-env=BUILT_AT={}", t.as_nanos());
}' >/dev/null
crate sourcepath 'fn main() { println!("from {}", env!("CARGO_MANIFEST_DIR")); }' >/dev/null
crate hostname 'fn main() { println!("on {}", env!("BUILT_ON")); }' \
  'fn main() {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    println!("cargo:rustc-env=BUILT_ON=host:{}", h.trim());
}' >/dev/null
# The uid the build script ran as, from the kernel (no USER variable survives env -i).
crate username 'fn main() { println!("by {}", env!("BUILT_BY")); }' \
  'fn main() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    println!("cargo:rustc-env=BUILT_BY={}", uid.split_whitespace().nth(1).unwrap());
}' >/dev/null

check "a crate with a panic location (a source path, remapped) builds bit-identically" passes clean
check "a build-time timestamp is refused: the two builds differ" refused_for timestamp "NOT REPRODUCIBLE: timestamp differs"
check "the source directory embedded by env!(CARGO_MANIFEST_DIR) is refused as a leak" refused_for sourcepath "LEAK: repro-a[^ ]*/bin/sourcepath holds '/"
if [[ "$(id -u)" == 0 ]] || sudo -n true 2>/dev/null; then
  check "the host name embedded by a build script is refused: the second build runs under another" refused_for hostname "NOT REPRODUCIBLE: hostname differs"
  REPRO_VARY_USER=1 check "the user embedded by a build script is refused: the second build runs as another (REPRO_VARY_USER=1)" refused_for username "NOT REPRODUCIBLE: username differs"
  REPRO_VARY_USER=1 check "a crate without dependencies builds bit-identically as another user (REPRO_VARY_USER=1)" passes clean
  # cargo auditable hands cargo its own absolute path as RUSTC_WORKSPACE_WRAPPER, and cargo
  # hashes that path into every workspace member's -C metadata, so the symbol names (and with
  # them the symbol order and every address) depended on where cargo-auditable was installed:
  # under the other user's build directory here, under another home on another machine.
  if cargo auditable --version >/dev/null 2>&1; then
    REPRO_VARY_USER=1 REPRO_AUDITABLE=1 check "a crate built through cargo auditable is bit-identical as another user, whose cargo-auditable lies elsewhere (REPRO_VARY_USER=1)" passes_auditable clean
  else
    echo "skip  the cargo auditable case: cargo-auditable is not installed (scripts/toolchain.sh)"
  fi
else
  echo "skip  the host name and user cases: no root to run a build under another host name or user"
fi
check_summary
