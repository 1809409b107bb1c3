#!/usr/bin/env bash
# Installs and starts what multienv and its tests need on a machine like this project's (Debian, root),
# which may be new: Debian packages, npm packages, the Pulumi toolchain (scripts/pulumi-toolchain.sh: a
# pulumi on PATH, else built from its Go modules into .cache/pulumi), a running dockerd, and the images
# (scripts/build-images.sh; it reuses what is already built and caches the debootstrap rootfs in .cache/,
# so a second run takes seconds). .ci/run runs it before the tests; the README's first command before a deploy.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
# postgresql: the account-pool tests start a real server; g++ and make: better-sqlite3 builds from source when no
# prebuilt binary can be fetched.
packages=(docker.io docker-compose debootstrap zstd openssl chromium tcpdump nginx squid wrk curl iproute2 procps jq libnss3-tools python3 openssh-client openssh-server iptables postgresql g++ make)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q
  apt-get install -y -q "${missing[@]}"
fi
# Not `npm ci`: vite's optional dependency napi-windows-process-start-time is absent from the registry, so
# npm leaves it out of the lock file and `npm ci` then refuses the lock as out of sync. `npm install` with
# --no-save installs exactly the locked tree and writes nothing.
npm install --no-audit --no-fund --no-save
mkdir -p .cache

# The Pulumi CLI and language host for the e2e tier (about 7 minutes the first time on 2 cores; seconds
# after), built while dockerd starts and the images build.
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
toolchain_started=$(date +%s)
bash scripts/pulumi-toolchain.sh > .cache/pulumi-toolchain.log 2>&1 &
toolchain=$!
# The test cluster's binaries (scripts/test-cluster.sh: Kubernetes, kube-router, CoreDNS; about 7 minutes the
# first time on 2 cores, cached in .cache/test-cluster after), built beside the toolchain.
cluster_build_started=$(date +%s)
bash scripts/test-cluster.sh build > .cache/test-cluster-build.log 2>&1 &
cluster_build=$!

# dockerd: started here when it is not running (CI machines have no init system to start it).
if ! docker info >/dev/null 2>&1; then
  echo "setup: starting dockerd (log: /var/log/dockerd.log)" >&2
  # Address pools for thousands of networks: Docker's default pools hold about 30, and every env takes several
  # (README "Many stacks on one engine").
  nohup dockerd --default-address-pool base=10.200.0.0/13,size=26 > /var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { tail -20 /var/log/dockerd.log >&2; echo "setup: dockerd did not start" >&2; exit 1; }
fi

# CI machines may be new each run: keep the built images in .cache/ too (restore .cache/ to skip the builds).
MULTIENV_SAVE_IMAGES=${MULTIENV_SAVE_IMAGES:-1} bash scripts/build-images.sh

if ! wait "$toolchain"; then
  tail -30 .cache/pulumi-toolchain.log >&2
  echo "setup: the Pulumi toolchain did not build (log above: .cache/pulumi-toolchain.log)" >&2
  exit 1
fi
echo "setup: Pulumi toolchain ready in $(( $(date +%s) - toolchain_started )) s: $(tail -1 .cache/pulumi-toolchain.log)" >&2
if ! wait "$cluster_build"; then
  tail -30 .cache/test-cluster-build.log >&2
  echo "setup: the test cluster's binaries did not build (log above: .cache/test-cluster-build.log)" >&2
  exit 1
fi
echo "setup: test cluster binaries ready in $(( $(date +%s) - cluster_build_started )) s: $(tail -1 .cache/test-cluster-build.log)" >&2
