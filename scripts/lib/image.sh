# shellcheck shell=bash
# Deterministic single-layer images, pushed to the local registry over its
# HTTP API and then pulled into the engine by digest.
#
# Why not `docker build` + `docker push`: the engine stamps the build time
# into the image config and the file mtimes into the layer, so every rebuild
# gets a new digest. Writing the layer tar, the config and the manifest
# ourselves makes the digest a pure function of the inputs, so reruns (and a
# wiped engine or registry) reproduce the same pinned reference.

if [[ -n "${VERIFIER_LIB_IMAGE_LOADED:-}" ]]; then
  return 0
fi
VERIFIER_LIB_IMAGE_LOADED=1

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

REGISTRY_ADDR="${REGISTRY_ADDR:-127.0.0.1:5000}"
# Bump when the way layers, configs or manifests are assembled changes, so
# cached builds are not reused across incompatible versions of this file.
IMAGE_LIB_VERSION=1

MEDIA_MANIFEST='application/vnd.docker.distribution.manifest.v2+json'
MEDIA_CONFIG='application/vnd.docker.container.image.v1+json'
MEDIA_LAYER='application/vnd.docker.image.rootfs.diff.tar.gzip'

# hash_tree DIR: digest over every path, its type, exec bit and content under
# DIR, so the build key changes exactly when an input file changes.
hash_tree() {
  local dir="$1"
  [[ -d "$dir" ]] || {
    printf 'absent\n'
    return 0
  }
  (
    cd "$dir"
    find . \( -type f -o -type l -o -type d \) -print0 | LC_ALL=C sort -z |
      while IFS= read -r -d '' path; do
        if [[ -L "$path" ]]; then
          printf 'l %s -> %s\n' "$path" "$(readlink "$path")"
        elif [[ -d "$path" ]]; then
          printf 'd %s\n' "$path"
        elif [[ -x "$path" ]]; then
          printf 'x %s %s\n' "$path" "$(sha256_file "$path")"
        else
          printf 'f %s %s\n' "$path" "$(sha256_file "$path")"
        fi
      done
  ) | sha256sum | cut -d' ' -f1
}

# normalize_modes DIR: file modes from a git checkout depend on the umask;
# pin them so the layer does not.
normalize_modes() {
  local dir="$1"
  find "$dir" -type d -exec chmod 0755 {} +
  find "$dir" -type f -perm /111 -exec chmod 0755 {} +
  find "$dir" -type f ! -perm /111 -exec chmod 0644 {} +
}

# build_layer ROOT OUT_DIR [extra tar args...]: writes OUT_DIR/layer.tar.gz,
# OUT_DIR/diff_id (sha256 of the uncompressed tar, what the config lists) and
# OUT_DIR/layer_digest (sha256 of the gzip stream, what the manifest lists).
build_layer() {
  local root="$1" out="$2"
  shift 2
  local entries=()
  local name
  # Top-level names without a "./" prefix: that is how the engine's own
  # layers look, and --sort=name orders everything below them.
  while IFS= read -r -d '' name; do
    entries+=("${name#./}")
  done < <(cd "$root" && find . -mindepth 1 -maxdepth 1 -print0 | LC_ALL=C sort -z)
  ((${#entries[@]} > 0)) || die "image root $root is empty"
  rm -f "$out/layer.tar" "$out/layer.tar.gz"
  tar --create --file="$out/layer.tar" --directory="$root" \
    --sort=name --format=gnu --numeric-owner "$@" -- "${entries[@]}"
  sha256_file "$out/layer.tar" >"$out/diff_id"
  # -n: no file name or timestamp in the gzip header.
  gzip -n -6 -c "$out/layer.tar" >"$out/layer.tar.gz"
  rm -f "$out/layer.tar"
  sha256_file "$out/layer.tar.gz" >"$out/layer_digest"
}

# write_config TEMPLATE OUT_DIR: fills architecture and diff_ids into the
# image config template and writes OUT_DIR/config.json (no trailing newline;
# its exact bytes are hashed).
write_config() {
  local template="$1" out="$2" arch diff_id
  arch="$(dpkg --print-architecture)"
  diff_id="$(cat "$out/diff_id")"
  jq -cj --arg arch "$arch" --arg diff "sha256:$diff_id" \
    '.architecture = $arch | .os = "linux" | .rootfs = {type: "layers", diff_ids: [$diff]}' \
    "$template" >"$out/config.json"
}

write_manifest() {
  local out="$1" config_size config_digest layer_size layer_digest
  config_size="$(stat -c %s "$out/config.json")"
  config_digest="$(sha256_file "$out/config.json")"
  layer_size="$(stat -c %s "$out/layer.tar.gz")"
  layer_digest="$(cat "$out/layer_digest")"
  jq -ncj \
    --arg mm "$MEDIA_MANIFEST" --arg cm "$MEDIA_CONFIG" --arg lm "$MEDIA_LAYER" \
    --argjson cs "$config_size" --arg cd "sha256:$config_digest" \
    --argjson ls "$layer_size" --arg ld "sha256:$layer_digest" \
    '{schemaVersion: 2, mediaType: $mm,
      config: {mediaType: $cm, size: $cs, digest: $cd},
      layers: [{mediaType: $lm, size: $ls, digest: $ld}]}' >"$out/manifest.json"
  sha256_file "$out/manifest.json" >"$out/manifest_digest"
}

registry_has_blob() {
  curl -sf -o /dev/null -I "http://$REGISTRY_ADDR/v2/$1/blobs/$2"
}

registry_has_manifest() {
  curl -sf -o /dev/null -I -H "Accept: $MEDIA_MANIFEST" \
    "http://$REGISTRY_ADDR/v2/$1/manifests/$2"
}

# registry_push_blob REPO FILE DIGEST: monolithic upload (POST, then PUT with
# the whole body), skipped when the registry already has the blob.
registry_push_blob() {
  local repo="$1" file="$2" digest="$3" location sep
  if registry_has_blob "$repo" "$digest"; then
    log "registry already has $repo blob ${digest:0:19}"
    return 0
  fi
  log "uploading $repo blob ${digest:0:19} ($(stat -c %s "$file") bytes)"
  location="$(curl -sf -X POST -D - -o /dev/null "http://$REGISTRY_ADDR/v2/$repo/blobs/uploads/" |
    tr -d '\r' | awk 'tolower($1) == "location:" { print $2 }')" ||
    die "registry refused to start an upload for $repo"
  [[ -n "$location" ]] || die "registry gave no upload location for $repo"
  if [[ "$location" == /* ]]; then
    location="http://$REGISTRY_ADDR$location"
  fi
  sep='?'
  [[ "$location" == *\?* ]] && sep='&'
  curl -sf -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' \
    --upload-file "$file" "${location}${sep}digest=${digest}" ||
    die "registry rejected blob $digest for $repo"
}

# push_and_load NAME OUT_DIR: pushes config, layer and manifest of OUT_DIR to
# the registry as NAME, makes sure the engine holds the image by digest, and
# prints the pinned reference.
push_and_load() {
  local repo="$1" out="$2" digest ref
  digest="sha256:$(cat "$out/manifest_digest")"
  ref="$REGISTRY_ADDR/$repo@$digest"
  if registry_has_manifest "$repo" "$digest"; then
    log "registry already has $ref"
  else
    registry_push_blob "$repo" "$out/config.json" "sha256:$(sha256_file "$out/config.json")"
    registry_push_blob "$repo" "$out/layer.tar.gz" "sha256:$(cat "$out/layer_digest")"
    log "pushing manifest for $repo"
    curl -sf -o /dev/null -X PUT -H "Content-Type: $MEDIA_MANIFEST" \
      --data-binary "@$out/manifest.json" "http://$REGISTRY_ADDR/v2/$repo/manifests/latest" ||
      die "registry rejected the manifest for $repo"
    registry_has_manifest "$repo" "$digest" ||
      die "registry does not serve $ref after the push"
  fi
  if docker image inspect "$ref" >/dev/null 2>&1; then
    log "engine already has $ref"
  else
    log "loading $ref into the engine from the local registry"
    docker pull --quiet "$ref" >/dev/null || die "docker pull $ref failed"
  fi
  # An image pulled only by digest has no tag, and `docker image prune`
  # deletes untagged images; the local tag keeps it.
  if [[ "$(docker image inspect --format '{{.Id}}' "$REGISTRY_ADDR/$repo:latest" 2>/dev/null)" != \
    "$(docker image inspect --format '{{.Id}}' "$ref")" ]]; then
    docker tag "$ref" "$REGISTRY_ADDR/$repo:latest"
  fi
  docker image inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$ref" |
    grep -qxF "$ref" || die "engine does not list $ref among the image's repo digests"
  printf '%s\n' "$ref"
}

# build_cached NAME KEY OUT_DIR TEMPLATE LAYER_FN [args...]: reuses OUT_DIR
# when it was built from the same KEY, otherwise runs LAYER_FN OUT_DIR args...
# to produce the layer and then writes config and manifest.
build_cached() {
  local name="$1" key="$2" out="$3" template="$4" layer_fn="$5"
  shift 5
  # The scripts are part of the recipe: a change to how a layer is assembled
  # must rebuild it. An unchanged result still gets the same digest.
  key="$(printf '%s\nlib=%s\ntemplate=%s\nrecipe=%s %s\n' "$key" "$IMAGE_LIB_VERSION" \
    "$(sha256_file "$template")" "$(sha256_file "$REPO_ROOT/scripts/services.sh")" \
    "$(sha256_file "$REPO_ROOT/scripts/lib/image.sh")" | sha256sum | cut -d' ' -f1)"
  if [[ -f "$out/key" && "$(cat "$out/key")" == "$key" && -f "$out/manifest_digest" &&
    -f "$out/layer.tar.gz" && -f "$out/config.json" && -f "$out/manifest.json" ]]; then
    log "$name: inputs unchanged (key ${key:0:12}), reusing the built layer"
    return 0
  fi
  log "$name: building layer (key ${key:0:12})"
  mkdir -p "$out"
  rm -f "$out/key"
  "$layer_fn" "$out" "$@"
  write_config "$template" "$out"
  write_manifest "$out"
  printf '%s\n' "$key" >"$out/key"
}
