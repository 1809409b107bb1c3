#!/usr/bin/env bash
# Builds pulumi-resource-kubernetes VERSION into OUT from its published Go module,
# github.com/pulumi/pulumi-kubernetes/provider/v4, the way the provider's own Makefile does: its generate.go
# writes the schema (carrying VERSION) and the Terraform mapping that main embeds, then the provider is built
# with VERSION stamped into its version package. Called by scripts/pulumi-toolchain.sh when no kubernetes
# plugin of VERSION is installed.
#
#   build.sh WORKDIR VERSION OUT_BINARY
set -euo pipefail
work=$1 version=$2 out=$3
log() { printf '[pulumi-kubernetes %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The proxy serves the provider module at pseudo-versions only (its release tags are on the repository, whose
# root is no Go module); its module list may not name this one, but the exact version is served. It is the
# master commit of 2026-01-15, a day before v4.25.0 was tagged and after v4.24.1: the package schema it embeds
# names the same resources and types as @pulumi/kubernetes 4.24.1, and the Go SDK the repository generates
# from it is unchanged from v4.24.0 to v4.25.0 but for the version.
PROVIDER=github.com/pulumi/pulumi-kubernetes/provider/v4@${MULTIENV_K8S_PROVIDER_VERSION:-v4.0.0-20260115033456-f47bc2d6f199}
# -buildvcs=false: WORKDIR may sit inside another repository (this one's .cache), whose commit is not the build's.
export GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0

field() { sed -n "s/.*\"$1\": \"\(.*\)\".*/\1/p"; }

rm -rf "$work" && mkdir -p "$work"
json=$(go mod download -json "$PROVIDER") || { log "$(field Error <<<"$json")"; exit 1; }
src=$(field Dir <<<"$json")
cp -r "$src" "$work/provider" && chmod -R u+w "$work/provider"
cd "$work/provider"
# Its go.mod replaces the kubernetes Go SDK with ../sdk, a path only its repository has: without the replace
# the SDK comes from the proxy at the version its require names.
go mod edit -dropreplace github.com/pulumi/pulumi-kubernetes/sdk/v4
go mod download github.com/pulumi/pulumi-kubernetes/sdk/v4
log "resolving modules (provider ${PROVIDER#*@}; $(go list -m -f '{{.Path}} {{.Version}}' github.com/pulumi/pulumi-kubernetes/sdk/v4 github.com/pulumi/pulumi/pkg/v3 k8s.io/client-go | tr '\n' ' '| sed 's/ $//'))"
log "writing the embedded schema (version $version) and terraform mapping"
# main.go's go:generate step: schema-embed.json and terraform-mapping-embed.json, from the committed JSON.
(cd cmd/pulumi-resource-kubernetes && VERSION=$version go run generate.go)
log "building the provider"
go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$version" \
  -o "$out.tmp" ./cmd/pulumi-resource-kubernetes
mv "$out.tmp" "$out"
log "built $out ($(du -h "$out" | cut -f1))"
