#!/usr/bin/env bash
# CI's check of the README's first command: runs `make demo` in the background as a newcomer
# would, waits for the dashboard to answer, checks that the demo's processes reach their terminal
# facts, runs the command it prints under "Try:", sends Ctrl-C (SIGINT), and checks that nothing
# it started is left running.
#
#   scripts/demo-smoke.sh [RUNNER...]
#
# RUNNER, a command prefix, runs make and the printed command (scripts/demo-nonroot.sh runs them
# as another user). The environment may set DEMO_SMOKE_REPO (the checkout; default this one),
# DEMO_SMOKE_FLAGS (make demo's DEMO_FLAGS; default a fresh throwaway --data-dir), DEMO_SMOKE_DATA
# (the data dir those flags give the demo) and DEMO_SMOKE_LIMIT (seconds to a healthy demo).
set -euo pipefail
cd "$(dirname "$0")/.."

limit=${DEMO_SMOKE_LIMIT:-120}   # seconds from `make demo` to a healthy demo
repo=${DEMO_SMOKE_REPO:-$PWD}
work=$(mktemp -d)
chmod 755 "$work"                 # as root, PostgreSQL runs as the postgres user
log="$work/demo.log"
data=${DEMO_SMOKE_DATA:-$work/dev}
flags=${DEMO_SMOKE_FLAGS-"--fresh --data-dir $data"}
start=$(date +%s)

# Its own session and process group, as a terminal would give it, so Ctrl-C reaches it all.
setsid "$@" make -C "$repo" --no-print-directory demo DEMO_FLAGS="$flags" >"$log" 2>&1 &
leader=$!
cleanup() {
  kill -KILL -- "-$leader" 2>/dev/null || true
  pkill -KILL -f "$data" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "demo-smoke: $*" >&2
  echo "----- make demo's output -----" >&2
  cat "$log" >&2
  exit 1
}
elapsed() { echo $(( $(date +%s) - start )); }
waitfor() { # waitfor WHAT COMMAND...: until COMMAND succeeds, within the limit
  local what=$1; shift
  until "$@" >/dev/null 2>&1; do
    kill -0 "$leader" 2>/dev/null || fail "make demo exited before $what"
    [ "$(elapsed)" -lt "$limit" ] || fail "no $what after ${limit}s"
    sleep 0.5
  done
}

waitfor "dashboard URL" grep -qE '^http://127\.0\.0\.1:[0-9]+/$' "$log"
url=$(grep -m1 -E '^http://127\.0\.0\.1:[0-9]+/$' "$log")
waitfor "PostgreSQL URL" grep -qE '^postgres://' "$log"
db=$(grep -m1 -E '^postgres://' "$log")
token=$(grep -A1 '^Sign in with this token' "$log" | tail -1)
waitfor "answer from the dashboard at $url" curl -fsS -H "Authorization: Bearer $token" "$url"
echo "demo-smoke: the dashboard answers at $url after $(elapsed)s"
grep -qxF "starting a private PostgreSQL in $data" "$log" || fail "the demo's data is not in $data"

# The first command under "Try:" works as printed, from the checkout.
waitfor "Try: line" grep -qE "^  DATABASE_URL='[^']*' .* tasks list$" "$log"
try=$(grep -m1 -E "^  DATABASE_URL='[^']*' .* tasks list$" "$log")
try=${try#  }
"$@" sh -c "cd '$repo' && $try" >"$work/try.out" 2>&1 || { cat "$work/try.out" >&2; fail "\`$try\` failed"; }
echo "demo-smoke: \`${try#* }\` works as printed ($(wc -l <"$work/try.out") lines)"

terminal="select
  (select count(*) from comms.send_email_task_succeeded) >= 2
  and (select count(*) from comms.send_email_task_failed) >= 1
  and (select count(*) from comms.send_sms_task_succeeded) >= 2
  and (select count(*) from files.file_deletion_task_succeeded) >= 3
  and (select count(*) from accounts.account_deletion_task_succeeded) >= 1
  and (select count(*) from queues.task where task_type = 'taskorch.fail' and status = 'dead') >= 1"
demo_done() { [ "$(psql "$db" -XAtc "$terminal")" = t ]; }
waitfor "terminal facts for the demo's processes" demo_done
echo "demo-smoke: the demo's processes reached their terminal facts after $(elapsed)s"
psql "$db" -XAtc "select count(*) || ' outbox deliveries' from queues.outbox_message"

kill -INT -- "-$leader"
for _ in $(seq 1 60); do
  kill -0 "$leader" 2>/dev/null || break
  sleep 0.5
done
kill -0 "$leader" 2>/dev/null && fail "still running 30s after Ctrl-C"
if pgrep -g "$leader" >/dev/null || pgrep -f "$work/dev" >/dev/null; then
  ps -o pid,pgid,cmd -g "$leader" >&2 || true
  pgrep -af "$work/dev" >&2 || true
  fail "processes left running after Ctrl-C"
fi
if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then
  fail "the dashboard still answers after Ctrl-C"
fi
grep -q 'stopping PostgreSQL' "$log" || fail "the private PostgreSQL was not stopped"
echo "demo-smoke: Ctrl-C stopped everything it started ($(elapsed)s in all)"
