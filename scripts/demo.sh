#!/usr/bin/env bash
# The demo behind `make run`: make a small local git repository and a
# workspace spec that declares it (plus an inline bug report and a local
# notes directory), mount a new workspace from that spec (the import
# writes into the store directly, not through the mount), show that git,
# find and du work on the mount, bring an upstream commit in with
# `computerfs refresh`, run a command on the shell fast path and show the
# journal, then unmount and mount again to show that the workspace
# persisted. KEEP=1 leaves the workspace mounted at the end; otherwise
# the demo's temporary directory is removed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/bin/computerfs
demo=${DEMO_DIR:-$(mktemp -d /tmp/computerfs-demo.XXXXXX)}
store=$demo/store ws=$demo/workspace repo=$demo/app.git
mkdir -p "$ws" "$demo/notes"
gitc() { git -c user.name=demo -c user.email=demo@example.com "$@"; }

git init -q -b main "$demo/src"
(
	cd "$demo/src"
	mkdir -p cmd/app
	printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from the demo app") }\n' >cmd/app/main.go
	printf '# app\n\nA demo project for computerfs.\n' >README.md
	printf 'module example.com/app\n\ngo 1.21\n' >go.mod
	git add -A
	gitc commit -q -m "Initial commit"
)
git clone -q --bare "$demo/src" "$repo"
printf 'Start with BUG_REPORT.md.\n' >"$demo/notes/README.md"

cat >"$demo/workspace.yaml" <<EOF
# The demo workspace: a repository, a bug report and notes.
sources:
  - path: /app
    git: {url: "file://$repo", ref: main}
  - path: /notes
    dir: ./notes
  - path: /BUG_REPORT.md
    content: |
      # Crash on empty input
      Steps: run the app with no arguments.
EOF

echo "== mount a new workspace at $ws from $demo/workspace.yaml"
"$bin" mount --background --spec "$demo/workspace.yaml" --store "$store" "$ws" >/dev/null
# At the end: unmount, and remove the demo's directory unless it was
# named (DEMO_DIR) or is to stay mounted (KEEP=1).
cleanup() {
	[ "${KEEP:-}" = 1 ] && return
	"$bin" unmount "$ws" 2>/dev/null || true
	[ -n "${DEMO_DIR:-}" ] || rm -rf "$demo"
}
trap cleanup EXIT
"$bin" status -w "$ws"
# git on the workspace runs as its agent, through computerfs exec (the
# files are the agent's: root's git refuses them as of dubious ownership,
# and must not run an agent's .git/config; see docs/security.md)
"$bin" exec -w "$ws" -- 'cd app && git status --short --branch && git log --oneline'

echo "== files"
find "$ws" -path "$ws/app/.git" -prune -o -print | sed "s|^$ws|/workspace|"
du -sh "$ws"

echo "== an upstream commit, brought in with computerfs refresh"
(
	cd "$demo/src"
	printf '\nRun it with: go run ./cmd/app\n' >>README.md
	gitc commit -q -am "Document how to run the app"
	git push -q "$repo" main
)
"$bin" refresh -w "$ws"
"$bin" exec -w "$ws" -- 'cd app && git log --oneline -1 && tail -1 README.md'

echo "== a command on the shell fast path (in the daemon, on the store), and the journal"
"$bin" exec -w "$ws" -- 'grep -rn hello app/cmd && echo "fixed" >> BUG_REPORT.md'
"$bin" log -w "$ws" | tail -3

echo "== a native program: auto routes it to the sandbox (-v says so)"
"$bin" exec -v -w "$ws" -- 'gcc --version | head -1'

echo "== unmount, mount again: the workspace is still there (no second import)"
"$bin" unmount "$ws"
"$bin" mount --background --spec "$demo/workspace.yaml" --store "$store" "$ws" >/dev/null
"$bin" exec -w "$ws" -- 'cd app && git status --short --branch'
head -1 "$ws/BUG_REPORT.md"
if [ "${KEEP:-}" = 1 ]; then
	echo "== left mounted at $ws; unmount with: $bin unmount $ws"
fi
