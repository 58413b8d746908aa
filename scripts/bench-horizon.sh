#!/usr/bin/env bash
# Benchmarks of the horizon purge, baselines measured in the same run:
#   - purge of half of a HORIZON_BENCH_ROWS-row inbox (default 5,000,000 rows
#     over 50 days; the cutoff in the middle) by horizon.Purge vs one bare
#     DELETE ... WHERE created_at < T on the former single inbox table
#     (targets: >= 1.0x its rows/s, p99 transaction <= 100 ms, WAL <= the bare
#     DELETE's, tombstone <= 25% of the bytes of the row it replaces); ctid
#     batches of 5,000 rows on the same table are shown for orientation;
#   - the applied path of idem.execute on the split inbox vs the bare effect
#     (target: >= 0.7x).
# The benchmark databases (idemctl_hzbench_<digest>_<rows>_v1/_v4) are built
# once (about 6 minutes for 5,000,000 rows) and kept for later runs; each
# measurement runs in a copy. WAL is measured server-wide: run it on a quiet
# machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benchlib.sh
. scripts/benchlib.sh
export HORIZON_BENCH_ROWS="${HORIZON_BENCH_ROWS:-5000000}"

echo "== purge half of a ${HORIZON_BENCH_ROWS}-row inbox"
bench "$out/purge.txt" go test ./horizon -run '^$' -bench 'BenchmarkPurge$' -benchtime 1x -count 1 -timeout 60m
bare=$(metric "$out/purge.txt" 'bare_delete' rows/s)
barewal=$(metric "$out/purge.txt" 'bare_delete' WAL_MiB)
barems=$(metric "$out/purge.txt" 'bare_delete' lock_hold_ms)
ctid=$(metric "$out/purge.txt" 'ctid_batches' x_bare)
ctidp99=$(metric "$out/purge.txt" 'ctid_batches' p99_tx_ms)
rate=$(metric "$out/purge.txt" 'horizon_purge' rows/s)
ratio=$(metric "$out/purge.txt" 'horizon_purge' x_bare)
p99=$(metric "$out/purge.txt" 'horizon_purge' p99_tx_ms)
mx=$(metric "$out/purge.txt" 'horizon_purge' max_tx_ms)
wal=$(metric "$out/purge.txt" 'horizon_purge' WAL_MiB)
walratio=$(metric "$out/purge.txt" 'horizon_purge' x_bare_WAL)
tomb=$(metric "$out/purge.txt" 'horizon_purge' tombstone_B)
row=$(metric "$out/purge.txt" 'horizon_purge' replaced_row_B)
pct=$(metric "$out/purge.txt" 'horizon_purge' tombstone_%)
echo "bare DELETE:    ${bare} rows/s, one transaction holding its locks ${barems} ms, WAL ${barewal} MiB"
echo "ctid batches:   ${ctid}x bare, p99 transaction ${ctidp99} ms (orientation)"
echo "horizon purge:  ${rate} rows/s = ${ratio}x bare  [>= 1.0x: $(check "$ratio" '>=' 1.0)]"
echo "                p99 transaction ${p99} ms (max ${mx} ms)  [<= 100 ms: $(check "$p99" '<=' 100)]"
echo "                WAL ${wal} MiB = ${walratio}x bare  [<= 1.0x: $(check "$walratio" '<=' 1.0)]"
echo "                tombstone ${tomb} B for a ${row} B inbox row = ${pct}%  [<= 25%: $(check "$pct" '<=' 25)]"

echo
echo "== idem.execute (split inbox) vs the bare effect"
bench "$out/exec.txt" go test ./idem -run '^$' -bench 'BenchmarkExecute' -benchtime 3s -count 1
for c in 1 8; do
	base=$(metric "$out/exec.txt" "baseline_bare_effect/conns=$c" ops/s)
	app=$(metric "$out/exec.txt" "applied/conns=$c" ops/s)
	r=$(awk -v a="$app" -v b="$base" 'BEGIN { if (a && b) printf "%.2f", a / b; else print "" }')
	echo "conns=$c applied/bare: ${r}x  [>= 0.7x: $(check "$r" '>=' 0.7)]"
done
