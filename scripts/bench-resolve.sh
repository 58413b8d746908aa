#!/usr/bin/env bash
# Benchmarks of `idemctl resolve`, each baseline measured in the same run:
#   - dry run of 100,000 identities against a 1,000,000-row inbox vs one SELECT
#     per identity on one connection (targets: >= 25x and >= 200,000 keys/s;
#     also printed: the CPU per key of the client and of the server backends,
#     the bound on a 2-core machine being 2 / (client + server) keys/µs);
#   - the server CPU per key of the lookup, by stage (arrays, identity probe,
#     body probe), on pages in shared_buffers and on fresh keys;
#   - the same over a 10,000,000-row inbox (target: >= 150,000 keys/s), only
#     with IDEMCTL_BENCH_10M=1;
#   - a real run of 100,000 lines, 95% already applied (the rerun after a
#     crash), vs its dry run (target: >= 0.5x);
#   - resolve applying at concurrency 16 vs pgbench -c 16 calling
#     idem.execute (target: >= 1.0x);
#   - peak memory of the real binary's dry run over 1,000,000 lines (target:
#     <= 200 MiB).
# The 1,000,000-row database (idemctl_bench_<digest>_1000k) is built once
# (about 30 s), the 10,000,000-row one (about 6 GB, opt-in) once too (some minutes),
# and both are kept for later runs. Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benchlib.sh
. scripts/benchlib.sh

echo "== resolve --dry-run: 100,000 identities, 1,000,000-row inbox"
bench "$out/dry.txt" go test ./recovery -run '^$' -bench 'BenchmarkDryRun$' -benchtime 3x -count 1 -timeout 60m
base=$(metric "$out/dry.txt" 'select_per_key' keys/s)
batched=$(metric "$out/dry.txt" 'batched-' keys/s)
ratio=$(metric "$out/dry.txt" 'batched-' x_select_per_key)
echo "select per key:            ${base} keys/s"
echo "batched:                   ${batched} keys/s = ${ratio}x  [>= 25x: $(check "$ratio" '>=' 25), >= 200000 keys/s: $(check "$batched" '>=' 200000)]"
echo "CPU per key:               client $(metric "$out/dry.txt" 'batched-' client_us/key) µs, server $(metric "$out/dry.txt" 'batched-' server_us/key) µs  [together <= 10 µs]"
echo "load average:              $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== the dry run's lookup: server CPU per key by stage, 1,000,000-row inbox (hot: pages in shared_buffers; fresh: new keys each batch)"
bench "$out/stages.txt" go test ./recovery -run '^$' -bench 'BenchmarkLookupServerCPU$' -benchtime 20x -count 1 -timeout 30m
for s in unnest identity lookup; do
  echo "${s}: hot $(metric "$out/stages.txt" "/${s}/hot" server_us/key) µs, fresh $(metric "$out/stages.txt" "/${s}/fresh" server_us/key) µs"
done

echo
echo "== resolve --dry-run: 100,000 identities, 10,000,000-row inbox"
if [ -n "${IDEMCTL_BENCH_10M:-}" ]; then
  bench "$out/large.txt" go test ./recovery -run '^$' -bench 'BenchmarkDryRunLarge$' -benchtime 3x -count 1 -timeout 120m
  large=$(metric "$out/large.txt" 'DryRunLarge' keys/s)
  echo "batched:                   ${large} keys/s  [>= 150000 keys/s: $(check "$large" '>=' 150000)]"
  echo "CPU per key:               client $(metric "$out/large.txt" 'DryRunLarge' client_us/key) µs, server $(metric "$out/large.txt" 'DryRunLarge' server_us/key) µs"
else
  echo "skipped: set IDEMCTL_BENCH_10M=1 (the database, about 6 GB, is built once: some minutes)"
fi

echo
echo "== resolve --dry-run: 100,000 identities, 1,000,000-row inbox of 100 tenants over 23 day partitions"
bench "$out/tenants.txt" go test ./recovery -run '^$' -bench 'BenchmarkDryRunTenants$' -benchtime 3x -count 1 -timeout 60m
tbase=$(metric "$out/tenants.txt" 'select_per_key' keys/s)
tbatched=$(metric "$out/tenants.txt" 'batched-' keys/s)
tratio=$(metric "$out/tenants.txt" 'batched-' x_select_per_key)
echo "select per key:            ${tbase} keys/s"
echo "batched:                   ${tbatched} keys/s = ${tratio}x  [>= 200000 keys/s: $(check "$tbatched" '>=' 200000)]"
echo "CPU per key:               client $(metric "$out/tenants.txt" 'batched-' client_us/key) µs, server $(metric "$out/tenants.txt" 'batched-' server_us/key) µs"

echo
echo "== resolve of 100,000 lines, 95% already applied, vs its dry run"
bench "$out/rerun.txt" go test ./recovery -run '^$' -bench 'BenchmarkRerun$' -benchtime 3x -count 1 -timeout 60m
rr=$(metric "$out/rerun.txt" 'applied=95%' x_dry_run)
rl=$(metric "$out/rerun.txt" 'applied=100%' x_dry_run)
echo "real run / dry run, 95% applied:  ${rr}x  [>= 0.5x: $(check "$rr" '>=' 0.5)]"
echo "real run / dry run, 100% applied: ${rl}x  (the lookups alone)"

echo
echo "== resolve applying at concurrency 16 vs pgbench -c 16 calling idem.execute"
bench "$out/apply.txt" go test ./recovery -run '^$' -bench 'BenchmarkApply$' -benchtime 20000x -count 1 -timeout 60m
pgb=$(metric "$out/apply.txt" 'pgbench_c16' ops/s)
rsv=$(metric "$out/apply.txt" 'resolve_c16' ops/s)
aratio=$(metric "$out/apply.txt" 'resolve_c16' x_pgbench)
echo "pgbench: ${pgb} ops/s, resolve: ${rsv} ops/s = ${aratio}x  [>= 1.0x: $(check "$aratio" '>=' 1.0)]"

echo
echo "== peak memory of idemctl resolve --dry-run -o json over 1,000,000 lines"
bench "$out/rss.txt" go test ./recovery -run '^$' -bench 'BenchmarkDryRunPeakRSS$' -benchtime 1x -count 1 -timeout 30m
peak=$(metric "$out/rss.txt" 'PeakRSS' peak_MiB)
e2e=$(metric "$out/rss.txt" 'PeakRSS' keys/s)
echo "peak RSS: ${peak} MiB  [<= 200 MiB: $(check "$peak" '<=' 200)], end to end with JSON output: ${e2e} keys/s"
