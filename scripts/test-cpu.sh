#!/usr/bin/env bash
# What one package's tests cost in CPU, which the load of other work on the
# machine moves far less than their wall time: the packages are compiled
# first (go test -race -c), then run as make test runs them (-race,
# -count=1) against a scratch cluster of their own, and the script prints,
# per package, the wall time, the CPU of the test process and everything it
# started (workers, child processes) and the CPU of the server's backends
# (the postmaster's reaped children, read before the cluster stops). The
# per-test template database is built before the clock starts, as it is
# once per make test. Needs the server binaries (pg_config --bindir); as
# root it runs the server as the postgres user.
#
#	scripts/test-cpu.sh ./lab ./quarantine
#	scripts/test-cpu.sh ./lab -run 'TestLabShowsEveryAnomaly'
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=()
while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do pkgs+=("$1"); shift; done
[ ${#pkgs[@]} -gt 0 ] || { echo "usage: $0 PACKAGE... [go test flags]" >&2; exit 2; }

bin=$(pg_config --bindir)
dir=$(mktemp -d /tmp/idemctl-testcpu.XXXXXX)
port=${TEST_CPU_PORT:-5497}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
trap 'as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
[ "$(id -u)" = 0 ] && chown postgres "$dir"
as_pg "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
as_pg "$bin/pg_ctl" -D "$dir/data" -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" \
	-l "$dir/log" -w start >/dev/null
export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/test?sslmode=disable"
psql -qX "postgres://postgres@127.0.0.1:$port/postgres" -c "CREATE DATABASE test"
postmaster=$(head -1 "$dir/data/postmaster.pid")
# Reaped children's CPU of the postmaster, in clock ticks (utime of exited
# backends is added to cutime when the postmaster waits for them).
server_ticks() { awk '{print $16 + $17}' "/proc/$postmaster/stat"; }
hz=$(getconf CLK_TCK)

# The template every dbtest database is cloned from, built once as make test does.
go test -count=1 -run '^TestStaleSchemasOfDeadRunsAreDropped$' ./lab >/dev/null

for pkg in "${pkgs[@]}"; do
	exe="$dir/$(basename "$pkg").test"
	go test -race -c -o "$exe" "$pkg"
	before=$(server_ticks)
	start=$(date +%s.%N)
	# The test binary runs in its package's directory, as go test runs it.
	(cd "$pkg" && /usr/bin/time -o "$dir/cpu" -f '%U %S' "$exe" -test.count=1 -test.timeout=20m "$@" >"$dir/out" 2>&1) || true
	end=$(date +%s.%N)
	cpu=$(tail -1 "$dir/cpu")
	sleep 1 # backends of the last connections exit
	after=$(server_ticks)
	tail -1 "$dir/out"
	grep -E '^(--- FAIL|FAIL)' "$dir/out" || true
	awk -v p="$pkg" -v s="$start" -v e="$end" -v c="$cpu" -v b="$before" -v a="$after" -v hz="$hz" -v ld="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN {
		split(c, u, " ")
		printf "%s: wall %.1f s, test processes %.1f s CPU, server %.1f s CPU (load %s)\n", p, e - s, u[1] + u[2], (a - b) / hz, ld
	}'
done
