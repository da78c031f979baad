#!/usr/bin/env bash
# Makes the README's picture of the dashboard (docs/images/dashboard.png) from the demo: runs
# `taskorch dev --fresh` in a throwaway data dir, waits until the demo's processes have reached
# their terminal facts, takes the overview with headless Chromium (dashboard/browser/screenshot),
# then places an order of docs/workflows.md's worked example whose stock reservation fails for
# good, waits until the demo's worker has run it, takes its workflow's graph
# (docs/images/workflow-graph.png), and stops the demo with Ctrl-C (SIGINT). `make screenshots`
# runs it; docs/dashboard.md says more.
#
#   scripts/demo-screenshot.sh [OUT.png [WORKFLOW_OUT.png]]
#       (default docs/images/dashboard.png docs/images/workflow-graph.png)
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-docs/images/dashboard.png}
wfout=${2:-docs/images/workflow-graph.png}
limit=${DEMO_SCREENSHOT_LIMIT:-180}   # seconds from start to a settled demo
work=$(mktemp -d)
chmod 755 "$work"                      # as root, PostgreSQL runs as the postgres user
log="$work/demo.log"
token=$(head -c 24 /dev/urandom | base64 | tr -d '/+=' | head -c 32)
start=$(date +%s)

go build -o bin/taskorch ./cmd/taskorch
go build -o "$work/screenshot" ./dashboard/browser/screenshot

# Its own session and process group, so that Ctrl-C reaches everything it starts.
setsid bin/taskorch dev --fresh --data-dir "$work/dev" --token "$token" >"$log" 2>&1 &
leader=$!
cleanup() {
  kill -KILL -- "-$leader" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "demo-screenshot: $*" >&2
  echo "----- taskorch dev's output -----" >&2
  cat "$log" >&2
  exit 1
}
elapsed() { echo $(( $(date +%s) - start )); }
waitfor() { # waitfor WHAT COMMAND...: until COMMAND succeeds, within the limit
  local what=$1; shift
  until "$@" >/dev/null 2>&1; do
    kill -0 "$leader" 2>/dev/null || fail "taskorch dev exited before $what"
    [ "$(elapsed)" -lt "$limit" ] || fail "no $what after ${limit}s"
    sleep 0.5
  done
}

waitfor "dashboard URL" grep -qE '^http://127\.0\.0\.1:[0-9]+/$' "$log"
url=$(grep -m1 -E '^http://127\.0\.0\.1:[0-9]+/$' "$log")
waitfor "PostgreSQL URL" grep -qE '^postgres://' "$log"
db=$(grep -m1 -E '^postgres://' "$log")

# The demo settled: its processes at their terminal facts (as scripts/demo-smoke.sh checks), the
# email scheduled 30 seconds in sent too, and nothing running or due within 5 seconds.
settled="select
  (select count(*) from comms.send_email_task_succeeded) >= 3
  and (select count(*) from comms.send_email_task_failed) >= 1
  and (select count(*) from comms.send_sms_task_succeeded) >= 2
  and (select count(*) from files.file_deletion_task_succeeded) >= 3
  and (select count(*) from accounts.account_deletion_task_succeeded) >= 1
  and (select count(*) from queues.task where task_type = 'taskorch.fail' and status = 'dead') >= 1
  and not exists (select from queues.task where status = 'running' or (status = 'pending' and run_at <= now() + interval '5 seconds'))"
demo_settled() { [ "$(psql "$db" -XAtc "$settled")" = t ]; }
waitfor "settled demo" demo_settled
echo "demo-screenshot: the demo settled after $(elapsed)s"

# The 15-minute window, the shortest. Taken again (up to 5 times) when a task came due or ran
# meanwhile, so that the picture shows the settled demo.
for try in 1 2 3 4 5; do
  "$work/screenshot" -url "$url" -token "$token" -path '/?window=15m' -wait '.charts svg' -out "$out"
  demo_settled && break
  echo "demo-screenshot: a task came due while the page was taken (try $try); again"
  waitfor "settled demo" demo_settled
done

# A workflow: docs/workflows.md's order (charge, then reserve and receipt, then ship), run by the
# demo's worker as db_function tasks (a function per step, each calling the example's
# shop.order_step), whose reservation fails for good (one attempt): charge and receipt complete,
# reserve is dead, ship is cancelled by the cascade.
wf=$(psql "$db" -XAtq -v ON_ERROR_STOP=1 <<'SQL'
create schema shop;
create table shop.order_log (
    n bigint generated always as identity primary key,
    order_id bigint not null,
    step text not null,
    unique (order_id, step)
);
create function shop.order_step(_payload jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _payload->>'step' = 'reserve' and (_payload->>'out_of_stock')::boolean then
        raise exception 'warehouse: item % is out of stock', _payload->>'item';
    end if;
    insert into shop.order_log (order_id, step) values ((_payload->>'order')::bigint, _payload->>'step');
    return '{"status": "succeeded"}'::jsonb;
end $$;
revoke all on function shop.order_step(jsonb) from public;
-- One function per step, so that the graph's nodes say which step they are.
do $$
declare _step text;
begin
    foreach _step in array array['charge', 'reserve', 'receipt', 'ship'] loop
        execute format('create function shop.%I(_payload jsonb) returns jsonb language sql security definer
            set search_path = pg_catalog, pg_temp as $f$ select shop.order_step(_payload || %L) $f$',
            _step, jsonb_build_object('step', _step));
        execute format('revoke all on function shop.%I(jsonb) from public', _step);
        execute format('grant execute on function shop.%I(jsonb) to worker_service_user', _step);
    end loop;
end $$;
grant usage on schema shop to worker_service_user;
with charge as (
    select queues.enqueue('db_function', '{"db_function": "shop.charge", "order": 7}') as id),
reserve as (
    select queues.enqueue('db_function', '{"db_function": "shop.reserve", "order": 7, "item": "SKU-42", "out_of_stock": true}',
        _max_attempts => 1, _after => array[charge.id]) as id from charge),
receipt as (
    select queues.enqueue('db_function', '{"db_function": "shop.receipt", "order": 7}',
        _after => array[charge.id]) as id from charge)
select queues.enqueue('db_function', '{"db_function": "shop.ship", "order": 7}',
        _after => array[reserve.id, receipt.id]), charge.id
from charge, reserve, receipt;
SQL
)
ship=${wf%%|*}
root=${wf##*|}
[ -n "$root" ] && [ -n "$ship" ] || fail "could not place the workflow's order: $wf"
wf_settled() { [ "$(psql "$db" -XAtc "select status = 'cancelled' from queues.task where task_id = $ship")" = t ] &&
  [ "$(psql "$db" -XAtc "select count(*) = 0 from queues.task where workflow_id = $root and status not in ('completed', 'dead', 'cancelled')")" = t ]; }
waitfor "settled workflow $root" wf_settled
"$work/screenshot" -url "$url" -token "$token" -path "/workflows/$root" -wait '#wf-graph' -width 1100 -height 600 -out "$wfout"

kill -INT -- "-$leader"
for _ in $(seq 1 60); do
  kill -0 "$leader" 2>/dev/null || break
  sleep 0.5
done
kill -0 "$leader" 2>/dev/null && fail "still running 30s after Ctrl-C"
echo "demo-screenshot: wrote $out and $wfout ($(elapsed)s in all)"
