#!/usr/bin/env bash
# Installs what taskorch's demo and tests need and the machine lacks: PostgreSQL's server and
# client (Debian/Ubuntu apt). As root it installs; otherwise it says what to run.
set -euo pipefail

have_pg() {
  command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

missing=()
have_pg || missing+=(postgresql)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "taskorch needs: ${missing[*]}" >&2
  echo "  Debian/Ubuntu: sudo apt-get install -y postgresql postgresql-client" >&2
  echo "  macOS:         brew install postgresql@15" >&2
  exit 1
fi
echo "installing ${missing[*]} (apt)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian package starts a cluster of its own on port 5432; taskorch never uses it.
if command -v pg_lsclusters >/dev/null 2>&1; then
  pg_lsclusters --no-header 2>/dev/null | while read -r ver name _; do
    pg_ctlcluster "$ver" "$name" stop 2>/dev/null || true
  done
fi
