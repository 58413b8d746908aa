#!/usr/bin/env bash
# The main job on a local default: migrate, install the demo ledger, and show an
# operation applied once and its duplicate answered from the inbox.
# Uses IDEMCTL_DSN when set; otherwise a local PostgreSQL (started or created if
# needed) and its database idemctl_demo.
set -euo pipefail
cd "$(dirname "$0")/.."

go build -o bin/idemctl ./cmd/idemctl

if [ -z "${IDEMCTL_DSN:-}" ]; then
	scripts/pg-up.sh
	psql -h 127.0.0.1 -U postgres -d postgres -Atqc "SELECT 1 FROM pg_database WHERE datname = 'idemctl_demo'" | grep -q 1 ||
		psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE idemctl_demo"
	export IDEMCTL_DSN="postgres://postgres@127.0.0.1:5432/idemctl_demo?sslmode=disable"
	# The local demo database is ours: if an older idemctl made it with
	# migrations that have changed since, start it afresh.
	if bin/idemctl migrate --status -o json | grep -q '"state":"DRIFTED"'; then
		echo "demo: idemctl_demo was made by another version of idemctl; recreating it" >&2
		psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE idemctl_demo WITH (FORCE)" -c "CREATE DATABASE idemctl_demo"
	fi
fi

bin/idemctl migrate -o table
bin/idemctl demo init
bin/idemctl demo run -o table

# The main job: a batch of ambiguous operations, resolved; then the same batch
# again, as after a crash, with one retry that changed its amount.
batch=$(mktemp)
trap 'rm -f "$batch"' EXIT
op="batch-$(date +%s)"
for n in 1 2 3; do
	printf '{"tenant":"demo","operation_id":"%s-%d","class":"demo.transfer","payload":{"from":"alice","to":"carol","amount":%d00,"currency":"EUR"}}\n' "$op" "$n" "$n"
done >"$batch"
echo
echo "== idemctl resolve --file batch.ndjson --dry-run   (nothing is written)"
bin/idemctl resolve --file "$batch" --dry-run -o table
echo
echo "== idemctl resolve --file batch.ndjson"
bin/idemctl resolve --file "$batch" -o table
printf '{"tenant":"demo","operation_id":"%s-2","class":"demo.transfer","payload":{"from":"alice","to":"carol","amount":250,"currency":"EUR"}}\n' "$op" >>"$batch"
echo
echo "== the same batch again, plus a retry of $op-2 with another amount (exit code 3: a conflict)"
bin/idemctl resolve --file "$batch" -o table || echo "(exit code $?: the conflicting retry was quarantined, nothing ran)"
