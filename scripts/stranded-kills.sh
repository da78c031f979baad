#!/usr/bin/env bash
# How long a SIGKILLed worker's tasks wait: a `taskorch worker` (TASKORCH, default bin/taskorch)
# with the default settings is SIGKILLed while it holds 10 running tasks and another worker runs,
# KILLS times (default 10). For each kill it prints the seconds from the kill until none of the
# killed worker's tasks is running under it any more (polled every 50 ms with psql, so up to
# ~0.1 s late), and how they ended (the event under their lease). docs/benchmarks.md, "Crashed
# workers and the cost of sessions", quotes it for the build before and after core/0040:
#
#   go run ./internal/cmd/withpg -- sh -c 'DATABASE_URL=$TASKORCH_TEST_DATABASE_URL scripts/stranded-kills.sh'
#
# DATABASE_URL must be a database this may migrate and write to; the workers migrate it. The
# steady worker is stopped (SIGSTOP) while each victim claims, so that the victim holds them.
set -euo pipefail
: "${DATABASE_URL:?set DATABASE_URL to a database this may migrate and write to}"
cd "$(dirname "$0")/.."
BIN=${TASKORCH:-bin/taskorch}
KILLS=${KILLS:-10}
LOGS=$(mktemp -d)
export DATABASE_URL TASKORCH_LOG_LEVEL=warn
q() { psql "$DATABASE_URL" -qAtc "$1"; }
until_true() { until [ "$(q "$1")" = t ]; do sleep 0.05; done; }

TASKORCH_WORKER_ID=steady TASKORCH_CONCURRENCY=200 "$BIN" worker >"$LOGS/steady.log" 2>&1 &
steady=$!
trap 'kill -CONT $steady 2>/dev/null; kill -9 $steady 2>/dev/null' EXIT
until_true "select to_regclass('queues.leader') is not null"
until_true "select exists (select from queues.leader where worker_id = 'steady')"
for i in $(seq 1 "$KILLS"); do
  v=victim-$i
  kill -STOP $steady
  TASKORCH_WORKER_ID=$v TASKORCH_CONCURRENCY=10 "$BIN" worker >"$LOGS/$v.log" 2>&1 &
  pid=$!
  until_true "select exists (select from queues.worker where worker_id = '$v')"
  q "select count(queues.enqueue('taskorch.sleep', '{\"ms\": 60000}')) from generate_series(1, 10)" >/dev/null
  until_true "select count(*) = 10 from queues.task where worker_id = '$v' and status = 'running'"
  kill -CONT $steady
  t0=$(date +%s.%N)
  kill -9 $pid
  wait $pid 2>/dev/null || true
  until_true "select count(*) = 0 from queues.task where worker_id = '$v' and status = 'running'"
  t1=$(date +%s.%N)
  how=$(q "select string_agg(distinct e.event || ': ' || regexp_replace(e.detail, '( [(]|: lease).*', ''), '; ')
           from queues.task_event e join queues.task_lease l on l.task_id = e.task_id and l.task_lease_id = e.lease_id
           where l.worker_id = '$v'")
  printf 'kill %2d: %6.2f s  (%s)\n' "$i" "$(echo "$t1 - $t0" | bc)" "$how"
  until_true "select not exists (select from queues.task where status = 'pending')"
done
