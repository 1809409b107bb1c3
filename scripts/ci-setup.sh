#!/usr/bin/env bash
# Installs what the test suite needs: Debian packages, npm packages, a running dockerd and the images.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
packages=(docker.io debootstrap chromium tcpdump nginx squid wrk curl iproute2 procps jq libnss3-tools python3)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q
  apt-get install -y -q "${missing[@]}"
fi
npm ci --no-audit --no-fund
