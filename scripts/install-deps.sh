#!/usr/bin/env bash
# Installs what taskorch's demo and tests need and the machine lacks: PostgreSQL's server and
# client (Debian/Ubuntu apt). As root it installs; otherwise it says what to run.
set -euo pipefail

have_pg() {
  command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

# The S3 tests (internal/s3test, providers) start versitygw, an S3-compatible gateway that checks
# signatures. Installed with go into $(go env GOPATH)/bin when it is on neither PATH nor there.
VERSITYGW_VERSION=v1.8.0
if ! command -v versitygw >/dev/null 2>&1; then
  if ! command -v go >/dev/null 2>&1; then
    echo "taskorch's tests need versitygw: go install github.com/versity/versitygw/cmd/versitygw@${VERSITYGW_VERSION}" >&2
  elif ! [ -x "$(go env GOPATH)/bin/versitygw" ]; then
    echo "installing versitygw ${VERSITYGW_VERSION} (go install)" >&2
    go install "github.com/versity/versitygw/cmd/versitygw@${VERSITYGW_VERSION}"
  fi
fi

# The chaos harness (make chaos, internal/chaos) puts toxiproxy between the workers and
# PostgreSQL. The module names its command "server": installed as toxiproxy-server in
# $(go env GOPATH)/bin when it is on neither PATH nor there.
TOXIPROXY_VERSION=v2.5.0
if ! command -v toxiproxy-server >/dev/null 2>&1; then
  if ! command -v go >/dev/null 2>&1; then
    echo "taskorch's chaos harness needs toxiproxy: go install github.com/Shopify/toxiproxy/v2/cmd/server@${TOXIPROXY_VERSION}, renamed toxiproxy-server" >&2
  elif ! [ -x "$(go env GOPATH)/bin/toxiproxy-server" ]; then
    echo "installing toxiproxy-server ${TOXIPROXY_VERSION} (go install)" >&2
    toxi_tmp=$(mktemp -d)
    mkdir -p "$(go env GOPATH)/bin"
    GOBIN="$toxi_tmp" go install "github.com/Shopify/toxiproxy/v2/cmd/server@${TOXIPROXY_VERSION}"
    mv "$toxi_tmp/server" "$(go env GOPATH)/bin/toxiproxy-server"
    rmdir "$toxi_tmp"
  fi
fi

missing=()
have_pg || missing+=(postgresql)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
# The Redis transport's tests (internal/redistest) start Debian's redis-server on a free port.
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# The chaos harness's network namespace scenario runs `ip netns` and `ip link` (as root).
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# The dashboard's browser tests (dashboard/browser_test.go) drive Debian's headless chromium.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "taskorch needs: ${missing[*]}" >&2
  echo "  Debian/Ubuntu: sudo apt-get install -y ${missing[*]}" >&2
  echo "  macOS:         brew install postgresql@15 redis (and Chromium for the dashboard's browser tests)" >&2
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
