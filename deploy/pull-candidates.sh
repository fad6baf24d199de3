#!/usr/bin/env bash
# Run on the SIGNER's host: copies a dedicated worker host's candidates (the `worker serve
# --out` directory) into a new local directory for `signer sign --candidates` and `keeper
# relay --candidates` (docs/operations.md, "A dedicated host"). The worker host runs solver
# code and holds no credential; the signer host reaches it, never the other way round, and
# treats everything it gets as untrusted:
#
# - only manifest.json (at most 4 MiB) is fetched first; then exactly the files it names,
#   `candidate-<64 hex>.json` (at most 16 MiB each, at most 1000, the signer's own caps) and
#   their `.intoto.json` statements beside them, nothing else;
# - no symlinks, devices, special files or directories are copied (rsync --no-links
#   --no-devices --no-specials, no recursion), permissions and owners are not kept;
# - the manifest lands last, so the directory is complete once it has one; a candidate the
#   manifest names but the host no longer has stays missing and the signer refuses that one.
#
# The signer still re-checks every candidate against the platform and the chain; this only
# bounds what a compromised worker host can make the signer host store and read.
#
#   deploy/pull-candidates.sh --from SOURCE --to NEW_DIR
#
#   SOURCE   an rsync source naming the out directory: `user@host:` through an account whose
#            authorized_keys forces `rrsync -ro /var/lib/verifier/out` (see the runbook), or
#            a local path (a read-only mount of that directory).
#   NEW_DIR  created; must not exist yet or be empty.
#
# Prints one summary line. Exit 0 when the manifest was pulled (even listing nothing),
# 1 when the source or the manifest is unusable (NEW_DIR then holds no manifest.json),
# 2 on bad usage.
set -euo pipefail

MAX_MANIFEST_BYTES=4194304
MAX_CANDIDATE_BYTES=16777216
MAX_CANDIDATES=1000

die() {
  printf 'pull-candidates.sh: %s\n' "$*" >&2
  exit 1
}
usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit 2
}

from=""
to=""
while (($#)); do
  case "$1" in
    --from)
      (($# >= 2)) || usage
      from="$2"
      shift 2
      ;;
    --to)
      (($# >= 2)) || usage
      to="$2"
      shift 2
      ;;
    -h | --help) usage ;;
    *) usage ;;
  esac
done
[[ -n "$from" && -n "$to" ]] || usage
command -v rsync >/dev/null 2>&1 || die "rsync is not installed"
command -v jq >/dev/null 2>&1 || die "jq is not installed"

if [[ -e "$to" ]]; then
  [[ -d "$to" && ! -L "$to" ]] || die "$to exists and is not a directory"
  [[ -z "$(ls -A "$to")" ]] || die "$to is not empty; give a new directory for each pull"
fi
mkdir -p "$to"
to="$(cd "$to" && pwd)"
# The source as a prefix file names are appended to: `host:` stays `host:`, a path gets a /.
case "$from" in
  *: | */) src="$from" ;;
  *) src="$from/" ;;
esac

incoming="$(mktemp -d "$to/.incoming.XXXXXX")"
trap 'rm -rf "$incoming"' EXIT
rsync_args=(--no-links --no-devices --no-specials --no-perms --no-owner --no-group
  --chmod=F0644 --timeout=120)

rsync "${rsync_args[@]}" --max-size="$MAX_MANIFEST_BYTES" \
  "${src}manifest.json" "$incoming/manifest.json" ||
  die "could not fetch manifest.json from $from"
[[ -f "$incoming/manifest.json" && ! -L "$incoming/manifest.json" ]] ||
  die "$from has no manifest.json that is a regular file of at most $MAX_MANIFEST_BYTES bytes"

# The files the manifest names, checked by shape; anything else makes the whole pull fail,
# because a worker that writes a malformed manifest is not one to take candidates from.
files="$(jq -r --argjson max "$MAX_CANDIDATES" '
  if (type == "object") and (.candidates | type == "array") and (.candidates | length <= $max)
     and all(.candidates[]; (type == "object") and (.file | type == "string"))
  then .candidates[].file else error("bad manifest") end' "$incoming/manifest.json" 2>/dev/null)" ||
  die "manifest.json from $from is not a candidates manifest of at most $MAX_CANDIDATES entries"
listed=0
: >"$incoming/.files"
while IFS= read -r file; do
  [[ -z "$file" ]] && continue
  [[ "$file" =~ ^candidate-[0-9a-f]{64}\.json$ ]] ||
    die "manifest.json from $from names '${file:0:80}', not a candidate-<64 hex>.json file"
  listed=$((listed + 1))
  printf '%s\n%s\n' "$file" "${file%.json}.intoto.json" >>"$incoming/.files"
done <<<"$files"
sort -u -o "$incoming/.files" "$incoming/.files"

if ((listed > 0)); then
  # --ignore-missing-args: a statement or a candidate the host no longer has is left out
  # (the signer refuses a listed candidate it cannot read), not a failed pull.
  rsync "${rsync_args[@]}" --max-size="$MAX_CANDIDATE_BYTES" --ignore-missing-args \
    --files-from="$incoming/.files" "$src" "$to/" ||
    die "could not fetch the candidates from $from"
fi
present=0
while IFS= read -r file; do
  [[ "$file" == *.intoto.json ]] && continue
  if [[ -f "$to/$file" && ! -L "$to/$file" ]]; then present=$((present + 1)); fi
done <"$incoming/.files"
# Last: a directory with a manifest is complete.
mv "$incoming/manifest.json" "$to/manifest.json"
echo "pulled $present of $listed listed candidate(s) from $from into $to"
