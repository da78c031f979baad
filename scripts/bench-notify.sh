#!/usr/bin/env bash
# Concurrent single enqueues against queues.notify_coalesce_ms(): pgbench, 16 clients, each
# transaction one queues.enqueue, with the setting at 0 (the default), at 10, and with the
# NOTIFY trigger disabled, alternating, ROUNDS times. docs/benchmarks.md, "Where the time goes:
# latency", quotes its output.
#
#   go run ./internal/cmd/withpg -durable -- sh -c \
#     'DATABASE_URL=$TASKORCH_TEST_DATABASE_URL bash scripts/bench-notify.sh'
#
# It migrates DATABASE_URL, writes tasks of type bench.notify, and deletes them after each run,
# and leaves queues.settings.notify_coalesce_ms at 0 and the trigger enabled, also when
# interrupted.
set -euo pipefail
: "${DATABASE_URL:?set DATABASE_URL to a database this may migrate and write to}"
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
PGBENCH=$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -1)
[ -x "$PGBENCH" ] || { echo "bench-notify: pgbench not found" >&2; exit 1; }
cd "$(dirname "$0")/.."

go run ./cmd/taskorch migrate up --database-url "$DATABASE_URL" >/dev/null
script=$(mktemp)
trap 'rm -f "$script"; set_window 0; psql -qX "$DATABASE_URL" -c "alter table queues.task enable trigger task_inserted_notify" >/dev/null' EXIT
echo "select queues.enqueue('bench.notify', '{}');" >"$script"

set_window() {
	psql -qX -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "update queues.settings set notify_coalesce_ms = $1" >/dev/null
}
run() {
	local tps lat
	out=$("$PGBENCH" -n -f "$script" -c 16 -j 2 -T "$SECONDS_PER_RUN" "$DATABASE_URL" 2>&1)
	tps=$(awk '/^tps/ {printf "%.0f", $3}' <<<"$out")
	lat=$(awk '/latency average/ {print $4}' <<<"$out")
	printf '%-40s %8s enqueues/s   latency average %s ms\n' "$1" "$tps" "$lat"
	psql -qX "$DATABASE_URL" -c "delete from queues.task where task_type = 'bench.notify'" >/dev/null
}
for _ in $(seq "$ROUNDS"); do
	set_window 0
	run "notify_coalesce_ms() = 0 (default)"
	set_window 10
	run "notify_coalesce_ms() = 10"
	set_window 0
	psql -qX "$DATABASE_URL" -c "alter table queues.task disable trigger task_inserted_notify" >/dev/null
	run "trigger disabled (no wake-ups)"
	psql -qX "$DATABASE_URL" -c "alter table queues.task enable trigger task_inserted_notify" >/dev/null
done
