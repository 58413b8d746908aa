#!/usr/bin/env bash
# Benchmark of `idemctl reconcile` (package reconcile, BenchmarkReconcile): a
# settlement report of 100,000 and of 1,000,000 lines, in an order unrelated
# to the identities, against an inbox of as many demo.transfer operations
# (1 in 1000 differing), with sort buffers of 4, 16 (the default) and 64 MiB.
# Reports lines per second and the peak Go heap during the run; bounded
# memory means the peak follows the sort buffer, not the report's size.
# Seeding the 1,000,000 operations takes about 30 s; the whole, 2 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benchlib.sh
. scripts/benchlib.sh

echo "== reconcile: settlement report against the inbox"
bench "$out/reconcile.txt" go test ./reconcile -run '^$' -bench 'BenchmarkReconcile' -benchtime 1x -count 1 -timeout 30m
small=$(metric "$out/reconcile.txt" 'lines=100000/sort-buffer=16MiB' peak-heap-MiB)
large=$(metric "$out/reconcile.txt" 'lines=1000000/sort-buffer=16MiB' peak-heap-MiB)
rate=$(metric "$out/reconcile.txt" 'lines=1000000/sort-buffer=16MiB' lines/s)
echo "1M lines at the default buffer: ${rate} lines/s, peak heap ${large} MiB (100k lines: ${small} MiB)"
