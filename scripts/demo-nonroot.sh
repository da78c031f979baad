#!/usr/bin/env bash
# CI's check that a newcomer needs only Go and PostgreSQL for `make demo`: as root, it makes an
# unprivileged user (taskorch-newcomer) with its own copy of this checkout, and runs
# scripts/demo-smoke.sh as that user in an emptied environment whose PATH holds Go and a copy of
# /usr/bin without the tools only the tests use (redis-server, chromium, versitygw, toxiproxy, ip),
# and without $(go env GOPATH)/bin. The demo must come up, answer, run its printed command and stop
# at Ctrl-C, without those tools and without installing any.
set -euo pipefail
cd "$(dirname "$0")/.."

user=${DEMO_NONROOT_USER:-taskorch-newcomer}
test_tools=(redis-server chromium versitygw toxiproxy-server ip)

if [ "$(id -u)" -ne 0 ]; then
  echo "demo-nonroot: run as root (it creates the user $user and runs the demo as it)" >&2
  exit 1
fi
start=$(date +%s)
if ! id "$user" >/dev/null 2>&1; then
  useradd -m -U -s /bin/sh "$user"
fi
home=$(getent passwd "$user" | cut -d: -f6)
repo="$home/taskorch"
data="$home/.local/share/taskorch/dev" # taskorch dev's default for a user without XDG_DATA_HOME

# The user's copy of this checkout, as it is (tracked and untracked files, not the ignored ones);
# its Go caches in $home stay from one run to the next.
rm -rf "$repo" "$home/.local/share/taskorch"
mkdir -p "$repo"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read --warning=no-failed-read -T - -cf - | tar -C "$repo" -xf -
else
  tar --exclude=./.git --exclude=./bin -cf - . | tar -C "$repo" -xf -
fi
chown -R "$user:" "$repo"

# PATH: Go's directory, and a directory of links to everything in /usr/bin but the test tools.
sysbin=$(mktemp -d /tmp/demo-nonroot-bin.XXXXXX)
trap 'rm -rf "$sysbin"' EXIT
for f in /usr/bin/* /bin/*; do
  name=${f##*/}
  case " ${test_tools[*]} " in *" $name "*) continue ;; esac
  case $name in redis-* | chromium* | toxiproxy*) continue ;; esac
  [ -e "$sysbin/$name" ] || ln -s "$f" "$sysbin/$name"
done
chmod 755 "$sysbin"
gobin=$(dirname "$(command -v go)")
path=$sysbin
case $gobin in /usr/bin | /bin) ;; *) path="$gobin:$sysbin" ;; esac

# An emptied environment, with root's Go proxy settings and any network proxy passed through.
env=(HOME="$home" USER="$user" LOGNAME="$user" PATH="$path" LANG=C.UTF-8)
for v in GOPROXY GOSUMDB GONOSUMDB GONOPROXY GOPRIVATE GOINSECURE GOFLAGS GOTOOLCHAIN; do
  val=$(go env "$v")
  [ -z "$val" ] || env+=("$v=$val")
done
for v in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy SSL_CERT_FILE SSL_CERT_DIR; do
  [ -z "${!v:-}" ] || env+=("$v=${!v}")
done
runner=(setpriv --reuid="$user" --regid="$user" --init-groups env -i "${env[@]}")

echo "demo-nonroot: as $user (uid $(id -u "$user")), PATH=$path"
found=$("${runner[@]}" sh -c 'for t in "$@"; do command -v "$t"; done; ls "$(go env GOPATH)/bin" 2>/dev/null; true' sh "${test_tools[@]}")
if [ -n "$found" ]; then
  echo "demo-nonroot: the test tools are within the user's reach:" >&2
  echo "$found" >&2
  exit 1
fi
echo "demo-nonroot: none of ${test_tools[*]} is on that PATH or in the user's GOPATH/bin"

# A cold build of the module by the new user takes most of the time: allow for it.
DEMO_SMOKE_REPO=$repo DEMO_SMOKE_DATA=$data DEMO_SMOKE_FLAGS='' \
  DEMO_SMOKE_LIMIT=${DEMO_NONROOT_LIMIT:-480} scripts/demo-smoke.sh "${runner[@]}"

installed=$("${runner[@]}" sh -c 'ls "$(go env GOPATH)/bin" 2>/dev/null; true')
if [ -n "$installed" ]; then
  echo "demo-nonroot: make demo installed into the user's GOPATH/bin: $installed" >&2
  exit 1
fi
rm -rf "$home/.local/share/taskorch"
echo "demo-nonroot: make demo works for $user with Go and PostgreSQL only ($(($(date +%s) - start))s)"
