#!/usr/bin/env bash
# Run the test suite N times in a row while another process keeps every core busy, and stop at
# the first red run. A suite that passes here does not depend on the machine's speed.
#
#   scripts/stress_tests.sh [-n N] [pytest args...]
#   scripts/stress_tests.sh -n 5                              # the whole suite, five times
#   scripts/stress_tests.sh -n 2 tests/cli/test_cli_entry.py  # a subset
#
# The load is one busy-looping process per core (nproc), started here and stopped by their
# own process ids when the script ends, however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=5
if [ "${1:-}" = "-n" ]; then runs=$2; shift 2; fi
cores=$(nproc)
burners=()

stop_burners() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${burners[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_burners EXIT INT TERM

for _ in $(seq "$cores"); do
  .venv/bin/python -c 'while True: pass' &
  burners+=("$!")
done
echo "stress: $cores busy-loop processes (${burners[*]}) keep $cores cores busy"

for run in $(seq "$runs"); do
  start=$(date +%s)
  if .venv/bin/python -m pytest -q -p no:cacheprovider "$@"; then
    echo "stress: run $run of $runs passed in $(( $(date +%s) - start ))s"
  else
    echo "stress: run $run of $runs FAILED after $(( $(date +%s) - start ))s" >&2
    exit 1
  fi
done
echo "stress: all $runs runs passed with $cores cores kept busy"
