#!/usr/bin/env bash
# Benchmark of quarantine triage (package quarantine, BenchmarkQuarantineList
# and BenchmarkQuarantineTriage): a page of `quarantine list` for each filter,
# the totals it prints and `quarantine groups`, over 1,000,000 records.
# Target: a page at most 50 ms median. The database is filled once (a few
# minutes on 2 cores) and kept as idemctl_bench_triage_<digest> for the next
# run; drop it by hand to rebuild it.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benchlib.sh
. scripts/benchlib.sh

echo "== quarantine triage: 1,000,000 records"
go test ./quarantine -run '^$' -bench 'BenchmarkQuarantine(List|Triage)$' -benchtime 20x -count 1 -timeout 60m |
	tee "$out/triage.txt" | grep Benchmark
worst=$(awk '$1 ~ /\/list\/|BenchmarkQuarantineList\// { for (i = 2; i < NF; i++) if ($(i+1) == "ms/median" && $i > m) m = $i }
	END { print m + 0 }' "$out/triage.txt")
echo "slowest page: ${worst} ms median (target <= 50 ms): $(check "$worst" "<=" 50)"
