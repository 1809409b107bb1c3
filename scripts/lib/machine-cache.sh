# Sourced by the scripts that build what a machine needs once (the Pulumi toolchain, the test cluster's binaries):
# where those builds live, and a way to run a long build that says it is still alive.
#
# MACHINE_CACHE is one folder per machine, not per checkout: a fresh clone (CI after a developer's own setup, a
# second worktree) finds what an earlier one built, keyed by version, so only a version bump builds again.
# src/machine-cache.ts names the same folder for the runner, the program and the providers (MULTIENV_CACHE, else
# $XDG_CACHE_HOME/multienv, else ~/.cache/multienv).
MACHINE_CACHE=${MULTIENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/multienv}

# with_progress LABEL LOG COMMAND...: runs COMMAND with its output in LOG, and prints a line to stderr at least once
# a minute while it runs (how long so far, and the log's last line), then the outcome. Returns COMMAND's status.
with_progress() {
  local label=$1 log=$2 started pid status=0 last
  shift 2
  started=$(date +%s)
  mkdir -p "$(dirname "$log")"
  "$@" >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$pid" 2>/dev/null; then
      last=$(tail -n 1 "$log" 2>/dev/null | cut -c1-140)
      printf '%s: still running, %d min so far (%s)\n' "$label" $(( ($(date +%s) - started) / 60 )) "${last:-no output yet}" >&2
    fi
  done
  wait "$pid" || status=$?
  if [ $status = 0 ]; then
    printf '%s: done in %d s\n' "$label" $(( $(date +%s) - started )) >&2
  else
    tail -n 30 "$log" >&2
    printf '%s: failed after %d s (log above: %s)\n' "$label" $(( $(date +%s) - started )) "$log" >&2
  fi
  return $status
}
