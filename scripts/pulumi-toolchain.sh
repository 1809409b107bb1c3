#!/usr/bin/env bash
# Provides the Pulumi toolchain the project runs on: the `pulumi` CLI, the Node.js language host, the scripts
# that start Node.js dynamic providers and policy packs, and the docker and kubernetes resource plugins.
# Idempotent; prints the bin directory of the CLI.
#
# Usage: scripts/pulumi-toolchain.sh [--print-env] [PLUGIN...]   (PLUGIN: docker, kubernetes; default docker)
#   --print-env: `export PATH=...` for a shell to eval. The CLI and language host are always provided; of the
#   resource plugins only those named (a deploy on the docker target needs docker alone; the kubernetes target,
#   and its e2e tier, kubernetes too).
#
# Everything built is built once per machine, not per checkout (scripts/lib/machine-cache.sh: MACHINE_CACHE, by
# default ~/.cache/multienv), keyed by version, and put where a user's own install would be: the CLI is linked into
# /usr/local/bin (when writable) so it is found on PATH, and each plugin is registered in Pulumi's plugin directory
# with `pulumi plugin install`. A fresh clone on a machine that built them once reuses them; a version bump builds
# anew.
#
#   - A `pulumi` already on PATH (installed the usual way, https://www.pulumi.com/docs/install/) is used as
#     it is: its distribution carries the language host and those scripts. Nothing of it is built.
#   - Otherwise the toolchain is built with `go build` from the published Go modules, into
#     $MACHINE_CACHE/pulumi/<versions>/bin, and reused while it is there (a second run takes well under a second):
#       pulumi                         github.com/pulumi/pulumi/pkg/v3 (cmd/pulumi), from a small wrapper
#                                      module that requires pkg and sdk at the same version (pkg's own go.mod
#                                      replaces the sdk with a relative path, which only works in its repo)
#       pulumi-language-nodejs         see NODEJS_HOST_VERSION below
#       pulumi-resource-pulumi-nodejs  the script that runs @pulumi/pulumi's dynamic-provider host (sdk module)
#       pulumi-analyzer-policy         the script that runs @pulumi/pulumi's policy-pack host (sdk module)
#     Each binary reports the version it was built from (-ldflags -X ...version.Version, as release builds do).
#
# The CLI version is the one of the @pulumi/pulumi npm package the project pins (package-lock.json), so the
# engine and the SDK the program runs on are one release.
#
# The Node.js language host of that release is its own Go module without tags
# (github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3, a pseudo-version of the release commit),
# and the module proxy this project's machines use serves no version of it. The newest language host the proxy
# serves is the one inside the sdk module itself, which it stopped carrying after v3.68.0; that host runs
# today's programs, dynamic providers and `pulumi up`/`preview`/`destroy`/`refresh`, but predates the
# RunPlugin call the CLI uses to start policy packs (`--policy-pack`). Set MULTIENV_NODEJS_HOST_MODULE_VERSION
# to a pseudo-version the proxy serves to build the release's own host instead.
#
# The resource plugins, docker and kubernetes, each at the version of its npm package (@pulumi/docker,
# @pulumi/kubernetes) the lock file pins: one already installed (`pulumi plugin ls`; a user's
# `pulumi plugin install resource <name> <version>`, or Pulumi's own automatic acquisition) is used as it is.
# Otherwise it is built from published Go modules by scripts/pulumi-<name>/build.sh, cached in
# $MACHINE_CACHE/pulumi/<name>-<version>/bin, and registered with `pulumi plugin install resource <name> <version>
# --file`. The builds run beside the CLI's (docker about 6 minutes, kubernetes about 11, on 2 cores from a cold
# Go cache; seconds after).
#   pulumi-resource-docker      the upstream Terraform provider bridged with pulumi-terraform-bridge, as
#                               Pulumi's release is (scripts/pulumi-docker/)
#   pulumi-resource-kubernetes  github.com/pulumi/pulumi-kubernetes/provider/v4 (cmd/pulumi-resource-kubernetes),
#                               its embedded schema and version stamped with the npm package's version
#                               (scripts/pulumi-kubernetes/)
# The ec2 target's aws plugin is installed by Pulumi itself on first use (automatic plugin acquisition), as for
# any Pulumi user.
#
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/machine-cache.sh
log() { printf '[pulumi-toolchain %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

print_env=0
PLUGINS=()
for arg in "$@"; do
  case $arg in
    --print-env) print_env=1 ;;
    docker|kubernetes) PLUGINS+=("$arg") ;;
    *) log "unknown argument $arg (usage: scripts/pulumi-toolchain.sh [--print-env] [docker] [kubernetes])"; exit 2 ;;
  esac
done
[ ${#PLUGINS[@]} -gt 0 ] || PLUGINS=(docker)

emit() {
  local bin=$1
  if [ $print_env = 1 ]; then printf 'export PATH=%q:"$PATH"\n' "$bin"; else echo "$bin"; fi
}

# --- the resource plugins: their versions, and whether they are installed -----------------------------------
# Each is the plugin of a provider package the program uses, at the version of that npm package in the lock
# file, built (when none of that version is installed) by scripts/pulumi-<name>/build.sh WORKDIR VERSION OUT.
mkdir -p "$MACHINE_CACHE/pulumi"
CACHE_ROOT=$(cd "$MACHINE_CACHE/pulumi" && pwd -P)
declare -A PLUGIN_VERSION build_pid
# A first build's time on 2 idle cores from a cold Go cache (kubernetes: 22 minutes of CPU measured).
declare -A PLUGIN_BUILD_TIME=([docker]="about 6 minutes" [kubernetes]="about 11 minutes")
for p in "${PLUGINS[@]}"; do
  PLUGIN_VERSION[$p]=$(node -p "require('./package-lock.json').packages['node_modules/@pulumi/$p'].version" 2>/dev/null) || {
    log "package-lock.json names no @pulumi/$p; run npm install first"
    exit 1
  }
done
plugin_bin() { echo "$CACHE_ROOT/$1-${PLUGIN_VERSION[$1]}/bin"; }
# Where `pulumi plugin install` puts a resource plugin, and `pulumi plugin ls` finds it.
plugin_dir() { echo "${PULUMI_HOME:-$HOME/.pulumi}/plugins/resource-$1-v${PLUGIN_VERSION[$1]}"; }
plugin_installed() { [ -x "$(plugin_dir "$1")/pulumi-resource-$1" ]; }
# Builds plugin $1 into the cache unless it is there; run in the background beside the CLI's build.
build_plugin() {
  local name=$1 version=${PLUGIN_VERSION[$1]} bin
  bin=$(plugin_bin "$name")
  [ -x "$bin/pulumi-resource-$name" ] && return 0
  command -v go >/dev/null || { log "no $name plugin $version is installed and go is not on PATH: run pulumi plugin install resource $name $version"; return 1; }
  log "building pulumi-resource-$name $version (${PLUGIN_BUILD_TIME[$name]} on 2 cores the first time)"
  mkdir -p "$bin"
  bash "scripts/pulumi-$name/build.sh" "$CACHE_ROOT/src/$name-$version" "$version" "$bin/pulumi-resource-$name"
}
# Starts the build of every plugin that is neither installed nor being built.
start_plugin_builds() {
  local p
  for p in "${PLUGINS[@]}"; do
    if plugin_installed "$p" || [ -n "${build_pid[$p]:-}" ]; then continue; fi
    build_plugin "$p" &
    build_pid[$p]=$!
  done
}
wait_plugin_build() { # $1: a plugin name
  local pid=${build_pid[$1]:-}
  [ -n "$pid" ] || { build_plugin "$1"; return; }
  unset "build_pid[$1]"
  wait "$pid" || { log "the $1 plugin did not build"; return 1; }
}
# Registers a built plugin with the CLI, as `pulumi plugin install` does for a downloaded one.
install_plugin() { # $1: a plugin name, $2: a pulumi binary
  plugin_installed "$1" && return 0
  "$2" plugin install resource "$1" "${PLUGIN_VERSION[$1]}" --file "$(plugin_bin "$1")/pulumi-resource-$1" >&2
  log "installed the $1 plugin ${PLUGIN_VERSION[$1]} from $(plugin_bin "$1")"
}
# The plugins for the CLI `$1`, each built only when that CLI has none of its version; fails if one is missing.
provide_plugins() { # $1: a pulumi binary, already built or installed
  local p ok=0
  start_plugin_builds
  for p in "${PLUGINS[@]}"; do
    if plugin_installed "$p"; then
      log "using the installed $p plugin ${PLUGIN_VERSION[$p]} ($(plugin_dir "$p"))"
    else
      { wait_plugin_build "$p" && install_plugin "$p" "$1"; } || ok=1
    fi
  done
  return $ok
}
plugin_summary() { local p; for p in "${PLUGINS[@]}"; do printf ', %s plugin %s' "$p" "${PLUGIN_VERSION[$p]}"; done; }
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"

# --- a pulumi the user installed -----------------------------------------------------------------------
if existing=$(command -v pulumi 2>/dev/null) && [[ "$(readlink -f "$existing")" != "$CACHE_ROOT"/* ]]; then
  log "using $existing ($("$existing" version 2>/dev/null || echo 'version unknown'))"
  provide_plugins "$existing"
  emit "$(dirname "$existing")"
  exit 0
fi

# --- versions -----------------------------------------------------------------------------------------
SDK_VERSION=$(node -p "require('./package-lock.json').packages['node_modules/@pulumi/pulumi'].version" 2>/dev/null) || {
  log "package-lock.json names no @pulumi/pulumi; run npm install first"
  exit 1
}
CLI_VERSION=v$SDK_VERSION
NODEJS_HOST_MODULE=github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3
NODEJS_HOST_MODULE_VERSION=${MULTIENV_NODEJS_HOST_MODULE_VERSION:-}
if [ -n "$NODEJS_HOST_MODULE_VERSION" ]; then
  NODEJS_HOST_VERSION=$CLI_VERSION
else
  NODEJS_HOST_VERSION=v3.68.0 # the newest sdk module that still carries nodejs/cmd/pulumi-language-nodejs
fi
KEY="cli-${CLI_VERSION#v}_nodejs-${NODEJS_HOST_VERSION#v}"
BIN=$CACHE_ROOT/$KEY/bin
SRC=$CACHE_ROOT/src/$KEY
ln -sfn "$KEY" "$CACHE_ROOT/current" 2>/dev/null || { mkdir -p "$CACHE_ROOT" && ln -sfn "$KEY" "$CACHE_ROOT/current"; }

wanted=(pulumi pulumi-language-nodejs pulumi-resource-pulumi-nodejs pulumi-analyzer-policy)
# Links the built toolchain into LINK_DIR, on PATH, where a user's own install is found; where that folder is not
# writable, says which folder to put on PATH instead (the runner and the e2e tier also look in $CACHE_ROOT/current).
LINK_DIR=${MULTIENV_PULUMI_LINK_DIR:-/usr/local/bin}
link_on_path() {
  local b
  if [ -d "$LINK_DIR" ] && [ -w "$LINK_DIR" ]; then
    for b in "${wanted[@]}"; do ln -sfn "$BIN/$b" "$LINK_DIR/$b"; done
    log "linked pulumi $CLI_VERSION into $LINK_DIR"
  else
    log "$LINK_DIR is not writable: put $BIN on PATH (eval \"\$(scripts/pulumi-toolchain.sh --print-env)\")"
  fi
}
complete=1
for b in "${wanted[@]}"; do [ -x "$BIN/$b" ] || complete=0; done
if [ $complete = 1 ]; then
  log "reusing $BIN (pulumi $("$BIN/pulumi" version), nodejs language host $NODEJS_HOST_VERSION)"
  link_on_path
  provide_plugins "$BIN/pulumi"
  emit "$BIN"
  exit 0
fi

command -v go >/dev/null || { log "neither pulumi nor go is on PATH: install Pulumi (https://www.pulumi.com/docs/install/) or Go 1.25+"; exit 1; }
export GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0
VERSION_PKG=github.com/pulumi/pulumi/sdk/v3/go/common/version.Version
mkdir -p "$BIN" "$SRC"
# The plugins build beside the CLI (all are mostly compiling, each on its own packages).
start_plugin_builds

# wrapper_module DIR MODULE_NAME GO_VERSION REQUIRE... : a module that only requires what is built from it.
wrapper_module() {
  local dir=$1 name=$2 go=$3; shift 3
  mkdir -p "$dir"
  { echo "module $name"; echo; echo "go $go"; echo; for r in "$@"; do echo "require $r"; done; } > "$dir/go.mod"
  : > "$dir/go.sum"
}

# --- the CLI ----------------------------------------------------------------------------------------------
if [ ! -x "$BIN/pulumi" ]; then
  log "building pulumi $CLI_VERSION from github.com/pulumi/pulumi/pkg/v3 (about 6 minutes on 2 cores the first time)"
  dir=$SRC/cli
  wrapper_module "$dir" multienv.local/pulumi-cli 1.25 \
    "github.com/pulumi/pulumi/pkg/v3 $CLI_VERSION" "github.com/pulumi/pulumi/sdk/v3 $CLI_VERSION"
  # pkg's own go.mod replaces the clipboard module with Pulumi's fork; a dependency's replaces do not apply.
  clip=$(go mod download -json "github.com/pulumi/pulumi/pkg/v3@$CLI_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  grep -E '^replace github.com/atotto/clipboard' "$clip" >> "$dir/go.mod" || true
  (cd "$dir" && go build -mod=mod -trimpath -ldflags "-s -w -X $VERSION_PKG=$CLI_VERSION" -o "$BIN/pulumi.tmp" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  mv "$BIN/pulumi.tmp" "$BIN/pulumi"
fi

# --- the Node.js language host ----------------------------------------------------------------------------
if [ ! -x "$BIN/pulumi-language-nodejs" ]; then
  dir=$SRC/nodejs
  if [ -n "$NODEJS_HOST_MODULE_VERSION" ]; then
    log "building pulumi-language-nodejs $NODEJS_HOST_VERSION from $NODEJS_HOST_MODULE@$NODEJS_HOST_MODULE_VERSION"
    wrapper_module "$dir" multienv.local/pulumi-language-nodejs 1.25 "$NODEJS_HOST_MODULE $NODEJS_HOST_MODULE_VERSION" \
      "github.com/pulumi/pulumi/pkg/v3 $CLI_VERSION" "github.com/pulumi/pulumi/sdk/v3 $CLI_VERSION"
    pkg=$NODEJS_HOST_MODULE
  else
    log "building pulumi-language-nodejs $NODEJS_HOST_VERSION from github.com/pulumi/pulumi/sdk/v3 (the release's own host is not served)"
    wrapper_module "$dir" multienv.local/pulumi-language-nodejs 1.21 "github.com/pulumi/pulumi/sdk/v3 $NODEJS_HOST_VERSION"
    pkg=github.com/pulumi/pulumi/sdk/v3/nodejs/cmd/pulumi-language-nodejs
  fi
  (cd "$dir" && go build -mod=mod -trimpath -ldflags "-s -w -X $VERSION_PKG=$NODEJS_HOST_VERSION" -o "$BIN/pulumi-language-nodejs.tmp" "$pkg")
  mv "$BIN/pulumi-language-nodejs.tmp" "$BIN/pulumi-language-nodejs"
fi

# --- the plugin scripts of the Node.js SDK's distribution --------------------------------------------------
for script in pulumi-resource-pulumi-nodejs pulumi-analyzer-policy; do
  [ -x "$BIN/$script" ] && continue
  found=""
  for v in "$CLI_VERSION" "$NODEJS_HOST_VERSION"; do
    d=$(go mod download -json "github.com/pulumi/pulumi/sdk/v3@$v" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    if [ -f "$d/nodejs/dist/$script" ]; then found=$d/nodejs/dist/$script; break; fi
  done
  [ -n "$found" ] || { log "no $script in the sdk module"; exit 1; }
  install -m 0755 "$found" "$BIN/$script"
done

link_on_path
provide_plugins "$BIN/pulumi"
log "built $BIN: pulumi $("$BIN/pulumi" version), nodejs language host $NODEJS_HOST_VERSION$(plugin_summary)"
emit "$BIN"
