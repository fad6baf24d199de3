#!/usr/bin/env bash
# Many images on one host (issue 29 item 3): JOBS jobs (default 20) over IMAGES distinct
# digest-pinned images (default 5) in the local registry, run by one `worker serve --pull
# --image-budget BUDGET`, with the feed dropping each job once it has a candidate (as the
# platform does when it is settled), so images stop being needed while the batch runs.
#
# Each image is busybox plus a unique label and SIZE_MIB MiB of its own random bytes (so the
# images are distinct on disk, not one image under five names), pushed to 127.0.0.1:5000 and
# then removed from the engine, so every one must be pulled. Before the serve run, each is
# pulled once with `docker pull` by digest and removed again: the same pull measured by the
# engine's own client in the same run, as the anchor for the worker's pull time.
#
# Printed (a table ready for BENCHMARKS.md):
#   - pulls: how many pulls serve made (its log and its pull ledger STATE/images.json); one per
#     image is the target, whatever the number of jobs;
#   - per image: serve's pull time (the ledger's pull_ms), `docker pull` of the same digest,
#     and the time from serve's start to the first candidate of a job on that image;
#   - the disk high-water mark: the largest sum of the sizes of the benchmark's images present
#     on the engine, sampled every 0.2 s, against the budget;
#   - evictions (images removed over budget).
# Timings depend on load; pulls, evictions and the high-water mark under the budget do not.
#
# Needs the services (scripts/services.sh --no-python --no-rust --no-node), docker, python3,
# jq, bc. PROFILE=release by default (PROFILE=debug to reuse the debug build).
#
# Usage: scripts/bench-images.sh   (JOBS=20 IMAGES=5 SIZE_MIB=8 BUDGET=24MiB TIMEOUT=900)
set -euo pipefail

JOBS=${JOBS:-20}
IMAGES=${IMAGES:-5}
SIZE_MIB=${SIZE_MIB:-8}
BUDGET=${BUDGET:-24MiB}
TIMEOUT=${TIMEOUT:-900}
PROFILE=${PROFILE:-release}

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_need bench-images python3 jq bc docker
bench_positive bench-images "JOBS, IMAGES, SIZE_MIB and TIMEOUT" "$JOBS" "$IMAGES" "$SIZE_MIB" "$TIMEOUT"
bench_profile bench-images

bench_serve_build "worker and bench_feed"
busybox=$(jq -r .busybox .work/images.json)

bench_sandbox_work bench-images
feed_pid=""
serve_pid=""
sampler_pid=""
refs=()
cleanup() {
    local ref
    bench_stop "$sampler_pid" "$serve_pid" "$feed_pid"
    for ref in "${refs[@]}"; do
        docker image rm -f "$ref" >/dev/null 2>&1 || true
    done
    bench_remove_work
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# The images: distinct content, pushed, then absent from the engine.
run_id="$$-$(date +%s)"
for ((i = 1; i <= IMAGES; i++)); do
    ctx="$WORK/image-$i"
    mkdir -p "$ctx"
    head -c "$((SIZE_MIB * 1048576))" /dev/urandom >"$ctx/payload"
    printf 'FROM %s\nLABEL dev.agent-bounties.bench-images="%s-%s"\nCOPY payload /payload\n' \
        "$busybox" "$run_id" "$i" >"$ctx/Dockerfile"
    tag="127.0.0.1:5000/bench-images-$i:$run_id"
    docker build -q -t "$tag" "$ctx" >/dev/null
    docker push -q "$tag" >/dev/null
    ref=$(docker image inspect --format '{{json .RepoDigests}}' "$tag" |
        jq -r --arg p "127.0.0.1:5000/bench-images-$i@" '.[] | select(startswith($p))')
    [[ "$ref" == *@sha256:* ]] || { echo "bench-images: no digest for $tag" >&2; exit 1; }
    refs+=("$ref")
    docker image rm -f "$tag" "$ref" >/dev/null 2>&1 || true
    ! docker image inspect "$ref" >/dev/null 2>&1 || { echo "bench-images: $ref still present" >&2; exit 1; }
    rm -rf "$ctx"
done

# The anchor: `docker pull` of each digest, then removed again.
declare -A docker_pull_s
for ref in "${refs[@]}"; do
    start=$(now)
    docker pull -q "$ref" >/dev/null
    docker_pull_s[$ref]=$(echo "$(now) - $start" | bc)
    docker image rm -f "$ref" >/dev/null
done

# The feed's jobs take the images in turn (bench_feed's comma-separated form).
image=$(IFS=,; echo "${refs[*]}")
bench_feed_start bench-images

# Disk high-water mark: the sizes of the benchmark's images present, every 0.2 s.
sample_disk() {
    local ref total size
    while :; do
        total=0
        for ref in "${refs[@]}"; do
            size=$(docker image inspect --format '{{.Size}}' "$ref" 2>/dev/null || echo 0)
            total=$((total + size))
        done
        echo "$total" >>"$WORK/disk.samples"
        sleep 0.2
    done
}
sample_disk &
sampler_pid=$!

dir=$WORK/run
mkdir -p "$dir/out" "$dir/state" "$dir/work" "$dir/staging"
cp "$WORK/feed/all-jobs.json" "$WORK/feed/feed.json"
candidates() { find "$dir/out" -name 'candidate-*.json' ! -name '*.intoto.json' 2>/dev/null; }
before=$(load)
start=$(now)
WORKER_LOG=info "$BIN" serve --api "$api" --verifier "$verifier" --out "$dir/out" --state "$dir/state" \
    --work-dir "$dir/work" --staging-root "$dir/staging" --archive-base "$api" \
    --poll-interval 1 --pull --image-budget "$BUDGET" --image-keep-recent 0s \
    2>"$dir/serve.log" &
serve_pid=$!
declare -A first_verdict
while (($(candidates | wc -l) < JOBS)); do
    if ! kill -0 "$serve_pid" 2>/dev/null; then
        echo "bench-images: worker serve exited early; its log:" >&2
        tail -20 "$dir/serve.log" >&2
        exit 1
    fi
    if (($(printf '%.0f' "$(echo "$(now) - $start" | bc)") > TIMEOUT)); then
        echo "bench-images: longer than ${TIMEOUT}s" >&2
        exit 1
    fi
    t=$(echo "$(now) - $start" | bc)
    # The first candidate per image, and the platform settling what has a candidate.
    candidates | while read -r c; do jq -r .job.job_id "$c"; done | sort -u >"$WORK/done.txt"
    while read -r id; do
        [[ -n "$id" ]] || continue
        img=$(jq -r --arg id "$id" '.[] | select(.job_id == $id) | .terms.document.benchmark.runner_manifest.image' "$WORK/feed/all-jobs.json")
        [[ -n "${first_verdict[$img]:-}" ]] || first_verdict[$img]=$t
    done <"$WORK/done.txt"
    jq -R . "$WORK/done.txt" | jq -s . >"$WORK/done.json"
    jq --slurpfile settled "$WORK/done.json" '[.[] | select(.job_id as $id | $settled[0] | index($id) | not)]' \
        "$WORK/feed/all-jobs.json" >"$WORK/feed/feed.json.new"
    mv "$WORK/feed/feed.json.new" "$WORK/feed/feed.json"
    sleep 0.2
done
end=$(now)
# One more poll with the feed empty, so the last unneeded images can be collected.
jq -n '[]' >"$WORK/feed/feed.json"
sleep 3
after=$(load)
kill -TERM "$serve_pid"
wait "$serve_pid" || true
serve_pid=""
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=""
candidates | while read -r c; do jq -r .job.job_id "$c"; done | sort -u >"$WORK/done.txt"
while read -r id; do
    img=$(jq -r --arg id "$id" '.[] | select(.job_id == $id) | .terms.document.benchmark.runner_manifest.image' "$WORK/feed/all-jobs.json")
    [[ -n "${first_verdict[$img]:-}" ]] || first_verdict[$img]=$(echo "$end - $start" | bc)
done <"$WORK/done.txt"

pulls=$(grep -c 'pulled by digest ahead of its jobs' "$dir/serve.log" || true)
# Removals over the budget, and those that made room for the next pull within it.
evicted=$(grep -cE 'removed images (over|to make room under) --image-budget' "$dir/serve.log" || true)
high=$(sort -n "$WORK/disk.samples" | tail -1)
budget_bytes=$(python3 -c 'import re,sys; m=re.fullmatch(r"(\d+)(B|KiB|MiB|GiB|TiB)?", sys.argv[1]); print(int(m[1]) << {None:0,"B":0,"KiB":10,"MiB":20,"GiB":30,"TiB":40}[m[2]])' "$BUDGET")
left=0
for ref in "${refs[@]}"; do docker image inspect "$ref" >/dev/null 2>&1 && left=$((left + 1)); done

echo
echo "### Many images on one host: $JOBS jobs over $IMAGES images of busybox + ${SIZE_MIB} MiB each, \`--image-budget $BUDGET\` ($PROFILE build; load $before -> $after)"
echo
echo "| image | jobs | serve pull (s) | \`docker pull\` (s) | first verdict after start (s) |"
echo "|---|---:|---:|---:|---:|"
i=0
for ref in "${refs[@]}"; do
    i=$((i + 1))
    n=$(jq --arg r "$ref" '[.[] | select(.terms.document.benchmark.runner_manifest.image == $r)] | length' "$WORK/feed/all-jobs.json")
    pull_ms=$(jq -r --arg r "$ref" '.pulled[$r].pull_ms // empty' "$dir/state/images.json")
    # An image already removed over budget has left the ledger: its pull time is in the log.
    if [[ -z "$pull_ms" ]]; then
        pull_ms=$(grep 'pulled by digest ahead of its jobs' "$dir/serve.log" | grep -F "$ref" |
            sed -n 's/.*pull_seconds=\([0-9.]*\).*/\1/p' | head -1)
        pull_s=${pull_ms:-?}
    else
        pull_s=$(echo "scale=3; $pull_ms / 1000" | bc)
    fi
    [[ "$pull_s" == "?" ]] || pull_s=$(printf '%.3f' "$pull_s")
    printf '| %s (%s…) | %s | %s | %.3f | %.2f |\n' "$i" "${ref##*@sha256:}" "$n" "$pull_s" "${docker_pull_s[$ref]}" "${first_verdict[$ref]:-0}" |
        sed -E 's/\(([0-9a-f]{12})[0-9a-f]*…\)/(\1…)/'
done
echo
echo "| measure | value |"
echo "|---|---:|"
echo "| pulls by serve (one per image is the target) | $pulls |"
echo "| images removed over budget or to make room for a pull | $evicted evictions (runs of the collector that removed any); $left of $IMAGES images left at the end |"
echo "| disk high-water mark of the benchmark's images (engine sizes) | $high bytes ($(echo "scale=1; $high / 1048576" | bc) MiB) |"
echo "| budget | $budget_bytes bytes ($BUDGET) |"
printf '| wall time, start to the last candidate | %.2f s |\n' "$(echo "$end - $start" | bc)"
