#!/usr/bin/env bash
# Builds what the kubernetes target's e2e tier needs beyond scripts/setup.sh, side by side: the kubernetes resource
# plugin (scripts/pulumi-toolchain.sh kubernetes, about 11 minutes on 2 cores the first time) and the test
# cluster's binaries (scripts/test-cluster.sh build, about 12). Each is built once per machine and found after in
# seconds. The e2e tier starts it in the background (niced) when its run includes the kubernetes files, and those
# files run it again before their cluster starts: a second caller waits for the first, saying so once a minute,
# then finds everything built.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/machine-cache.sh
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
mkdir -p "$MACHINE_CACHE/logs"
exec 9>"$MACHINE_CACHE/kubernetes-prereqs.lock"
waited=0
until flock -w 60 9; do
  waited=$((waited + 1))
  echo "kubernetes prerequisites: another build of them is running, waited $waited min (log: $MACHINE_CACHE/logs/)" >&2
done
with_progress "kubernetes plugin" "$MACHINE_CACHE/logs/pulumi-kubernetes.log" bash scripts/pulumi-toolchain.sh kubernetes &
plugin=$!
with_progress "test cluster binaries" "$MACHINE_CACHE/logs/test-cluster-build.log" bash scripts/test-cluster.sh build &
cluster=$!
status=0
wait $plugin || status=1
wait $cluster || status=1
exit $status
