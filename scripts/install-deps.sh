#!/usr/bin/env bash
# Checks, and as root on Debian/Ubuntu installs, what taskorch needs, at one of three levels:
#
#   scripts/install-deps.sh go     Go, as new as go.mod's `go` line
#   scripts/install-deps.sh demo   that, and PostgreSQL's server and client (make demo, make build)
#   scripts/install-deps.sh test   that, and what only the tests use (the default): redis-server,
#                                  chromium, pgbouncer, iproute2, postfix, prometheus (apt: its
#                                  promtool), nodejs and npm (the HTTP API's checks), versitygw and
#                                  toxiproxy-server (go install)
#
# As root with apt it installs what is missing; otherwise it names what is missing and the command
# that installs it, and exits 1. GO names the go command (default: go), as in the Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."

level=${1:-test}
case $level in
go | demo | test) ;;
*)
  echo "usage: $0 [go|demo|test]" >&2
  exit 2
  ;;
esac
GO=${GO:-go}

# need_go exits with one line saying which Go is needed and where to get it, when there is no go
# or it is older than go.mod's `go` line.
need_go() {
  local want gobin have running hint=""
  want=$(sed -n 's/^go \([0-9][0-9.a-z]*\).*/\1/p' go.mod)
  if ! gobin=$(command -v "$GO" 2>/dev/null); then
    if [ -x /usr/local/go/bin/go ]; then
      hint=" (/usr/local/go/bin/go exists: add /usr/local/go/bin to PATH)"
    fi
    echo "taskorch needs Go $want or newer and there is no \`$GO\` on PATH$hint: get it at https://go.dev/dl/" >&2
    exit 1
  fi
  # Run here, in the module, so that a go allowed to switch toolchains (GOTOOLCHAIN) reports the
  # one it would use for go.mod.
  have=$("$GO" env GOVERSION 2>/dev/null || true)
  have=${have#go}
  case $have in
  devel*) return 0 ;;
  "") ;;
  *) if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" = "$want" ]; then return 0; fi ;;
  esac
  running=$(cd / && GOTOOLCHAIN=local "$GO" version 2>/dev/null | awk '{print $3}' || true)
  echo "taskorch needs Go $want or newer (go.mod) and $gobin is ${running:-an older one}: get a newer one at https://go.dev/dl/" >&2
  exit 1
}

have_pg() {
  command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

# gobin_has NAME: NAME is on PATH or in $(go env GOPATH)/bin, where the tests also look.
gobin_has() {
  command -v "$1" >/dev/null 2>&1 || [ -x "$("$GO" env GOPATH | cut -d: -f1)/bin/$1" ]
}

need_go
[ "$level" = go ] && exit 0

missing=() # apt packages
have_pg || missing+=(postgresql)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)

if [ "$level" = test ]; then
  # The S3 tests (internal/testing/s3test, providers) start versitygw, an S3-compatible gateway that checks
  # signatures. go install puts it in $(go env GOPATH)/bin, root or not.
  VERSITYGW_VERSION=v1.8.0
  if ! gobin_has versitygw; then
    echo "installing versitygw ${VERSITYGW_VERSION} (go install)" >&2
    "$GO" install "github.com/versity/versitygw/cmd/versitygw@${VERSITYGW_VERSION}"
  fi

  # The chaos harness (make chaos, cmd/taskorch/internal/chaos) puts toxiproxy between the workers and
  # PostgreSQL. The module names its command "server": installed as toxiproxy-server in
  # $(go env GOPATH)/bin.
  TOXIPROXY_VERSION=v2.5.0
  if ! gobin_has toxiproxy-server; then
    echo "installing toxiproxy-server ${TOXIPROXY_VERSION} (go install)" >&2
    gobin="$("$GO" env GOPATH | cut -d: -f1)/bin"
    toxi_tmp=$(mktemp -d)
    mkdir -p "$gobin"
    GOBIN="$toxi_tmp" "$GO" install "github.com/Shopify/toxiproxy/v2/cmd/server@${TOXIPROXY_VERSION}"
    mv "$toxi_tmp/server" "$gobin/toxiproxy-server"
    rmdir "$toxi_tmp"
  fi

  # The Redis transport's tests (internal/testing/redistest) start Debian's redis-server on a free port.
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  # The chaos harness's network namespace scenario runs `ip netns` and `ip link` (as root).
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  # The dashboard's browser tests (dashboard/browser_test.go) drive Debian's headless chromium.
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  # The pooler tests (internal/testing/pgbouncertest) put Debian's PgBouncer in front of PostgreSQL.
  command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
  # The mail tests (internal/testing/mtatest) start Debian's Postfix, configured in a temporary directory
  # (as root: its master daemon runs its services as the postfix user).
  command -v postfix >/dev/null 2>&1 || [ -x /usr/sbin/postfix ] || missing+=(postfix)
  # The alert rules' test (cmd/taskorch TestE2EAlertRules) evaluates docs/alerts.yml with promtool,
  # from Debian's prometheus package (the server it also installs is stopped below).
  command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
  # docs/python.md's test (cmd/taskorch TestE2EDocPython) runs its snippets with Debian's python3 and psycopg2.
  /usr/bin/python3 -c 'import psycopg2' >/dev/null 2>&1 || missing+=(python3-psycopg2)
  # docs/typescript.md's test (TestE2EDocTypeScript) runs its snippets on Node.js.
  # The HTTP API's checks (make api-check; cmd/taskorch TestE2EAPIGeneratedTypeScriptClient) run
  # redocly, openapi-typescript and tsx, pinned in api/package-lock.json, on Node 18.17 or newer.
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if command -v node >/dev/null 2>&1 && ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 18 || (a === 18 && b >= 17) ? 0 : 1)'; then
    echo "the HTTP API's checks need Node 18.17 or newer, and node is $(node --version): install a newer one (https://nodejs.org/en/download)" >&2
    exit 1
  fi
fi

# snippet_packages installs the npm packages of docs/snippets/typescript (TestE2EDocTypeScript) from
# its lock file with npm ci, unless they were installed from that very lock file already.
snippet_packages() {
  local d=docs/snippets/typescript
  [ "$level" = test ] || return 0
  if [ -x "$d/node_modules/.bin/tsx" ] && cmp -s "$d/package-lock.json" "$d/node_modules/.installed-package-lock.json"; then
    return 0
  fi
  echo "installing docs/snippets/typescript's packages (npm ci)" >&2
  (cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$d/package-lock.json" "$d/node_modules/.installed-package-lock.json"
}

if [ ${#missing[@]} -eq 0 ]; then
  snippet_packages
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  if [ "$level" = demo ]; then
    what="taskorch's demo needs PostgreSQL's server and client (15 or newer)"
  else
    what="taskorch's tests need PostgreSQL, redis-server, chromium, pgbouncer, iproute2, postfix, prometheus (promtool), nodejs and npm"
  fi
  echo "$what, and this machine lacks: ${missing[*]}. Install with:" >&2
  if command -v apt-get >/dev/null 2>&1; then
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  else
    brew=()
    for p in "${missing[@]}"; do
      case $p in
      postgresql) brew+=(postgresql@15) ;;
      redis-server) brew+=(redis) ;;
      pgbouncer) brew+=(pgbouncer) ;;
      chromium) brew+=(--cask chromium) ;;
      prometheus) brew+=(prometheus) ;;
      nodejs|npm) brew+=(node) ;;
      esac
    done
    [ ${#brew[@]} -eq 0 ] || echo "  macOS: brew install ${brew[*]}" >&2
    echo "  Debian/Ubuntu: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  fi
  exit 1
fi
echo "installing ${missing[*]} (apt)" >&2
export DEBIAN_FRONTEND=noninteractive
case " ${missing[*]} " in
*" postfix "*)
  # Postfix without a system configuration: no /etc/postfix/main.cf, so no system mail service
  # is set up or started; the tests configure their own servers.
  echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  ;;
esac
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian package starts a cluster of its own on port 5432; taskorch never uses it.
if command -v pg_lsclusters >/dev/null 2>&1; then
  pg_lsclusters --no-header 2>/dev/null | while read -r ver name _; do
    pg_ctlcluster "$ver" "$name" stop 2>/dev/null || true
  done
fi
# The Debian prometheus package enables a server on :9090 (and starts it where services may
# start); the tests run only its promtool.
case " ${missing[*]} " in
*" prometheus "*)
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  elif command -v service >/dev/null 2>&1; then
    service prometheus stop >/dev/null 2>&1 || true
  fi
  ;;
esac
snippet_packages
