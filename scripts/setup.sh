#!/usr/bin/env bash
# Installs and starts what a deploy on the docker target needs, on a machine like this project's (Debian, root),
# which may be new: Debian packages, npm packages, the Pulumi CLI and Node.js language host and the docker plugin
# (scripts/pulumi-toolchain.sh: what is installed is used, what is missing is built once per machine), a running
# dockerd, and the images (scripts/build-images.sh reuses what is built). Nothing of the kubernetes target: its
# plugin and the test cluster's binaries are built by what needs them (the kubernetes e2e tier, and `multienv up`
# of a kubernetes stack where no plugin is installed). `--kubernetes` builds them here too, up front.
# A second run takes seconds. .ci/run runs it before the tests; the README's first command before a deploy.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/machine-cache.sh
kubernetes=0
for arg in "$@"; do
  case $arg in
    --kubernetes) kubernetes=1 ;;
    *) echo "setup: unknown argument $arg (usage: scripts/setup.sh [--kubernetes])" >&2; exit 2 ;;
  esac
done
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started )) s"; }
export DEBIAN_FRONTEND=noninteractive
# postgresql: the account-pool tests start a real server; g++ and make: better-sqlite3 builds from source when no
# prebuilt binary can be fetched.
packages=(docker.io docker-compose debootstrap zstd openssl chromium tcpdump nginx squid wrk curl iproute2 procps jq libnss3-tools python3 openssh-client openssh-server iptables postgresql g++ make xvfb)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${#missing[@]} Debian packages" >&2
  apt-get update -q
  apt-get install -y -q "${missing[@]}"
fi
# Not `npm ci`: vite's optional dependency napi-windows-process-start-time is absent from the registry, so
# npm leaves it out of the lock file and `npm ci` then refuses the lock as out of sync. `npm install` with
# --no-save installs exactly the locked tree and writes nothing.
npm install --no-audit --no-fund --no-save
echo "setup: packages ready ($(elapsed))" >&2
mkdir -p .cache

# The Pulumi toolchain (about 13 minutes the first time on 2 cores, the CLI and the docker plugin side by side;
# seconds after, on any checkout of this machine), built while dockerd starts and the images build.
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
plugins=(docker)
[ $kubernetes = 1 ] && plugins+=(kubernetes)
with_progress "setup: Pulumi toolchain (${plugins[*]})" "$MACHINE_CACHE/logs/pulumi-toolchain.log" \
  bash scripts/pulumi-toolchain.sh "${plugins[@]}" &
toolchain=$!
cluster_build=
if [ $kubernetes = 1 ]; then
  with_progress "setup: test cluster binaries" "$MACHINE_CACHE/logs/test-cluster-build.log" \
    bash scripts/test-cluster.sh build &
  cluster_build=$!
fi
# dockerd: started here when it is not running (CI machines have no init system to start it).
if ! docker info >/dev/null 2>&1; then
  echo "setup: starting dockerd (log: /var/log/dockerd.log)" >&2
  # Address pools for thousands of networks: Docker's default pools hold about 30, and every env takes several
  # (docs/features.md "Many stacks on one engine").
  nohup dockerd --default-address-pool base=10.200.0.0/13,size=26 > /var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { tail -20 /var/log/dockerd.log >&2; echo "setup: dockerd did not start" >&2; exit 1; }
fi

# The images stay in the engine's own storage, which is the machine's: a fresh clone reuses them. (A CI system that
# keeps only a folder between runs can set MULTIENV_SAVE_IMAGES=1 to keep them in .cache/ too; it costs minutes.)
with_progress "setup: images" "$MACHINE_CACHE/logs/build-images.log" bash scripts/build-images.sh

wait "$toolchain" || { echo "setup: the Pulumi toolchain did not build" >&2; exit 1; }
if [ -n "$cluster_build" ]; then
  wait "$cluster_build" || { echo "setup: the test cluster's binaries did not build" >&2; exit 1; }
fi
echo "setup: ready in $(elapsed)" >&2
