#!/usr/bin/env bash
# Checks what `make release` put in dist/ (CI runs it after make release): the amd64 binary runs
# and prints the version, the arm64 binary is a static aarch64 ELF that prints the same version
# under qemu, and SHA256SUMS matches. Needs coreutils (od, sha256sum), git, go and
# qemu-user-static.
set -euo pipefail
cd "$(dirname "$0")/.."

want=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
fail() { echo "check-release: $*" >&2; exit 1; }

# The binary for this machine runs and says which version, commit and Go it is.
line=$(dist/taskorch-linux-amd64 version)
echo "$line"
case "$line" in
"taskorch $want (commit $(git rev-parse --short=7 HEAD), "*") go1."*" linux/amd64") ;;
*) fail "dist/taskorch-linux-amd64 version printed \"$line\", want \"taskorch $want (commit $(git rev-parse --short=7 HEAD), ...) go1.... linux/amd64\"" ;;
esac
[ "$(dist/taskorch-linux-amd64 --version)" = "$line" ] || fail "taskorch --version differs from taskorch version"

# ELF header: the magic, then e_machine (2 bytes at offset 18, little-endian): 62 x86-64, 183 aarch64.
elf_machine() {
	[ "$(od -An -c -N4 "$1" | tr -d ' ')" = '177ELF' ] || fail "$1 is not an ELF file"
	od -An -tu2 -j18 -N2 "$1" | tr -d ' '
}
[ "$(elf_machine dist/taskorch-linux-amd64)" = 62 ] || fail "dist/taskorch-linux-amd64 is not an x86-64 binary"
[ "$(elf_machine dist/taskorch-linux-arm64)" = 183 ] || fail "dist/taskorch-linux-arm64 is not an aarch64 binary"
for b in dist/taskorch-linux-amd64 dist/taskorch-linux-arm64; do
	go version -m "$b" | grep -qx $'\tbuild\tCGO_ENABLED=0' || fail "$b was not built with CGO_ENABLED=0"
done

# The arm64 binary runs too, under qemu's user-mode emulation (qemu-user-static: installed here
# as root with apt; the tests do not need it).
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
if [ -z "$qemu" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "check-release: installing qemu-user-static (apt) to run the arm64 binary" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static >/dev/null; }
	qemu=$(command -v qemu-aarch64-static || true)
fi
[ -n "$qemu" ] || fail "cannot run the arm64 binary: qemu-aarch64-static is not installed (apt package qemu-user-static)"
arm_line=$("$qemu" dist/taskorch-linux-arm64 version)
echo "$arm_line"
[ "$arm_line" = "${line% linux/amd64} linux/arm64" ] || fail "dist/taskorch-linux-arm64 version printed \"$arm_line\", want the amd64 line with linux/arm64"

(cd dist && sha256sum -c SHA256SUMS)
[ "$(wc -l <dist/SHA256SUMS)" -eq 2 ] || fail "SHA256SUMS should list the 2 binaries"
echo "check-release: dist/ is good ($want)"
