#!/usr/bin/env bash
# Builds pulumi-resource-docker VERSION into OUT from published Go modules: the upstream Terraform provider
# bridged with pulumi-terraform-bridge, mapped onto @pulumi/docker's tokens by info.go. Two builds, as every
# bridged provider: tfgen writes the package schema, then the provider embeds it. Called by
# scripts/pulumi-toolchain.sh when no docker plugin of VERSION is installed.
#
#   build.sh WORKDIR VERSION OUT_BINARY
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$1 version=$2 out=$3
log() { printf '[pulumi-docker %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The bridge pulumi-docker builds with (the module list stops at v3.120.0; this exact version is served), and the
# upstream provider's newest commit (upstream 4.6 and later; served as a pseudo-version, its go.mod naming it
# github.com/terraform-providers/terraform-provider-docker).
BRIDGE=github.com/pulumi/pulumi-terraform-bridge/v3@${MULTIENV_TF_BRIDGE_VERSION:-v3.137.0}
UPSTREAM=github.com/kreuzwerker/terraform-provider-docker@${MULTIENV_TF_DOCKER_VERSION:-v0.0.0-20260916201441-96d331c98ff4}
export GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0

dir_of() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }
gomod_of() { go mod download -json "$1" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p'; }

rm -rf "$work" && mkdir -p "$work"
# The upstream provider's constructor is in internal/provider: a copy of the module with one exported package
# that returns it (the single patch pulumi-docker applies to its upstream too).
cp -r "$(dir_of "$UPSTREAM")" "$work/upstream" && chmod -R u+w "$work/upstream"
mkdir -p "$work/upstream/shim" && cp "$here/shim.go.txt" "$work/upstream/shim/shim.go"
cp "$here/info.go" "$work/" && cp -r "$here/tfgen" "$here/provider" "$work/"
# The bridge's users must take its fork of terraform-plugin-sdk, at the version the bridge's go.mod names.
sdk_fork=$(grep -E '^replace github.com/hashicorp/terraform-plugin-sdk/v2 =>' "$(gomod_of "$BRIDGE")" | sed 's/.*=> //')
[ -n "$sdk_fork" ] || { log "the bridge's go.mod names no terraform-plugin-sdk fork"; exit 1; }
cat > "$work/go.mod" <<MOD
module multienv.local/pulumi-docker

go 1.25.11

require (
	github.com/pulumi/pulumi-terraform-bridge/v3 ${BRIDGE#*@}
	github.com/terraform-providers/terraform-provider-docker v0.0.0
)

replace github.com/terraform-providers/terraform-provider-docker => ./upstream

replace github.com/hashicorp/terraform-plugin-sdk/v2 => $sdk_fork
MOD
cd "$work"
log "resolving modules (bridge ${BRIDGE#*@}, upstream ${UPSTREAM#*@})"
go mod tidy >/dev/null
ldflags="-s -w -X main.version=$version"
log "building tfgen"
go build -trimpath -tags no_compose -ldflags "$ldflags" -o bin/pulumi-tfgen-docker ./tfgen
log "writing the schema"
# Examples are HCL that only `pulumi convert` with the terraform converter plugin turns into code; docs stay.
./bin/pulumi-tfgen-docker schema --skip-examples --out schema-out >tfgen.log 2>&1 || { tail -20 tfgen.log >&2; exit 1; }
# The schema carries the version of the npm package it serves, as the provider's own release does.
node -e 'const fs = require("fs"); const s = JSON.parse(fs.readFileSync(process.argv[1], "utf8")); s.version = process.argv[2]; fs.writeFileSync(process.argv[3], JSON.stringify(s))' schema-out/schema.json "$version" provider/schema.json
log "building the provider"
go build -trimpath -tags no_compose -ldflags "$ldflags" -o "$out.tmp" ./provider
mv "$out.tmp" "$out"
log "built $out ($(du -h "$out" | cut -f1))"
