#!/usr/bin/env bash
# A real two-node Kubernetes cluster on this machine, for the e2e tests of the kubernetes target (task envs
# as namespaces with NetworkPolicies, pods, Services, Secrets) where no cluster is at hand. Two nodes, always:
# one node hides what a cluster does (walls, captures, the gateway's reach and the port-forward between pods on
# different nodes). Debian, root, no internet: everything is built from the Go module proxy and Debian's
# packages, and every part of the cluster runs inside network namespaces of its own, so the host's iptables,
# routes and Docker stay as they are.
#
# Usage: scripts/test-cluster.sh up|down|status|env|build|load IMAGE...|node a|b stop|start
#   up      Bring the cluster up (building the binaries first when they are not cached) and print the
#           kubeconfig's path as the last line of stdout. When it is already up and healthy it only imports
#           new multienv/ images and prints the path. A node stopped (`node b stop`) is started again in place,
#           the rest of the cluster left as it is. A half-up cluster (a failed up, killed daemons) is taken down
#           first.
#   down    Remove the cluster and everything up changed (works after a failed up, or from a new shell).
#   status  Print "up" (exit 0: both nodes Ready) or "down" (exit 1), naming on stderr what is not up (a
#           stopped node by name, with the command that starts it).
#   node    `node b stop`: a node lost, as when its kubelet dies: its kubelet alone is stopped; its containerd,
#           its pods' containers, kube-proxy and kube-router go on, and the API server marks the node NotReady
#           after the controller manager's node-monitor-grace-period (its default, 50 s). `node b start`
#           starts the kubelet again and waits until the node is Ready (up does the same).
#   env     Print `export` lines for the tests: KUBECONFIG, MULTIENV_TEST_KUBECTL, MULTIENV_TEST_WEB_NETNS,
#           MULTIENV_TEST_WEB_ADDRESS, MULTIENV_TEST_DNS_HOSTS, MULTIENV_TEST_NODE_ADDRESS (node a's),
#           MULTIENV_TEST_NODE_LABEL (the label naming each node: a or b), MULTIENV_TEST_CLUSTER_PIDS (the
#           daemons' pid files: <daemon>.pid on node a, <daemon>-b.pid on node b), MULTIENV_TEST_CONTAINERD_SOCKETS
#           (node a's, node b's) (exit 1: not up).
#   build   Only build (or find cached) the binaries; scripts/setup.sh runs it in the background.
#   load    Import local Docker images into both nodes' containerd (pods use imagePullPolicy: Never).
#
# The parts: Kubernetes v1.37.2 (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy in iptables mode, kubectl; go build of k8s.io/kubernetes through the wrapper module
# scripts/test-cluster/k8s), kube-router v2.1.0 for NetworkPolicy and the routes between the nodes' pod
# networks (BGP between the two nodes on one link, direct routes, no overlay, no NAT), CoreDNS (scripts/test-cluster/coredns:
# hosts and template plugins only) as the cluster DNS, a pause program (scripts/test-cluster/k8s/pause) as the
# sandbox image, and from Debian: etcd 3.4, containerd 1.6 (separate instances, one a node: its own config,
# root, state, socket; Docker's containerd is left alone), runc, the CNI plugins (bridge + host-local), ipset,
# conntrack.
#
# Nodes: node a (multienv-k8s, label multienv.test/node=a) runs the control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) and its own containerd, kubelet, kube-proxy and kube-router; node b
# (multienv-k8s-2, label multienv.test/node=b) runs a containerd, kubelet, kube-proxy and kube-router of its
# own. Each node's pod CIDR is set on its Node object by this script (the controller-manager allocates none),
# so node a's pods are always 10.244.0.0/24 and node b's 10.244.1.0/24. CoreDNS runs on node a.
#
# Network (addresses fixed):
#   host ── veth mk8s0 10.250.0.1/24 ═══ eth0 ─┐ bridge link0 10.250.0.2/24 (node a's address) in netns
#                                   node-b ────┘ multienv-k8s; node-b ═══ eth0 10.250.0.3/24 (node b's address)
#                                                in netns multienv-k8s-2, default route via 10.250.0.2
#     The three are one link. The API server is https://10.250.0.2:6443; etcd and node a's daemons and pods
#     live in netns multienv-k8s, node b's in multienv-k8s-2. Pods on each node's bridge cni0 (node a
#     10.244.0.0/24 gateway 10.244.0.1, node b 10.244.1.0/24 gateway 10.244.1.1); each kube-router announces
#     its node's pod CIDR to the other over BGP and installs the other's as a route via its node address.
#     Services in 10.96.0.0/24 (10.96.0.1 the API, 10.96.0.10 the cluster DNS: kube-system/kube-dns).
#   netns multienv-k8s ── web0 11.99.0.1/24 ═══ eth0 11.99.0.2/24 in netns multienv-k8s-web: a stand-in
#     "public internet" (11.0.0.0/8 is public unicast) and the cluster netns' default route. Tests run their
#     stand-in servers there: `ip netns exec multienv-k8s-web node server.js` (more addresses: `ip netns
#     exec multienv-k8s-web ip addr add 11.99.0.3/24 dev eth0`). Pods reach it un-NATed; no NetworkPolicy
#     is made by this script (the default is permissive). Node b's pods reach it through node a.
#   Cluster DNS answers A records from a hosts-style file (`11.99.0.2 shop.example.com`, re-read within
#   about a second of a change, atomic renames fine) and NXDOMAIN for every other name; it forwards nothing.
#
# Layout: one per machine, not per checkout (scripts/lib/machine-cache.sh; by default ~/.cache/multienv), so a
# fresh clone finds the binaries an earlier one built, and any checkout names the one cluster a machine can run
# (its network namespaces are the machine's):
#   $MACHINE_CACHE/test-cluster/v1.37.2/bin/   the binaries and the pause and coredns image tarballs (kept by down)
#   $MACHINE_CACHE/test-cluster/state/         everything of a running cluster, removed by down:
#     kubeconfig (admin, O=system:masters), pki/, etcd/, containerd/ (root, state, socket, runc root),
#     kubelet/ (kubelet's root dir, pods' volumes), pod-logs/, cni/, dns/hosts (the DNS file) and
#     dns/Corefile, logs/<daemon>.log, pids/<daemon>.pid, host-sysctls (values before up), images (imported
#     image IDs), *.yaml (the daemons' configs): node a's; node-b/ holds node b's containerd/, kubelet/,
#     pod-logs/, cni/, images and *.yaml the same way (its daemons' logs and pids are <daemon>-b.*).
#
# What up changes on the host, and how down restores it:
#   - netns multienv-k8s, multienv-k8s-2 and multienv-k8s-web, veth mk8s0 (with a route to 10.250.0.0/24):
#     deleted.
#   - daemons (pid files in state/pids), pods' processes (cgroups below), containerd shims and any process
#     left in either netns (tests' stand-ins): killed.
#   - cgroups /sys/fs/cgroup/<each hierarchy>/multienv-k8s and multienv-k8s-2 (the kubelets' cgroupRoot):
#     emptied and removed.
#   - mounts below $MACHINE_CACHE/test-cluster/state (pods' volumes, rootfs, shm, pods' netns): unmounted.
#   - sysctls kubelet sets (vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops,
#     kernel.keys.root_maxkeys, kernel.keys.root_maxbytes): recorded before the first daemon starts and
#     written back.
#   - /var/log/containers/ symlinks into state/pod-logs, /var/lib/cni/ entries of network multienv-k8s: removed.
#   - Debian packages it installs when missing stay installed.
# The iptables rules of kube-proxy and kube-router and kube-router's routes are inside the netns and go with them.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/scripts/test-cluster
K8S_VERSION=v1.37.2
KUBE_ROUTER_VERSION=v2.1.0
COREDNS_VERSION=v1.15.0
. "$ROOT/scripts/lib/machine-cache.sh"
# The cache's real path: a checkout that reaches it through a link names the same cluster, not a half-up one.
mkdir -p "$MACHINE_CACHE/test-cluster"
CACHE=$(cd "$MACHINE_CACHE/test-cluster" && pwd -P)
BIN=$CACHE/$K8S_VERSION/bin
STATE=$CACHE/state
PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
KUBECONFIG_PATH=$STATE/kubeconfig
DNS_HOSTS=$STATE/dns/hosts

NETNS=multienv-k8s
WEB_NETNS=multienv-k8s-web
HOST_VETH=mk8s0
NODE_NAME=multienv-k8s
HOST_ADDRESS=10.250.0.1
NODE_ADDRESS=10.250.0.2
WEB_GATEWAY=11.99.0.1
WEB_ADDRESS=11.99.0.2
CLUSTER_POD_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/24
NODE_LABEL=multienv.test/node
# The nodes, by their label's value: a holds the control plane; each has these of its own.
NODES=(a b)
declare -A NODE_NAMES=([a]=$NODE_NAME [b]=multienv-k8s-2)
declare -A NODE_NETNS=([a]=$NETNS [b]=multienv-k8s-2)
declare -A NODE_ADDRESSES=([a]=$NODE_ADDRESS [b]=10.250.0.3)
declare -A POD_CIDRS=([a]=10.244.0.0/24 [b]=10.244.1.0/24)
declare -A NODE_STATES=([a]=$STATE [b]=$STATE/node-b)
declare -A CGROUP_ROOTS=([a]=multienv-k8s [b]=multienv-k8s-2)
# A daemon's name on a node: node a's keep the one-node cluster's names (logs, pid files), node b's end in -b.
daemon_of() { if [ "$2" = a ]; then echo "$1"; else echo "$1-$2"; fi; }
ctr_sock_of() { echo "${NODE_STATES[$1]}/containerd/containerd.sock"; }
API_SERVICE_ADDRESS=10.96.0.1
DNS_SERVICE_ADDRESS=10.96.0.10
PAUSE_IMAGE=docker.io/multienv-test-cluster/pause:1
COREDNS_IMAGE=docker.io/multienv-test-cluster/coredns:$COREDNS_VERSION
KUBE_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
# The daemons, in start order; down stops them in reverse.
DAEMONS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kube-router
  containerd-b kubelet-b kube-proxy-b kube-router-b)
UP_TIMEOUT=${MULTIENV_TEST_CLUSTER_TIMEOUT:-120}

log() { echo "test-cluster: $*" >&2; }
die() { echo "test-cluster: $*" >&2; exit 1; }
usage() { sed -n '/^# Usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//'; }
in_ns() { nsenter --net="/run/netns/$NETNS" -- "$@"; }
in_node() { local node=$1; shift; nsenter --net="/run/netns/${NODE_NETNS[$node]}" -- "$@"; }
kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it makes network namespaces, mounts and cgroups)"; }

ensure_packages() {
  local packages=(containerd runc containernetworking-plugins etcd-server ipset conntrack iptables openssl iproute2 util-linux) missing=() p
  for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2
    apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
  fi
}

# ---- build -------------------------------------------------------------------------------------------------

STAMP="k8s=$K8S_VERSION kube-router=$KUBE_ROUTER_VERSION coredns=$COREDNS_VERSION pause=1"

# An OCI image tarball of one static binary as its entrypoint, made by hand (no registry, no docker build):
# oci_image OUT NAME BINARY
oci_image() {
  local out=$1 name=$2 binary=$3 dir layer config manifest ld cd md
  dir=$(mktemp -d)
  mkdir -p "$dir/rootfs" "$dir/blobs/sha256"
  cp "$binary" "$dir/rootfs/"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$dir/rootfs" -cf "$dir/layer.tar" .
  ld=$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)
  mv "$dir/layer.tar" "$dir/blobs/sha256/$ld"
  config=$(printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/%s"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$(basename "$binary")" "$ld")
  cd=$(printf %s "$config" | sha256sum | cut -d' ' -f1)
  printf %s "$config" > "$dir/blobs/sha256/$cd"
  manifest=$(printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}' \
    "$cd" "${#config}" "$ld" "$(stat -c %s "$dir/blobs/sha256/$ld")")
  md=$(printf %s "$manifest" | sha256sum | cut -d' ' -f1)
  printf %s "$manifest" > "$dir/blobs/sha256/$md"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$md" "${#manifest}" "$name" "${name##*:}" > "$dir/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' > "$dir/oci-layout"
  tar --owner=0 --group=0 --numeric-owner -C "$dir" -cf "$out" oci-layout index.json blobs
  rm -rf "$dir"
}

cmd_build() {
  if [ "$(cat "$BIN/STAMP" 2>/dev/null)" = "$STAMP" ]; then
    log "binaries cached in $BIN"
    return 0
  fi
  mkdir -p "$CACHE"
  # A subshell holds the lock: no daemon started later inherits it.
  ( flock 9; build_locked ) 9>"$CACHE/build.lock"
}

build_locked() {
  if [ "$(cat "$BIN/STAMP" 2>/dev/null)" = "$STAMP" ]; then
    log "binaries cached in $BIN (built meanwhile)"
    return 0
  fi
  [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
  command -v go >/dev/null || die "go is not installed (expected /usr/local/go/bin/go)"
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:+$GOFLAGS }-modcacherw"
  local out=$BIN.tmp started k8s_ld p
  rm -rf "$out" && mkdir -p "$out"
  started=$(date +%s)
  k8s_ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    k8s_ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "building Kubernetes $K8S_VERSION (about 12 minutes on 2 idle cores from an empty Go cache)"
  # One go build for all six commands: they share most packages.
  (cd "$HERE/k8s" && go build -trimpath -ldflags "$k8s_ld" -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
    k8s.io/kubernetes/cmd/kubectl ./pause)
  log "building CoreDNS $COREDNS_VERSION ($(( $(date +%s) - started )) s so far)"
  (cd "$HERE/coredns" && go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" -o "$out/coredns" .)
  log "building kube-router $KUBE_ROUTER_VERSION ($(( $(date +%s) - started )) s so far)"
  (cd "$out" && GOBIN="$out" go install -trimpath \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION -X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=1970-01-01T00:00:00Z" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION")
  oci_image "$out/pause.oci.tar" "$PAUSE_IMAGE" "$out/pause"
  oci_image "$out/coredns.oci.tar" "$COREDNS_IMAGE" "$out/coredns"
  echo "$STAMP" > "$out/STAMP"
  rm -rf "$BIN" && mv "$out" "$BIN"
  log "built in $(( $(date +%s) - started )) s: $BIN"
}

# ---- state checks ------------------------------------------------------------------------------------------

pid_of() { # prints the daemon's pid when it is alive and is that daemon
  local name=$1 pid exe
  pid=$(cat "$PIDS/$name.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  case ${name%-b} in
    etcd|containerd) [ "${exe##*/}" = "${name%-b}" ] || return 1 ;;
    *) [ "$exe" = "$BIN/${name%-b}" ] || return 1 ;;
  esac
  echo "$pid"
}

# is_up [say]: both nodes' daemons alive, the API server ready, both nodes Ready; with say, names what is not.
is_up() {
  local say=${1:-} d n
  not() { [ -n "$say" ] && log "$*"; return 1; }
  [ -f "$KUBECONFIG_PATH" ] || not "no kubeconfig (never up, or down)" || return 1
  for n in "${NODES[@]}"; do [ -e "/run/netns/${NODE_NETNS[$n]}" ] || not "no netns ${NODE_NETNS[$n]} (node $n)" || return 1; done
  for d in "${DAEMONS[@]}"; do
    case $d in kubelet|kubelet-b) continue ;; esac
    pid_of "$d" >/dev/null || not "$d is not running" || return 1
  done
  # The rest running, a kubelet alone not: a node stopped (`node X stop`), which up starts again in place.
  for n in "${NODES[@]}"; do
    pid_of "$(daemon_of kubelet "$n")" >/dev/null ||
      not "node ${NODE_NAMES[$n]} ($n) is stopped: its kubelet is not running (scripts/test-cluster.sh node $n start, or up)" ||
      return 1
  done
  [ "$(kc get --raw /readyz --request-timeout=5s 2>/dev/null)" = ok ] || not "the API server is not ready" || return 1
  for n in "${NODES[@]}"; do
    node_ready "$n" --request-timeout=5s || not "node ${NODE_NAMES[$n]} ($n) is not Ready" || return 1
  done
}

# ---- images --------------------------------------------------------------------------------------------------

ctr_import() { # ctr_import NODE < tarball
  ctr -n k8s.io --address "$(ctr_sock_of "$1")" images import - >>"$LOGS/images.log" 2>&1
}

cmd_load() { # load IMAGE...: docker save once, ctr import on each node that lacks one of them (by image ID)
  local n image id todo=() ids=() nodes=() tar
  for n in "${NODES[@]}"; do
    [ -S "$(ctr_sock_of "$n")" ] || die "the cluster is not up (scripts/test-cluster.sh up): no containerd on node $n"
  done
  for image in "$@"; do
    id=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || die "no local Docker image $image"
    local lacking=()
    for n in "${NODES[@]}"; do
      grep -qxF "$image $id" "${NODE_STATES[$n]}/images" 2>/dev/null || lacking+=("$n")
    done
    [ ${#lacking[@]} -gt 0 ] || continue
    todo+=("$image"); ids+=("$id")
    for n in "${lacking[@]}"; do [[ " ${nodes[*]} " == *" $n "* ]] || nodes+=("$n"); done
  done
  [ ${#todo[@]} -gt 0 ] || return 0
  log "importing on node ${nodes[*]}: ${todo[*]}"
  # One docker save for all, and for both nodes: layers they share are written once. An image a node has already
  # imports again at no cost but the reading.
  tar=$(mktemp "$STATE/images.XXXXXX.tar")
  docker save "${todo[@]}" > "$tar" || { rm -f "$tar"; die "docker save failed for ${todo[*]}"; }
  local t0
  for n in "${nodes[@]}"; do
    t0=$(date +%s)
    ctr_import "$n" < "$tar" || { rm -f "$tar"; tail -5 "$LOGS/images.log" >&2; die "image import on node $n failed (log: $LOGS/images.log)"; }
    log "imported on node $n in $(( $(date +%s) - t0 )) s"
  done
  rm -f "$tar"
  local i record
  for n in "${nodes[@]}"; do
    record=${NODE_STATES[$n]}/images
    for i in "${!todo[@]}"; do
      grep -v "^${todo[$i]} " "$record" > "$record.new" 2>/dev/null || true
      echo "${todo[$i]} ${ids[$i]}" >> "$record.new"
      mv "$record.new" "$record"
    done
  done
}

load_project_images() {
  command -v docker >/dev/null && docker info >/dev/null 2>&1 || { log "no Docker engine: no multienv/ images imported"; return 0; }
  local images
  mapfile -t images < <(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^multienv/' | grep -v ':<none>$' | sort -u)
  [ ${#images[@]} -gt 0 ] && cmd_load "${images[@]}"
  return 0
}

# ---- up ------------------------------------------------------------------------------------------------------

make_network() {
  local b=${NODE_NETNS[b]}
  ip netns add "$NETNS"
  ip netns add "$b"
  ip netns add "$WEB_NETNS"
  # One link for the host and both nodes: a bridge in node a's netns (never the host's, whose iptables would
  # filter what it bridges), the host's veth and node b's on it.
  ip link add "$HOST_VETH" type veth peer name eth0 netns "$NETNS"
  ip addr add "$HOST_ADDRESS/24" dev "$HOST_VETH"
  ip link set "$HOST_VETH" up
  in_ns ip link set lo up
  in_ns ip link add link0 type bridge
  in_ns ip link set eth0 master link0
  in_ns ip link add node-b type veth peer name eth0 netns "$b"
  in_ns ip link set node-b master link0
  in_ns ip addr add "$NODE_ADDRESS/24" dev link0
  in_ns ip link set eth0 up
  in_ns ip link set node-b up
  in_ns ip link set link0 up
  in_node b ip link set lo up
  in_node b ip addr add "${NODE_ADDRESSES[b]}/24" dev eth0
  in_node b ip link set eth0 up
  # Node b reaches the web stand-in through node a, as node a does (pods un-NATed).
  in_node b ip route add default via "$NODE_ADDRESS" dev eth0
  in_node b sysctl -qw net.ipv4.ip_forward=1
  in_node b sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  in_ns ip link add web0 type veth peer name eth0 netns "$WEB_NETNS"
  in_ns ip addr add "$WEB_GATEWAY/24" dev web0
  in_ns ip link set web0 up
  in_ns ip route add default via "$WEB_ADDRESS" dev web0
  ip netns exec "$WEB_NETNS" ip link set lo up
  ip netns exec "$WEB_NETNS" ip addr add "$WEB_ADDRESS/24" dev eth0
  ip netns exec "$WEB_NETNS" ip link set eth0 up
  # Replies to pods: the web netns routes every node's pod CIDR back into node a's netns (pods are not NATed),
  # which routes node b's on.
  ip netns exec "$WEB_NETNS" ip route add "$CLUSTER_POD_CIDR" via "$WEB_GATEWAY"
  in_ns sysctl -qw net.ipv4.ip_forward=1
  in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

# issue NAME SUBJECT EXTENSIONS: a key and a certificate signed by the cluster's CA
issue() {
  local name=$1 subject=$2 ext=$3
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr"
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$ext" > "$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

make_pki() {
  mkdir -p "$PKI"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/ca.key" 2>/dev/null
  printf '[req]\ndistinguished_name=dn\nx509_extensions=ca\n[dn]\n[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\nsubjectKeyIdentifier=hash\n' > "$PKI/ca.cnf"
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=multienv-test-cluster-ca" -days 3650 -config "$PKI/ca.cnf" -out "$PKI/ca.crt"
  local client='extendedKeyUsage=clientAuth'
  issue apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_ADDRESS,IP:$API_SERVICE_ADDRESS,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  issue admin "/O=system:masters/CN=multienv-test-admin" "$client"
  issue kube-controller-manager "/CN=system:kube-controller-manager" "$client"
  issue kube-scheduler "/CN=system:kube-scheduler" "$client"
  issue kube-proxy "/CN=system:kube-proxy" "$client"
  issue kube-router "/CN=system:kube-router" "$client"
  local n
  for n in "${NODES[@]}"; do
    issue "$(daemon_of kubelet "$n")" "/O=system:nodes/CN=system:node:${NODE_NAMES[$n]}" "$client"
    issue "$(daemon_of kubelet-serving "$n")" "/CN=${NODE_NAMES[$n]}" "extendedKeyUsage=serverAuth
subjectAltName=IP:${NODE_ADDRESSES[$n]},DNS:${NODE_NAMES[$n]}"
  done
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/service-account.key" 2>/dev/null
  openssl pkey -in "$PKI/service-account.key" -pubout -out "$PKI/service-account.pub"
  chmod 600 "$PKI"/*.key
}

# kubeconfig FILE NAME: a kubeconfig for the certificate pki/NAME, data embedded
kubeconfig() {
  local b64='base64 -w0'
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: multienv-test
  cluster:
    server: https://$NODE_ADDRESS:6443
    certificate-authority-data: $($b64 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 "$PKI/$2.crt")
    client-key-data: $($b64 "$PKI/$2.key")
contexts:
- name: multienv-test
  context: {cluster: multienv-test, user: $2}
current-context: multienv-test
EOF
  chmod 600 "$1"
}

make_configs() {
  local d
  for d in admin kube-controller-manager kube-scheduler kube-proxy kube-router; do
    kubeconfig "$STATE/$d.kubeconfig" "$d"
  done
  mv "$STATE/admin.kubeconfig" "$KUBECONFIG_PATH"

  # The cluster DNS's files, read by CoreDNS through a hostPath (one machine: the same files on either node).
  mkdir -p "$STATE/dns"
  cat > "$STATE/dns/Corefile" <<EOF
.:53 {
    errors
    log
    hosts /etc/multienv-dns/hosts {
        reload 1s
        ttl 5
        fallthrough
    }
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
  cat > "$DNS_HOSTS" <<EOF
# The test cluster's DNS (scripts/test-cluster.sh): hosts-style lines, "ADDRESS NAME...". Re-read on change.
EOF
  for d in "${NODES[@]}"; do make_node_configs "$d"; done
}

# make_node_configs NODE: the node's containerd, CNI, kubelet and kube-proxy configs, below its state dir.
make_node_configs() {
  local n=$1 S=${NODE_STATES[$1]}
  mkdir -p "$S/containerd" "$S/cni/net.d" "$S/cni/ipam" "$S/kubelet" "$S/pod-logs"
  kubeconfig "$S/kubelet.kubeconfig" "$(daemon_of kubelet "$n")"
  cat > "$S/containerd/config.toml" <<EOF
version = 2
root = "$S/containerd/root"
state = "$S/containerd/state"
[grpc]
  address = "$(ctr_sock_of "$n")"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$S/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # No CAP_SYS_RESOURCE here: runc cannot lower a process' oom_score_adj below its parent's.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$S/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$S/cni/net.d"
    max_conf_num = 1
EOF
  cat > "$S/cni/net.d/10-multienv-k8s.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "multienv-k8s",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "${POD_CIDRS[$n]}"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "$S/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  # Pods' resolv.conf gets the cluster DNS from kubelet; this file (kubelet's resolvConf) only keeps the
  # host's search domains out of pods.
  echo "nameserver $DNS_SERVICE_ADDRESS" > "$STATE/resolv.conf"
  cat > "$S/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${NODE_ADDRESSES[$n]}
port: 10250
readOnlyPort: 0
tlsCertFile: $PKI/$(daemon_of kubelet-serving "$n").crt
tlsPrivateKeyFile: $PKI/$(daemon_of kubelet-serving "$n").key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$(ctr_sock_of "$n")
cgroupDriver: cgroupfs
cgroupRoot: /${CGROUP_ROOTS[$n]}
# The host runs cgroup v1 (hybrid).
failCgroupV1: false
failSwapOn: false
clusterDNS: [$DNS_SERVICE_ADDRESS]
clusterDomain: cluster.local
resolvConf: $STATE/resolv.conf
podLogsDir: $S/pod-logs
# Imported images cannot be pulled again: never collect them, never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
rotateCertificates: false
serverTLSBootstrap: false
EOF
  cat > "$S/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $STATE/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $CLUSTER_POD_CIDR
hostnameOverride: ${NODE_NAMES[$n]}
bindAddress: ${NODE_ADDRESSES[$n]}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# nf_conntrack_max is the host's, not the netns': leave it.
conntrack: {maxPerCore: 0, min: 0}
EOF
}

make_cgroups() {
  local h root
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [ -f "$h/cgroup.procs" ] || continue
    for root in "${CGROUP_ROOTS[@]}"; do
      mkdir -p "$h$root"
      if [ -f "$h/cpuset.cpus" ]; then
        cat "$h/cpuset.cpus" > "$h$root/cpuset.cpus"
        cat "$h/cpuset.mems" > "$h$root/cpuset.mems"
      fi
    done
  done
}

record_sysctls() {
  [ -f "$STATE/host-sysctls" ] && return 0
  local k
  for k in "${KUBE_SYSCTLS[@]}"; do echo "$k $(sysctl -n "$k")"; done > "$STATE/host-sysctls.new"
  mv "$STATE/host-sysctls.new" "$STATE/host-sysctls"
}

start() { # start NAME COMMAND...: a daemon inside node a's netns, in a session of its own
  start_on a "$@"
}

start_on() { # start_on NODE NAME COMMAND...: a daemon inside the node's netns, in a session of its own
  local node=$1 name=$2; shift 2
  # With no descriptor but its three: a daemon lives as long as the cluster, and one it inherited would stay open as
  # long, such as the lock of a caller's `flock /tmp/some.lock scripts/test-cluster.sh up`, then never released.
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    exec setsid nsenter --net="/run/netns/${NODE_NETNS[$node]}" -- "$@" >>"$LOGS/$name.log" 2>&1 </dev/null
  ) &
  echo $! > "$PIDS/$name.pid"
}

fail() { # fail DAEMON MESSAGE: print the daemon's last log lines and give up
  {
    echo "test-cluster: $2"
    echo "--- last lines of $LOGS/$1.log:"
    tail -n 25 "$LOGS/$1.log" 2>/dev/null
    echo "---"
    echo "test-cluster: up failed; the logs stay in $LOGS; scripts/test-cluster.sh down removes it all"
  } >&2
  exit 1
}

# wait_for DAEMON WHAT COMMAND...: until COMMAND succeeds, failing early when DAEMON dies
wait_for() {
  local daemon=$1 what=$2 deadline=$(( $(date +%s) + UP_TIMEOUT )); shift 2
  until "$@" >/dev/null 2>&1; do
    pid_of "$daemon" >/dev/null || fail "$daemon" "$daemon exited while waiting for $what"
    [ "$(date +%s)" -lt "$deadline" ] || fail "$daemon" "timed out after ${UP_TIMEOUT}s waiting for $what"
    sleep 0.3
  done
}

addons() {
  kc apply -f - >>"$LOGS/addons.log" 2>&1 <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "multienv-test:kube-router"}
rules:
- apiGroups: [""]
  resources: [namespaces, pods, services, nodes, endpoints]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "multienv-test:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "multienv-test:kube-router"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-router"}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: $DNS_SERVICE_ADDRESS
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      priorityClassName: system-cluster-critical
      # On node a, with the control plane: a node b lost (a test stops its kubelet) leaves the DNS up.
      nodeSelector: {$NODE_LABEL: a}
      dnsPolicy: Default
      enableServiceLinks: false
      automountServiceAccountToken: false
      tolerations: [{operator: Exists}]
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: [-conf, /etc/multienv-dns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        volumeMounts:
        - {name: dns, mountPath: /etc/multienv-dns, readOnly: true}
      volumes:
      - name: dns
        hostPath: {path: $STATE/dns, type: Directory}
EOF
}

node_ready() { # node_ready NODE [kubectl flags]
  local n=$1; shift
  kc get node "${NODE_NAMES[$n]}" "$@" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True
}
dns_ready() {
  [ "$(kc -n kube-system get pods -l k8s-app=kube-dns -o jsonpath='{.items[*].status.containerStatuses[*].ready}')" = true ]
}
etcd_ready() { in_ns bash -c 'exec 3<>/dev/tcp/127.0.0.1/2379'; }
apiserver_ready() { [ "$(kc get --raw /readyz --request-timeout=3s)" = ok ]; }
routes_to() { # routes_to NODE OTHER: NODE routes OTHER's pod CIDR via OTHER's address
  in_node "$1" ip route show "${POD_CIDRS[$2]}" | grep -q "via ${NODE_ADDRESSES[$2]} "
}
ctr_ready() { ctr --address "$(ctr_sock_of "$1")" version; }

start_kubelet() { # start_kubelet NODE
  local n=$1 S=${NODE_STATES[$1]}
  start_on "$n" "$(daemon_of kubelet "$n")" "$BIN/kubelet" --config="$S/kubelet.yaml" --kubeconfig="$S/kubelet.kubeconfig" \
    --root-dir="$S/kubelet" --cert-dir="$PKI" --hostname-override="${NODE_NAMES[$n]}" --node-ip="${NODE_ADDRESSES[$n]}" \
    --node-labels="$NODE_LABEL=$n"
}

# The nodes whose kubelet alone is not running while every other daemon is (`node X stop`); none when more is down.
stopped_nodes() {
  local d n stopped=()
  for d in "${DAEMONS[@]}"; do
    case $d in kubelet|kubelet-b) continue ;; esac
    pid_of "$d" >/dev/null || return 0
  done
  for n in "${NODES[@]}"; do pid_of "$(daemon_of kubelet "$n")" >/dev/null || stopped+=("$n"); done
  echo "${stopped[@]}"
}

cmd_node_start() { # cmd_node_start NODE...: each node's kubelet started again, then each waited Ready
  local n
  for n in "$@"; do
    if pid_of "$(daemon_of kubelet "$n")" >/dev/null; then log "node $n's kubelet is running"; continue; fi
    start_kubelet "$n"
    log "node $n's kubelet started again"
  done
  for n in "$@"; do
    wait_for "$(daemon_of kubelet "$n")" "node ${NODE_NAMES[$n]} to be Ready again" node_ready "$n"
    log "node $n Ready"
  done
}

cmd_node_stop() { # cmd_node_stop NODE: its kubelet alone, as a kubelet lost; the rest of the node goes on
  local n=$1 pid
  [ -e "/run/netns/${NODE_NETNS[$n]}" ] || die "the cluster is not up (scripts/test-cluster.sh up): no node $n"
  if pid=$(pid_of "$(daemon_of kubelet "$n")"); then
    kill_and_wait 10 "$pid"
    log "node $n's kubelet stopped (its pods' containers go on); scripts/test-cluster.sh node $n start brings it back"
  else
    log "node $n's kubelet was not running"
  fi
}

cmd_up() {
  need_root
  ensure_packages
  cmd_build
  local stopped
  stopped=$(stopped_nodes)
  # A node stopped on purpose is started again in place: a down and up would end every env on the cluster.
  if [ -n "$stopped" ] && [ -f "$KUBECONFIG_PATH" ] && apiserver_ready >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    cmd_node_start $stopped
  fi
  if is_up; then
    load_project_images
    echo "$KUBECONFIG_PATH"
    return 0
  fi
  if [ -e "$STATE" ] || [ -e "/run/netns/$NETNS" ] || [ -e "/run/netns/${NODE_NETNS[b]}" ] || [ -e "/run/netns/$WEB_NETNS" ]; then
    log "a previous cluster is half up: taking it down first"
    cmd_down
  fi
  local started
  started=$(date +%s)
  mkdir -p "$STATE" "$LOGS" "$PIDS"
  record_sysctls
  make_network
  make_pki
  make_configs
  make_cgroups

  start etcd etcd --name "$NODE_NAME" --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "$NODE_NAME=http://127.0.0.1:2380" --logger zap
  local n
  for n in "${NODES[@]}"; do
    start_on "$n" "$(daemon_of containerd "$n")" containerd --config "${NODE_STATES[$n]}/containerd/config.toml"
  done
  wait_for etcd "etcd to listen on 127.0.0.1:2379" etcd_ready
  start kube-apiserver "$BIN/kube-apiserver" \
    --advertise-address="$NODE_ADDRESS" --bind-address=0.0.0.0 --secure-port=6443 \
    --etcd-servers=http://127.0.0.1:2379 \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --service-account-key-file="$PKI/service-account.pub" --service-account-signing-key-file="$PKI/service-account.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --authorization-mode=Node,RBAC --allow-privileged=true --profiling=false
  for n in "${NODES[@]}"; do
    wait_for "$(daemon_of containerd "$n")" "node $n's containerd socket" ctr_ready "$n"
    ctr_import "$n" < "$BIN/pause.oci.tar" || fail images "the pause image did not import on node $n"
  done
  ctr_import a < "$BIN/coredns.oci.tar" || fail images "the coredns image did not import"
  wait_for kube-apiserver "the API server to be ready" apiserver_ready
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$STATE/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$STATE/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$STATE/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/service-account.key" --root-ca-file="$PKI/ca.crt" \
    --allocate-node-cidrs=false --cluster-cidr="$CLUSTER_POD_CIDR" \
    --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false
  start kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$STATE/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$STATE/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$STATE/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false
  for n in "${NODES[@]}"; do
    start_kubelet "$n"
    start_on "$n" "$(daemon_of kube-proxy "$n")" "$BIN/kube-proxy" --config="${NODE_STATES[$n]}/kube-proxy.yaml"
  done
  addons || fail kube-apiserver "the cluster's add-ons (kube-router's RBAC, CoreDNS) did not apply: $(tail -3 "$LOGS/addons.log")"
  for n in "${NODES[@]}"; do
    # kube-router finds its node object at start and exits (nil-pointer panic) when the kubelet has not registered
    # it, and announces the node's pod CIDR, which is set here (always the same per node, unlike an allocation in
    # the order the nodes register).
    wait_for "$(daemon_of kubelet "$n")" "node ${NODE_NAMES[$n]} to register" kc get node "${NODE_NAMES[$n]}"
    kc patch node "${NODE_NAMES[$n]}" --type merge \
      -p "{\"spec\":{\"podCIDR\":\"${POD_CIDRS[$n]}\",\"podCIDRs\":[\"${POD_CIDRS[$n]}\"]}}" >>"$LOGS/addons.log" 2>&1 ||
      fail kube-apiserver "node ${NODE_NAMES[$n]}'s pod CIDR could not be set: $(tail -3 "$LOGS/addons.log")"
    # The router: BGP between the nodes (one link: direct routes, no overlay), pods un-NATed (no egress
    # masquerade), no cloud call (source-dest check), no CNI config of its own.
    start_on "$n" "$(daemon_of kube-router "$n")" "$BIN/kube-router" --kubeconfig="$STATE/kube-router.kubeconfig" \
      --hostname-override="${NODE_NAMES[$n]}" --run-firewall=true --run-router=true --run-service-proxy=false \
      --enable-overlay=false --enable-pod-egress=false --disable-source-dest-check=false --auto-mtu=false \
      --bgp-graceful-restart=false --enable-cni=false --metrics-port=0
  done
  for n in "${NODES[@]}"; do
    wait_for "$(daemon_of kubelet "$n")" "node ${NODE_NAMES[$n]} to be Ready" node_ready "$n"
    log "node $n Ready at $(( $(date +%s) - started )) s"
  done
  # Each node's pods reach the other's: kube-router installed the route BGP announced.
  wait_for kube-router "node a's route to node b's pods (BGP)" routes_to a b
  wait_for kube-router-b "node b's route to node a's pods (BGP)" routes_to b a
  wait_for kube-controller-manager "the default service account" kc get serviceaccount default -n default
  wait_for kubelet "the CoreDNS pod to be ready (kubectl -n kube-system describe pod -l k8s-app=kube-dns)" dns_ready
  local d
  for d in "${DAEMONS[@]}"; do pid_of "$d" >/dev/null || fail "$d" "$d exited"; done
  local ready=$(( $(date +%s) - started ))
  load_project_images
  log "up in $(( $(date +%s) - started )) s (cluster ready in $ready s, then the images); API https://$NODE_ADDRESS:6443, web stand-ins: ip netns exec $WEB_NETNS ... ($WEB_ADDRESS), DNS file $DNS_HOSTS"
  echo "$KUBECONFIG_PATH"
}

# ---- down ----------------------------------------------------------------------------------------------------

netns_inode() { stat -L -c %i "/run/netns/$1" 2>/dev/null; }

# Pids of every process in the cluster's netns, or below its cgroups, or a shim of either node's containerd
# (builtins only: it looks at every process).
cluster_pids() {
  local p n comm args f root
  {
    for p in /proc/[0-9]*; do
      for n in "$NETNS" "${NODE_NETNS[b]}" "$WEB_NETNS"; do
        [ -e "/run/netns/$n" ] && [ "$p/ns/net" -ef "/run/netns/$n" ] && echo "${p#/proc/}"
      done
      { read -r comm < "$p/comm"; } 2>/dev/null || continue
      if [ "$comm" = containerd-shim ]; then
        mapfile -d '' args < "$p/cmdline" 2>/dev/null || continue
        [[ " ${args[*]} " == *"$STATE/"*containerd.sock* ]] && echo "${p#/proc/}"
      fi
    done
    for root in "${CGROUP_ROOTS[@]}"; do
      for f in /sys/fs/cgroup/*/"$root" "/sys/fs/cgroup/$root"; do
        [ -d "$f" ] && find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null
      done
    done
  } | grep -vx "$$" | sort -un
}

kill_and_wait() { # kill_and_wait SECONDS PID...: TERM, then KILL what is left after SECONDS
  local seconds=$1 p i; shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  for i in $(seq 1 $(( seconds * 10 ))); do
    for p in "$@"; do [ -d "/proc/$p" ] && [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" != Z ] && break; p=; done
    [ -z "$p" ] && return 0
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null || true
}

cmd_down() {
  need_root
  local d pid pids=() mounts m h i
  # The daemons, kubelet first so that it restarts nothing.
  for ((i=${#DAEMONS[@]}-1; i>=0; i--)); do
    d=${DAEMONS[$i]}
    case $d in etcd|containerd|containerd-b) continue ;; esac
    pid=$(pid_of "$d") && pids+=("$pid")
  done
  kill_and_wait 5 "${pids[@]}"
  # Then the pods' processes, the shims, containerd, etcd and whatever else runs in the netns.
  for i in 1 2 3; do
    mapfile -t pids < <(cluster_pids)
    [ ${#pids[@]} -gt 0 ] || break
    kill_and_wait 3 "${pids[@]}"
  done
  for d in etcd containerd containerd-b; do pid=$(pid_of "$d") && kill -KILL "$pid" 2>/dev/null || true; done
  # Mounts below the state dir (pods' volumes, rootfs, shm, pods' netns), deepest first.
  if [ -d "$STATE" ]; then
    for i in 1 2 3; do
      mapfile -t mounts < <(awk -v s="$STATE/" 'index($5, s) == 1 || $5 == substr(s, 1, length(s) - 1) { print $5 }' /proc/self/mountinfo | sed 's/\\040/ /g' | sort -r -u)
      [ ${#mounts[@]} -gt 0 ] || break
      for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
    done
  fi
  for m in "${CGROUP_ROOTS[@]}"; do
    for h in /sys/fs/cgroup/*/"$m" "/sys/fs/cgroup/$m"; do
      [ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      [ -d "$h" ] && log "cgroup $h is still there (processes left in it?)"
    done
  done
  for d in "$NETNS" "${NODE_NETNS[b]}" "$WEB_NETNS"; do [ -e "/run/netns/$d" ] && ip netns del "$d"; done
  # Deleting node a's netns deletes the veth pair, the host's end a moment later: either way it is gone.
  ip link del "$HOST_VETH" 2>/dev/null || true
  if [ -f "$STATE/host-sysctls" ]; then
    while read -r d h; do [ -n "$h" ] && sysctl -qw "$d=$h"; done < "$STATE/host-sysctls"
  fi
  for m in /var/log/containers/*; do
    [ -L "$m" ] && case $(readlink "$m") in "$STATE"/*) rm -f "$m" ;; esac
  done
  rmdir /var/log/containers 2>/dev/null || true
  # libcni's cache of the pods' networks (pods killed, not torn down through CNI), by sandbox id.
  for d in "$STATE/containerd" "$STATE/node-b/containerd"; do
    [ -d /var/lib/cni/results ] && [ -d "$d" ] || continue
    find "$d" -maxdepth 5 -type d -regextype egrep -regex '.*/[0-9a-f]{64}' -printf '%f\n' 2>/dev/null | sort -u |
      while read -r m; do rm -f /var/lib/cni/results/*-"$m"-*; done
  done
  rm -rf /var/lib/cni/networks/multienv-k8s /var/lib/cni/results/multienv-k8s-* 2>/dev/null || true
  rmdir /var/lib/cni/results /var/lib/cni/networks /var/lib/cni 2>/dev/null || true
  rm -rf "$STATE"
  [ -e "$STATE" ] && die "could not remove $STATE (a mount left? see /proc/self/mountinfo)"
  log "down"
}

# ---- the rest ------------------------------------------------------------------------------------------------

cmd_status() {
  if is_up say; then echo up; else echo down; return 1; fi
}

cmd_env() {
  is_up || die "the cluster is not up (scripts/test-cluster.sh up)"
  cat <<EOF
export KUBECONFIG='$KUBECONFIG_PATH'
export MULTIENV_TEST_KUBECTL='$BIN/kubectl'
export MULTIENV_TEST_NODE_ADDRESS='$NODE_ADDRESS'
export MULTIENV_TEST_NODE_LABEL='$NODE_LABEL'
export MULTIENV_TEST_CLUSTER_PIDS='$PIDS'
export MULTIENV_TEST_CONTAINERD_SOCKETS='$(ctr_sock_of a) $(ctr_sock_of b)'
export MULTIENV_TEST_WEB_NETNS='$WEB_NETNS'
export MULTIENV_TEST_WEB_ADDRESS='$WEB_ADDRESS'
export MULTIENV_TEST_DNS_HOSTS='$DNS_HOSTS'
EOF
}

# up, down and load one at a time (fd 8; daemons are started without it).
serialize() { need_root; mkdir -p "$CACHE"; exec 8>"$CACHE/cluster.lock"; flock 8; }

case ${1:-} in
  up) serialize; cmd_up ;;
  down) serialize; cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  build) cmd_build ;;
  node)
    case ${2:-}:${3:-} in
      a:stop|b:stop) serialize; cmd_node_stop "$2" ;;
      a:start|b:start) serialize; cmd_node_start "$2" ;;
      *) echo "test-cluster: node needs a node (a or b) and stop or start" >&2; usage >&2; exit 2 ;;
    esac ;;
  load) shift; [ $# -gt 0 ] || { echo "test-cluster: load needs an image" >&2; usage >&2; exit 2; }; serialize; cmd_load "$@" ;;
  -h|--help|help) usage ;;
  *) echo "test-cluster: unknown subcommand '${1:-}'" >&2; usage >&2; exit 2 ;;
esac
