#!/usr/bin/env bash
# Builds every multienv image offline, on the local Docker engine, reusing what is built:
#   1. multienv/base:bookworm   `debootstrap --variant=minbase bookworm` imported with `docker import`
#                               (rootfs tarball cached in .cache/; skipped when the image exists)
#   2. multienv/node-base       the base plus this machine's node binary (Node 20; Debian's is 18)
#   3. dist/bundle/*.js         each service bundled with esbuild (scripts/bundle.mjs): no npm in images
#   4. the project's images, each `docker build --build-arg BASE_IMAGE=multienv/node-base` (or
#      MULTIENV_BASE_IMAGE, which replaces steps 1 and 2: a registry's Node 20 base such as node:20-bookworm-slim):
#      multienv/gateway, multienv/site-proxy, multienv/browser, multienv/replay-server,
#      multienv/sample-shop-server, multienv/sample-shop-frontend, multienv/sample-live-server
# Each image is labelled `multienv.base-image` (its BASE_IMAGE; the e2e deploy checks the program
# asks for the same). An image whose inputs (Dockerfile, bundle, base image id) hash to its
# `multienv.content-hash` label is not rebuilt at all; otherwise docker's layer cache keeps apt steps from re-running.
# Apt inside builds reaches the Debian mirror of /etc/apt/sources.list* through Docker's
# bridge NAT (the mirror's address is passed with --add-host when the host resolves it
# from /etc/hosts); if a probe container cannot reach it, builds use --network host.
# With MULTIENV_SAVE_IMAGES=1 the images are also saved to .cache/images.tar.zst after a change, and
# an engine without the base loads that archive first (a CI machine whose .cache/ is restored).
# Usage: scripts/build-images.sh [image-name...]   e.g. scripts/build-images.sh browser gateway
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=.cache
mkdir -p "$CACHE"
log() { printf '[build-images %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# --- Debian mirror: the one this machine's apt uses -------------------------------------------
MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
  | awk '/^(URIs:|deb )/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\/.*\/debian\/?$/) { print $i; exit } }' || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
MIRROR_HOST=$(echo "$MIRROR" | sed -E 's#^https?://([^/:]+).*#\1#')
BUILD_NET=()
MIRROR_IP=$(getent hosts "$MIRROR_HOST" | awk '{print $1; exit}' || true)
if [ -n "$MIRROR_IP" ] && grep -qw "$MIRROR_HOST" /etc/hosts; then BUILD_NET+=(--add-host "$MIRROR_HOST:$MIRROR_IP"); fi

# --- 0. a saved image set (a new engine with .cache/ restored, e.g. a CI cache) ------------------
IMAGES_TAR=$CACHE/images.tar.zst
BASE=multienv/base:bookworm
if ! docker image inspect "$BASE" >/dev/null 2>&1 && [ -s "$IMAGES_TAR" ]; then
  log "docker load $IMAGES_TAR"
  zstd -dc "$IMAGES_TAR" | docker load -q >/dev/null || log "could not load $IMAGES_TAR; building"
fi
BUILT_ANY=0

# --- content-hash reuse -------------------------------------------------------------------------
# build_image TAG DOCKERFILE BASE_IMAGE CONTEXT INPUT_FILE...
build_image() {
  local tag=$1 dockerfile=$2 base=$3 context=$4; shift 4
  local base_id hash current
  base_id=$(docker image inspect -f '{{.Id}}' "$base")
  hash=$( { echo "$base $base_id"; cat "$dockerfile" "$@"; } | sha256sum | cut -c1-32)
  current=$(docker image inspect -f '{{index .Config.Labels "multienv.content-hash"}}' "$tag" 2>/dev/null || true)
  if [ "$current" = "$hash" ]; then log "$tag is up to date"; return; fi
  log "building $tag"
  BUILT_ANY=1
  docker build -q "${BUILD_NET[@]}" --build-arg "BASE_IMAGE=$base" --label "multienv.content-hash=$hash" --label "multienv.base-image=$base" \
    -f "$dockerfile" -t "$tag" "$context" 2>&1 >/dev/null | { grep -vE "DEPRECATED|legacy builder|buildx|^\s*$" >&2 || true; }
}

# --- 1. base (skipped with MULTIENV_BASE_IMAGE: a registry's Node 20 base, e.g. node:20-bookworm-slim) -----
if [ -n "${MULTIENV_BASE_IMAGE:-}" ]; then
  NODE_BASE=$MULTIENV_BASE_IMAGE
  docker image inspect "$NODE_BASE" >/dev/null 2>&1 || { log "docker pull $NODE_BASE"; docker pull -q "$NODE_BASE" >/dev/null; }
else
  NODE_BASE=multienv/node-base
  ROOTFS_TAR=$CACHE/debian-bookworm-minbase.tar.zst
  if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    if [ ! -s "$ROOTFS_TAR" ]; then
      log "debootstrap --variant=minbase bookworm from $MIRROR"
      rm -rf "$CACHE/rootfs"
      debootstrap --variant=minbase bookworm "$CACHE/rootfs" "$MIRROR" > "$CACHE/debootstrap.log" 2>&1 \
        || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
      # Downloaded .debs and package lists are not part of an image (Dockerfiles run apt-get update).
      rm -rf "$CACHE"/rootfs/var/cache/apt/archives/*.deb "$CACHE"/rootfs/var/lib/apt/lists/*
      tar -C "$CACHE/rootfs" -c . | zstd -q -T0 -3 -o "$ROOTFS_TAR.tmp" && mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
      rm -rf "$CACHE/rootfs"
    fi
    log "docker import $ROOTFS_TAR as $BASE"
    zstd -dc "$ROOTFS_TAR" | docker import -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' - "$BASE" >/dev/null
    BUILT_ANY=1
  fi

  # Probe once whether a container reaches the mirror through the bridge; else build on the host's network.
  if ! docker run --rm "${BUILD_NET[@]}" "$BASE" bash -c "exec 3<>/dev/tcp/$MIRROR_HOST/80" >/dev/null 2>&1; then
    log "containers cannot reach $MIRROR_HOST through the bridge; building with --network host"
    BUILD_NET+=(--network host)
  fi

  # --- 2. node base -------------------------------------------------------------------------------
  NODE_CTX=$CACHE/node-base
  mkdir -p "$NODE_CTX"
  NODE_BIN=$(command -v node)
  cmp -s "$NODE_BIN" "$NODE_CTX/node" || cp "$NODE_BIN" "$NODE_CTX/node"
  build_image multienv/node-base scripts/node-base.Dockerfile "$BASE" "$NODE_CTX" "$NODE_CTX/node"
fi

# --- 3. bundles ---------------------------------------------------------------------------------
node scripts/bundle.mjs || log "some bundles failed (above); the images that need them are skipped"

# --- 4. project images: name | Dockerfile | bundles it copies -----------------------------------
IMAGES=(
  "gateway|src/gateway/Dockerfile|gateway capture-server"
  "site-proxy|src/site-proxy/Dockerfile|site-proxy site-proxy-supervisor"
  "browser|src/browser/Dockerfile|browser-launcher"
  "replay-server|src/replay-server/Dockerfile|replay-server"
  "sample-shop-server|examples/sites/shop-server/Dockerfile|sample-shop-server"
  "sample-shop-frontend|examples/sites/shop-frontend/Dockerfile|sample-shop-frontend"
  "sample-live-server|examples/sites/live-server/Dockerfile|sample-live-server"
)
wanted=("$@")
status=0
for entry in "${IMAGES[@]}"; do
  IFS='|' read -r name dockerfile bundles <<<"$entry"
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " == *" $name "* ]]; then continue; fi
  if [ ! -f "$dockerfile" ]; then log "SKIPPED multienv/$name: $dockerfile does not exist"; status=1; continue; fi
  inputs=()
  missing=""
  for b in $bundles; do
    if [ -f "dist/bundle/$b.js" ]; then inputs+=("dist/bundle/$b.js"); else missing+=" $b"; fi
  done
  if [ -n "$missing" ]; then log "SKIPPED multienv/$name: missing bundle(s):$missing"; status=1; continue; fi
  build_image "multienv/$name" "$dockerfile" "$NODE_BASE" . "${inputs[@]}" || { log "FAILED multienv/$name"; status=1; }
done

# --- 5. save the set for a new engine (opt in: MULTIENV_SAVE_IMAGES=1; one archive, shared layers once) ---
if [ "${MULTIENV_SAVE_IMAGES:-0}" = 1 ] && { [ "$BUILT_ANY" = 1 ] || [ ! -s "$IMAGES_TAR" ]; }; then
  mapfile -t all < <(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^multienv/' | grep -v '<none>')
  log "saving ${#all[@]} images to $IMAGES_TAR"
  docker save "${all[@]}" | zstd -q -T0 -3 -o "$IMAGES_TAR.tmp" && mv "$IMAGES_TAR.tmp" "$IMAGES_TAR"
fi
exit $status
