#!/usr/bin/env bash
# Benchmarks of `idemctl resolve`, each baseline measured in the same run:
#   - dry run of 100,000 identities against a 1,000,000-row inbox vs one SELECT
#     per identity on one connection (targets: >= 10x and >= 100,000 keys/s);
#   - resolve applying at concurrency 4 vs pgbench calling idem.execute with
#     4 clients (target: >= 0.7x);
#   - peak memory of the real binary's dry run over 1,000,000 lines (target:
#     <= 200 MiB).
# The 1,000,000-row database (idemctl_bench_<digest>) is built once (about 30 s)
# and kept for later runs. Takes about 3 minutes; run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benchlib.sh
. scripts/benchlib.sh

echo "== resolve --dry-run: 100,000 identities, 1,000,000-row inbox"
go test ./recover -run '^$' -bench 'BenchmarkDryRun$' -benchtime 3x -count 1 -timeout 30m | tee "$out/dry.txt" | grep Benchmark
base=$(metric "$out/dry.txt" 'select_per_key' keys/s)
batched=$(metric "$out/dry.txt" 'batched-' keys/s)
ratio=$(metric "$out/dry.txt" 'batched-' x_select_per_key)
echo "select per key:            ${base} keys/s"
echo "batched:                   ${batched} keys/s = ${ratio}x  [>= 10x: $(check "$ratio" '>=' 10), >= 100000 keys/s: $(check "$batched" '>=' 100000)]"

echo
echo "== resolve applying at concurrency 4 vs pgbench -c 4 calling idem.execute"
go test ./recover -run '^$' -bench 'BenchmarkApply$' -benchtime 12000x -count 1 -timeout 30m | tee "$out/apply.txt" | grep Benchmark
pgb=$(metric "$out/apply.txt" 'pgbench_c4' ops/s)
rsv=$(metric "$out/apply.txt" 'resolve_c4' ops/s)
aratio=$(metric "$out/apply.txt" 'resolve_c4' x_pgbench)
echo "pgbench: ${pgb} ops/s, resolve: ${rsv} ops/s = ${aratio}x  [>= 0.7x: $(check "$aratio" '>=' 0.7)]"

echo
echo "== peak memory of idemctl resolve --dry-run -o json over 1,000,000 lines"
go test ./recover -run '^$' -bench 'BenchmarkDryRunPeakRSS$' -benchtime 1x -count 1 -timeout 30m | tee "$out/rss.txt" | grep Benchmark
peak=$(metric "$out/rss.txt" 'PeakRSS' peak_MiB)
e2e=$(metric "$out/rss.txt" 'PeakRSS' keys/s)
echo "peak RSS: ${peak} MiB  [<= 200 MiB: $(check "$peak" '<=' 200)], end to end with JSON output: ${e2e} keys/s"
