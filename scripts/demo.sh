#!/usr/bin/env bash
# The demo behind `make run`: make a small local git repository, mount a
# fresh computerfs workspace, clone the repository into it with the git CLI
# (through the FUSE mount), show that git, find and du work there, then
# unmount and mount again to show that the workspace persisted.
# KEEP=1 leaves the workspace mounted at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/bin/computerfs
demo=${DEMO_DIR:-$(mktemp -d /tmp/computerfs-demo.XXXXXX)}
store=$demo/store ws=$demo/workspace repo=$demo/app.git
mkdir -p "$ws"

git init -q -b main "$demo/src"
(
	cd "$demo/src"
	mkdir -p cmd/app
	printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from the demo app") }\n' >cmd/app/main.go
	printf '# app\n\nA demo project for computerfs.\n' >README.md
	git add -A
	git -c user.name=demo -c user.email=demo@example.com commit -q -m "Initial commit"
)
git clone -q --bare "$demo/src" "$repo"

echo "== mount a new workspace at $ws"
"$bin" mount --background --store "$store" "$ws" >/dev/null
trap '[ "${KEEP:-}" = 1 ] || "$bin" unmount "$ws" 2>/dev/null || true' EXIT

echo "== git clone $repo into the workspace"
git clone -q "$repo" "$ws/app"
printf '# Crash on empty input\n\nSteps: run the app with no arguments.\n' >"$ws/BUG_REPORT.md"
(cd "$ws/app" && git status --short --branch && git log --oneline)
echo "== files"
find "$ws" -path "$ws/app/.git" -prune -o -print | sed "s|^$ws|/workspace|"
du -sh "$ws"

echo "== unmount, mount again: the workspace is still there"
"$bin" unmount "$ws"
"$bin" mount --background --store "$store" "$ws" >/dev/null
(cd "$ws/app" && git status --short --branch)
head -1 "$ws/BUG_REPORT.md"
if [ "${KEEP:-}" = 1 ]; then
	echo "== left mounted at $ws; unmount with: $bin unmount $ws"
fi
