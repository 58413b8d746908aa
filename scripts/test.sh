#!/usr/bin/env bash
# Run every test against a real PostgreSQL. With TEST_DATABASE_URL unset, the
# local server is started if needed and its database "test" is created.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${TEST_DATABASE_URL:-}" ]; then
	scripts/pg-up.sh
	export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	psql -h 127.0.0.1 -U postgres -d postgres -Atqc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 ||
		psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE test"
fi

# Leftovers of interrupted runs: per-test databases and stale templates.
psql "$TEST_DATABASE_URL" -Atqc "SELECT datname FROM pg_database WHERE datname LIKE 'idemctl\_t\_%' OR datname LIKE 'idemctl\_tpl\_%'" |
	while read -r name; do
		psql "$TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" >/dev/null
	done

unformatted=$(gofmt -l . || true)
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
go test -count=1 -timeout 15m "$@" ./...
