#!/usr/bin/env bash
# bench/run.sh: what `make bench` runs.
#
# Sets up four targets in one work directory on disk,
#   tmpfs       a tmpfs mounted for the run
#   disk        a plain directory on disk (the baseline)
#   loopback    go-fuse's loopback example, over a second directory on disk
#   floor       go-fuse's loopback over a second tmpfs, mounted with
#               computerfs's options (./bench/floor): the kernel's FUSE round
#               trips with almost nothing behind them (the computerfs/floor
#               column is what the store and its server add)
#   computerfs  a computerfs mount (skipped, with a message, until
#               ./cmd/computerfs exists)
#   nojournal   a computerfs mount without its journal (--no-journal), to
#               measure what the journal costs (the computerfs/nojournal column)
# runs `computerfs bench` (or ./bench/cmd until the CLI has it) on them,
# prints the Markdown table and writes it to bench/results.md (with --json,
# the JSON to bench/results.json; or to $BENCH_OUT), and tears everything
# down, even on failure or interrupt.
#
# Usage: bench/run.sh [bench flags]    e.g. bench/run.sh --quick --reps 1
# Needs root (mounts, dropping the page cache), Go, gcc and git.
# BENCH_WORKDIR picks the parent of the work directory (default /var/tmp);
# it must not be on tmpfs. BENCH_TARGETS lists the targets to set up
# (default "tmpfs disk loopback floor computerfs nojournal"; disk is the
# baseline).
# BENCH_HALT_POLL_NS, on a virtual machine whose idle CPUs use the haltpoll
# cpuidle driver, sets its guest_halt_poll_ns for the run and puts the old
# value back after: how long an idle CPU polls before it halts. A FUSE round
# trip wakes a thread on each side; where the CPU it waits on has halted,
# the wake-up goes through the hypervisor (see docs/performance.md).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BIN=$ROOT/bin
OUT=${BENCH_OUT:-$ROOT/bench/results.md}
WANT=" ${BENCH_TARGETS:-tmpfs disk loopback floor computerfs nojournal} "
want() { [[ $WANT == *" $1 "* ]]; }
for arg in "$@"; do
	case $arg in --json | -json) OUT=${BENCH_OUT:-$ROOT/bench/results.json} ;; esac
done

log() { printf 'run.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root (it mounts tmpfs and FUSE and drops the page cache)"

# is_mounted DIR: whether DIR is a mount point now.
is_mounted() { awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }

# wait_mounted DIR [PID]: wait up to 20 s for DIR to become a mount point
# that answers stat, while PID (if given) is alive.
wait_mounted() {
	local dir=$1 pid=${2:-} i
	for ((i = 0; i < 200; i++)); do
		if is_mounted "$dir" && stat "$dir" >/dev/null 2>&1; then
			return 0
		fi
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		sleep 0.1
	done
	return 1
}

# A work directory on disk, not on tmpfs.
WORK=
for parent in "${BENCH_WORKDIR:-}" /var/tmp "$ROOT/.cache"; do
	[ -n "$parent" ] || continue
	mkdir -p "$parent" 2>/dev/null || continue
	case $(stat -f -c %T "$parent") in
	tmpfs | ramfs)
		log "$parent is on $(stat -f -c %T "$parent"), not disk; trying elsewhere"
		continue
		;;
	esac
	WORK=$(mktemp -d "$parent/computerfs-bench.XXXXXX")
	break
done
[ -n "$WORK" ] || die "found no directory on disk for the work directory (set BENCH_WORKDIR)"

LB_PID=
FLOOR_PID=
CFS_MOUNTED=
NJ_MOUNTED=
RUN_PID=
HALT_POLL=/sys/module/haltpoll/parameters/guest_halt_poll_ns
OLD_HALT_POLL=
cleanup() {
	local status=$?
	set +e
	if [ -n "$OLD_HALT_POLL" ]; then
		echo "$OLD_HALT_POLL" >"$HALT_POLL" && log "guest_halt_poll_ns back to $OLD_HALT_POLL"
	fi
	if [ -n "$RUN_PID" ] && kill -0 "$RUN_PID" 2>/dev/null; then
		kill -TERM "$RUN_PID" # it stops and removes its files
		wait "$RUN_PID" 2>/dev/null
	fi
	if [ -n "$CFS_MOUNTED" ] && is_mounted "$WORK/computerfs"; then
		"$BIN/computerfs" unmount "$WORK/computerfs" || fusermount -u -z "$WORK/computerfs"
	fi
	if [ -n "$NJ_MOUNTED" ] && is_mounted "$WORK/nojournal"; then
		"$BIN/computerfs" unmount "$WORK/nojournal" || fusermount -u -z "$WORK/nojournal"
	fi
	if [ -n "$LB_PID" ]; then
		kill -TERM "$LB_PID" 2>/dev/null
		wait "$LB_PID" 2>/dev/null
	fi
	if is_mounted "$WORK/loopback"; then
		fusermount -u "$WORK/loopback" || umount -l "$WORK/loopback"
	fi
	if [ -n "$FLOOR_PID" ]; then
		kill -TERM "$FLOOR_PID" 2>/dev/null
		wait "$FLOOR_PID" 2>/dev/null
	fi
	if is_mounted "$WORK/floor"; then
		umount "$WORK/floor" || umount -l "$WORK/floor"
	fi
	for t in tmpfs floor.orig; do
		if is_mounted "$WORK/$t"; then
			umount "$WORK/$t" || umount -l "$WORK/$t"
		fi
	done
	if grep -qF " $WORK/" /proc/self/mountinfo; then
		log "something is still mounted under $WORK; not removing it"
	else
		rm -rf "$WORK"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -n "${BENCH_HALT_POLL_NS:-}" ]; then
	[ -w "$HALT_POLL" ] || die "BENCH_HALT_POLL_NS is set, but there is no $HALT_POLL (no haltpoll cpuidle driver)"
	OLD_HALT_POLL=$(cat "$HALT_POLL")
	echo "$BENCH_HALT_POLL_NS" >"$HALT_POLL"
	log "guest_halt_poll_ns $OLD_HALT_POLL -> $BENCH_HALT_POLL_NS for this run"
fi
log "work directory $WORK ($(stat -f -c %T "$WORK"))"
mkdir -p "$BIN" "$WORK"/{tmpfs,disk,loopback,loopback.orig,floor,floor.orig,computerfs,computerfs.store,nojournal,nojournal.store}

# Build.
log "building go-fuse's loopback example"
go build -o "$BIN/go-fuse-loopback" github.com/hanwen/go-fuse/v2/example/loopback
if want floor; then
	log "building ./bench/floor"
	go build -o "$BIN/floor" ./bench/floor
fi
HAVE_CFS=
if ! want computerfs; then
	log "BENCH_TARGETS has no computerfs: skipping the computerfs target"
elif compgen -G "cmd/computerfs/*.go" >/dev/null; then
	log "building ./cmd/computerfs"
	go build -o "$BIN/computerfs" ./cmd/computerfs
	HAVE_CFS=1
else
	log "no ./cmd/computerfs yet: skipping the computerfs target"
fi
if [ -n "$HAVE_CFS" ] && "$BIN/computerfs" bench --help 2>/dev/null | grep -q 'NAME=DIR'; then
	RUNNER=("$BIN/computerfs" bench)
else
	log "using ./bench/cmd to run the benchmarks (computerfs bench is not there yet)"
	go build -o "$BIN/computerfs-bench" ./bench/cmd
	RUNNER=("$BIN/computerfs-bench")
fi

# Targets.
TARGETS=()
FLAGS=(--workdir "$WORK")

if want tmpfs; then
	mount -t tmpfs -o size=4g tmpfs "$WORK/tmpfs"
	TARGETS+=("tmpfs=$WORK/tmpfs")
fi
want disk && TARGETS+=("disk=$WORK/disk")

if want loopback; then
	"$BIN/go-fuse-loopback" -q "$WORK/loopback" "$WORK/loopback.orig" >"$WORK/loopback.log" 2>&1 &
	LB_PID=$!
	if ! wait_mounted "$WORK/loopback" "$LB_PID"; then
		cat "$WORK/loopback.log" >&2
		die "the loopback file system did not come up"
	fi
	[ "$(stat -f -c %T "$WORK/loopback")" != "$(stat -f -c %T "$WORK/disk")" ] ||
		die "$WORK/loopback does not look like a FUSE mount"
	TARGETS+=("loopback=$WORK/loopback")
	FLAGS+=(--pid "loopback=$LB_PID")
fi

if want floor; then
	mount -t tmpfs -o size=4g,mode=0755 tmpfs "$WORK/floor.orig"
	"$BIN/floor" "$WORK/floor" "$WORK/floor.orig" >"$WORK/floor.log" 2>&1 &
	FLOOR_PID=$!
	if ! wait_mounted "$WORK/floor" "$FLOOR_PID"; then
		cat "$WORK/floor.log" >&2
		die "the floor file system did not come up"
	fi
	TARGETS+=("floor=$WORK/floor")
	FLAGS+=(--pid "floor=$FLOOR_PID")
fi

if [ -n "$HAVE_CFS" ]; then
	# With --background, mount returns once the mount answers and prints the
	# daemon's pid.
	if out=$("$BIN/computerfs" mount --background --store "$WORK/computerfs.store" "$WORK/computerfs") &&
		CFS_MOUNTED=1 && wait_mounted "$WORK/computerfs"; then
		TARGETS+=("computerfs=$WORK/computerfs")
		want loopback && FLAGS+=(--ratio computerfs/loopback)
		want floor && FLAGS+=(--ratio computerfs/floor)
		pid=$(printf '%s\n' "$out" | tail -n 1)
		if ! [[ $pid =~ ^[0-9]+$ ]]; then
			pid=$(cat "$WORK/computerfs.store/daemon.pid" 2>/dev/null || true)
		fi
		if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
			FLAGS+=(--pid "computerfs=$pid")
		else
			log "computerfs mount printed no live pid ($out): no peak RSS for computerfs"
		fi
	else
		log "computerfs mount failed: skipping the computerfs target"
	fi
fi

if [ -n "$HAVE_CFS" ] && want nojournal; then
	if out=$("$BIN/computerfs" mount --background --no-journal --store "$WORK/nojournal.store" "$WORK/nojournal") &&
		NJ_MOUNTED=1 && wait_mounted "$WORK/nojournal"; then
		TARGETS+=("nojournal=$WORK/nojournal")
		want computerfs && FLAGS+=(--ratio computerfs/nojournal)
		pid=$(printf '%s\n' "$out" | tail -n 1)
		[[ $pid =~ ^[0-9]+$ ]] && FLAGS+=(--pid "nojournal=$pid")
	else
		log "computerfs mount --no-journal failed: skipping the nojournal target"
	fi
fi

# Run.
log "running: ${RUNNER[*]} ${FLAGS[*]} $* ${TARGETS[*]}"
# In the background, so that a signal to this script is handled at once.
"${RUNNER[@]}" "${FLAGS[@]}" "$@" "${TARGETS[@]}" >"$WORK/results.md" &
RUN_PID=$!
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
if [ -s "$WORK/results.md" ]; then
	cat "$WORK/results.md"
	cp "$WORK/results.md" "$OUT"
	log "wrote $OUT"
fi
[ "$rc" -eq 0 ] || log "the benchmarks failed (exit status $rc)"
exit "$rc"
