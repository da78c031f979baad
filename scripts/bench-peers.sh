#!/usr/bin/env bash
# make bench-peers: taskorch against River on the same workloads, in the same run, on the same
# PostgreSQL, the order flipped every round so that a drift in the machine's load falls on both
# sides. Two workloads, each ROUNDS pairs:
#   throughput: one `taskorch bench throughput` and one riverbench over TASKS no-op tasks
#     bulk-inserted then worked (tasks/s);
#   app-tx: one `taskorch bench app-tx` and one `riverbench --mode app-tx`: APPTX_CONNECTIONS
#     connections committing an order row + one enqueue (EnqueueTx, InsertTx) per transaction,
#     each tool alternating with the order row alone in the same run (tx/s, and each tool's
#     ratio to its own order rows).
# Prints each pair, its ratio (taskorch ÷ River) and the median ratio; the JSON of every run is
# kept in OUT.
#
#   DATABASE_URL=postgres://... scripts/bench-peers.sh
#
# make bench-peers runs it on a private cluster at default durability (withpg -durable). The
# environment may set ROUNDS (3), TASKS (200000), WORKLOADS ("throughput app-tx"),
# APPTX_CONNECTIONS (32), APPTX_DURATION (10s), TASKORCH (bin/taskorch), RIVERBENCH
# (bin/riverbench), TASKORCH_FLAGS and RIVER_FLAGS (extra flags for each throughput run),
# APPTX_TASKORCH_FLAGS and APPTX_RIVER_FLAGS (for each app-tx run), OUT (a new temp dir), and
# BEFORE: a taskorch binary of an earlier commit (with a `bench app-tx` mode), whose app-tx runs
# in each round too (before and after in the same run; the three take turns going first).
# The method and the figures: docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${ROUNDS:-3}
tasks=${TASKS:-200000}
workloads=${WORKLOADS:-throughput app-tx}
conns=${APPTX_CONNECTIONS:-32}
dur=${APPTX_DURATION:-10s}
taskorch=${TASKORCH:-bin/taskorch}
riverbench=${RIVERBENCH:-bin/riverbench}
out=${OUT:-$(mktemp -d)}
: "${DATABASE_URL:?set DATABASE_URL (make bench-peers gives a private PostgreSQL)}"
case $rounds in '' | *[!0-9]* | 0) echo "bench-peers: ROUNDS must be a positive number, got '$rounds'" >&2; exit 2 ;; esac
case $tasks in '' | *[!0-9]* | 0) echo "bench-peers: TASKS must be a positive number, got '$tasks'" >&2; exit 2 ;; esac
case $conns in '' | *[!0-9]* | 0) echo "bench-peers: APPTX_CONNECTIONS must be a positive number, got '$conns'" >&2; exit 2 ;; esac
for w in $workloads; do
  case $w in throughput | app-tx) ;; *) echo "bench-peers: WORKLOADS: unknown workload '$w' (throughput, app-tx)" >&2; exit 2 ;; esac
done
before=${BEFORE:-}
for b in "$taskorch" "$riverbench" ${before:+"$before"}; do
  [ -x "$b" ] || { echo "bench-peers: $b is not built (make bench-peers builds it)" >&2; exit 2; }
done
mkdir -p "$out"

# num KEY FILE: the first number under KEY in a run's JSON.
num() { sed -n 's/^ *"'"$1"'": *\([0-9.]*\).*/\1/p' "$2" | head -n 1; }
load() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo -; }
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

run_taskorch() {
  # shellcheck disable=SC2086 # TASKORCH_FLAGS is a list of flags
  "$taskorch" bench throughput --tasks "$tasks" --json ${TASKORCH_FLAGS:-} >"$out/taskorch-$1.json"
}
run_river() {
  # shellcheck disable=SC2086 # RIVER_FLAGS is a list of flags
  "$riverbench" --jobs "$tasks" --json ${RIVER_FLAGS:-} >"$out/river-$1.json"
}
run_taskorch_apptx() {
  # shellcheck disable=SC2086 # APPTX_TASKORCH_FLAGS is a list of flags
  "$taskorch" bench app-tx --rounds 1 --connections "$conns" --duration "$dur" --json ${APPTX_TASKORCH_FLAGS:-} >"$out/taskorch-app-tx-$1.json"
}
run_before_apptx() {
  [ -n "$before" ] || return 0
  # shellcheck disable=SC2086 # APPTX_TASKORCH_FLAGS is a list of flags
  "$before" bench app-tx --rounds 1 --connections "$conns" --duration "$dur" --json ${APPTX_TASKORCH_FLAGS:-} >"$out/before-app-tx-$1.json"
}
run_river_apptx() {
  # shellcheck disable=SC2086 # APPTX_RIVER_FLAGS is a list of flags
  "$riverbench" --mode app-tx --rounds 1 --connections "$conns" --duration "$dur" --json ${APPTX_RIVER_FLAGS:-} >"$out/river-app-tx-$1.json"
}

for w in $workloads; do
  ratios=()
  if [ "$w" = throughput ]; then
    echo "bench-peers: throughput, $rounds rounds of $tasks no-op tasks; JSON in $out"
  else
    echo "bench-peers: app-tx, $rounds rounds of $conns connections, an order row + one enqueue a transaction, $dur measured; JSON in $out"
  fi
  for i in $(seq 1 "$rounds"); do
    l0=$(load)
    if [ "$w" = throughput ]; then
      if [ $((i % 2)) -eq 1 ]; then run_taskorch "$i"; run_river "$i"; first=taskorch; else run_river "$i"; run_taskorch "$i"; first=river; fi
      t=$(num tasks_per_second "$out/taskorch-$i.json")
      r=$(num tasks_per_second "$out/river-$i.json")
      [ -n "$t" ] && [ -n "$r" ] || { echo "bench-peers: round $i: no tasks_per_second in $out" >&2; exit 1; }
      ratio=$(awk -v t="$t" -v r="$r" 'BEGIN { printf "%.2f", t / r }')
      printf 'round %d (%s first): taskorch %8.0f tasks/s   River %8.0f jobs/s   ratio %s   load %s -> %s\n' \
        "$i" "$first" "$t" "$r" "$ratio" "$l0" "$(load)"
    else
      case $((i % 3)) in
        1) run_taskorch_apptx "$i"; run_river_apptx "$i"; run_before_apptx "$i"; first=taskorch ;;
        2) run_river_apptx "$i"; run_before_apptx "$i"; run_taskorch_apptx "$i"; first=river ;;
        0) run_before_apptx "$i"; run_taskorch_apptx "$i"; run_river_apptx "$i"; first=${before:+before}; first=${first:-taskorch} ;;
      esac
      tf="$out/taskorch-app-tx-$i.json" rf="$out/river-app-tx-$i.json"
      t=$(num enqueue_tx_per_second "$tf") r=$(num enqueue_tx_per_second "$rf")
      [ -n "$t" ] && [ -n "$r" ] || { echo "bench-peers: app-tx round $i: no enqueue_tx_per_second in $out" >&2; exit 1; }
      ratio=$(awk -v t="$t" -v r="$r" 'BEGIN { printf "%.2f", t / r }')
      printf 'round %d (%s first): taskorch %6.0f tx/s (%s of its order rows)   River %6.0f tx/s (%s of its order rows)   ratio %s   load %s -> %s\n' \
        "$i" "$first" "$t" "$(num ratio "$tf")" "$r" "$(num ratio "$rf")" "$ratio" "$l0" "$(load)"
      if [ -n "$before" ]; then
        bf="$out/before-app-tx-$i.json"
        printf '         before (%s): %6.0f tx/s (%s of its order rows)\n' "$before" "$(num enqueue_tx_per_second "$bf")" "$(num ratio "$bf")"
      fi
    fi
    ratios+=("$ratio")
  done
  echo "$w: median ratio (taskorch ÷ River): $(printf '%s\n' "${ratios[@]}" | median) over $rounds rounds"
done
