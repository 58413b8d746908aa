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
fi

bin/idemctl migrate -o table
bin/idemctl demo init
bin/idemctl demo run -o table
