#!/usr/bin/env bash
# Makes the README's picture of the dashboard (docs/images/dashboard.png) from the demo: runs
# `taskorch dev --fresh` in a throwaway data dir, waits until the demo's processes have reached
# their terminal facts, takes the overview with headless Chromium (dashboard/browser/screenshot), and
# stops the demo with Ctrl-C (SIGINT). `make screenshots` runs it; docs/dashboard.md says more.
#
#   scripts/demo-screenshot.sh [OUT.png]    (default docs/images/dashboard.png)
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-docs/images/dashboard.png}
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

kill -INT -- "-$leader"
for _ in $(seq 1 60); do
  kill -0 "$leader" 2>/dev/null || break
  sleep 0.5
done
kill -0 "$leader" 2>/dev/null && fail "still running 30s after Ctrl-C"
echo "demo-screenshot: wrote $out ($(elapsed)s in all)"
