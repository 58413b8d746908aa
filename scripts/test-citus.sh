#!/usr/bin/env bash
# The Citus suite: idemctl on a local Citus cluster (a coordinator and two
# workers that the test binaries start and remove themselves; see
# scripts/citus-cluster.sh and internal/citustest). Citus is built with
# ../shared/citus/build.sh when it is missing (as root, 2-6 minutes the first
# time). Where it is neither installed nor installable, says loudly that the
# suite was skipped, and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

banner() {
	echo "################################################################" >&2
	echo "test-citus: $*" >&2
	echo "################################################################" >&2
}

pg_config=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
if [ ! -x "$pg_config" ] || [ ! -f "$("$pg_config" --pkglibdir)/citus.so" ]; then
	build=../shared/citus/build.sh
	if [ -x "$build" ] && [ "$(id -u)" -eq 0 ]; then
		echo "test-citus: Citus is missing: building it with $build" >&2
		"$build" >&2
	else
		banner "Citus is not installed and cannot be built here ($build, root): the Citus suite was SKIPPED"
		exit 0
	fi
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
go test -count=1 -timeout 15m -v "$@" ./internal/citustest/ ./internal/oncitus/ >"$log" 2>&1 || status=$?
grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|citus-cluster|SKIP|took|holds|refused' "$log" | grep -v '^=== RUN' || true
if [ "$status" -ne 0 ]; then
	echo "test-citus: FAILED; the whole log:" >&2
	cat "$log" >&2
	exit "$status"
fi
if grep -q -- '--- SKIP' "$log"; then
	banner "some Citus tests were SKIPPED: $(grep -m1 -o 'skipped: .*' "$log" || echo 'see above')"
fi
