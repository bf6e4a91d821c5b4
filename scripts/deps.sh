#!/usr/bin/env bash
# scripts/deps.sh: install the Debian packages of scripts/packages.txt that
# the machine lacks (what make build, make test and .ci/run need).
#   scripts/deps.sh          install what is missing (as root, with apt-get)
#   scripts/deps.sh --check  only say what is missing; exit 1 if anything is
# Prints nothing when everything is there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# PACKAGE [COMMAND] per line: the package, or the command that stands for it
pkgs=() cmds=()
while read -r p c _; do
	pkgs+=("$p") cmds+=("${c:-}")
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/packages.txt")

if ! command -v dpkg-query >/dev/null; then
	# Not Debian: say what the build needs, and go on if it is there.
	if pkg-config --exists libseccomp 2>/dev/null && command -v fusermount3 >/dev/null; then
		exit 0
	fi
	echo "computerfs: this is not a Debian system; install the equivalents of: ${pkgs[*]}" >&2
	exit 1
fi
missing=()
for i in "${!pkgs[@]}"; do
	p=${pkgs[$i]} c=${cmds[$i]}
	[ -n "$c" ] && command -v "$c" >/dev/null && continue
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	[[ $status == ii* ]] || missing+=("$p")
done

# The TypeScript MCP SDK, at the version package-lock.json pins.
npm_sdk() {
	local dir=$here/../internal/mcpts
	[ -d "$dir/node_modules/@modelcontextprotocol/sdk" ] && return 0
	if [ "${1:-}" = --check ]; then
		echo "computerfs: the TypeScript MCP SDK is not installed (run: npm ci --prefix internal/mcpts)" >&2
		return 1
	fi
	echo "computerfs: installing the TypeScript MCP SDK for the tests (npm ci in internal/mcpts)" >&2
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
		{ echo "computerfs: npm ci in internal/mcpts failed" >&2; return 1; }
}
if [ ${#missing[@]} -eq 0 ]; then
	npm_sdk "${1:-}"
	exit
fi

if [ "${1:-}" = --check ]; then
	echo "computerfs: missing packages: ${missing[*]} (install them with: apt-get install -y ${missing[*]})" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "computerfs: missing packages: ${missing[*]}; run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "computerfs: installing ${missing[*]} (apt-get; the build and the tests need them)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
	echo "computerfs: apt-get could not install ${missing[*]}; install them and run make again" >&2
	exit 1
fi
npm_sdk
