#!/usr/bin/env bash
# make bench-peers: taskorch against River on the same workload, in the same run, on the same
# PostgreSQL. ROUNDS pairs, each pair one `taskorch bench throughput` and one riverbench
# (bench/peers/river) over TASKS no-op tasks bulk-inserted then worked; the order flips every
# round so that a drift in the machine's load falls on both sides. Prints each pair, its ratio
# (taskorch ÷ River) and the median ratio; the JSON of every run is kept in OUT.
#
#   DATABASE_URL=postgres://... scripts/bench-peers.sh
#
# make bench-peers runs it on a private cluster at default durability (withpg -durable). The
# environment may set ROUNDS (3), TASKS (200000), TASKORCH (bin/taskorch), RIVERBENCH
# (bin/riverbench), TASKORCH_FLAGS and RIVER_FLAGS (extra flags for each), OUT (a new temp dir).
# The method and the figures: docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${ROUNDS:-3}
tasks=${TASKS:-200000}
taskorch=${TASKORCH:-bin/taskorch}
riverbench=${RIVERBENCH:-bin/riverbench}
out=${OUT:-$(mktemp -d)}
: "${DATABASE_URL:?set DATABASE_URL (make bench-peers gives a private PostgreSQL)}"
case $rounds in '' | *[!0-9]* | 0) echo "bench-peers: ROUNDS must be a positive number, got '$rounds'" >&2; exit 2 ;; esac
case $tasks in '' | *[!0-9]* | 0) echo "bench-peers: TASKS must be a positive number, got '$tasks'" >&2; exit 2 ;; esac
for b in "$taskorch" "$riverbench"; do
  [ -x "$b" ] || { echo "bench-peers: $b is not built (make bench-peers builds it)" >&2; exit 2; }
done
mkdir -p "$out"

# rate FILE: the tasks_per_second of a run's JSON.
rate() { sed -n 's/^ *"tasks_per_second": *\([0-9.]*\).*/\1/p' "$1" | head -n 1; }
load() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo -; }

run_taskorch() {
  # shellcheck disable=SC2086 # TASKORCH_FLAGS is a list of flags
  "$taskorch" bench throughput --tasks "$tasks" --json ${TASKORCH_FLAGS:-} >"$out/taskorch-$1.json"
}
run_river() {
  # shellcheck disable=SC2086 # RIVER_FLAGS is a list of flags
  "$riverbench" --jobs "$tasks" --json ${RIVER_FLAGS:-} >"$out/river-$1.json"
}

echo "bench-peers: $rounds rounds of $tasks no-op tasks; JSON in $out"
ratios=()
for i in $(seq 1 "$rounds"); do
  l0=$(load)
  if [ $((i % 2)) -eq 1 ]; then run_taskorch "$i"; run_river "$i"; first=taskorch; else run_river "$i"; run_taskorch "$i"; first=river; fi
  t=$(rate "$out/taskorch-$i.json")
  r=$(rate "$out/river-$i.json")
  [ -n "$t" ] && [ -n "$r" ] || { echo "bench-peers: round $i: no tasks_per_second in $out" >&2; exit 1; }
  ratio=$(awk -v t="$t" -v r="$r" 'BEGIN { printf "%.2f", t / r }')
  ratios+=("$ratio")
  printf 'round %d (%s first): taskorch %8.0f tasks/s   River %8.0f jobs/s   ratio %s   load %s -> %s\n' \
    "$i" "$first" "$t" "$r" "$ratio" "$l0" "$(load)"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
echo "median ratio (taskorch ÷ River): $median over $rounds rounds"
