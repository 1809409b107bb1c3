#!/bin/sh
# Runs a command in a network namespace of its own, with loopback alone, when this user may make one (root):
# Chromium drops a page load whenever the machine's interfaces change (Docker creating a network for any stack
# on this engine, say), and the unit tier's services and browsers need nothing but loopback and unix sockets.
# Where no namespace can be made, the command runs as it is.
if unshare -n true 2>/dev/null; then
  exec unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$@"
fi
exec "$@"
