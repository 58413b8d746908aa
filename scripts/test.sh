#!/usr/bin/env bash
# Run every test against a real PostgreSQL, with the race detector, after
# gofmt, go vet and staticcheck. With TEST_DATABASE_URL unset, the local
# server is started if needed (scripts/pg-up.sh says what it does to log in
# as a superuser) and its database "test" is created.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${TEST_DATABASE_URL:-}" ]; then
	base=$(scripts/pg-up.sh)
	export TEST_DATABASE_URL="$base/test?sslmode=disable"
	psql -w "$base/postgres?sslmode=disable" -Atqc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 ||
		psql -w "$base/postgres?sslmode=disable" -qc "CREATE DATABASE test"
	echo "test: against $(sed 's#://\([^:@]*\):[^@]*@#://\1:xxxxx@#' <<<"$TEST_DATABASE_URL")" >&2
fi

# Leftovers of interrupted runs on this host: per-test databases whose test
# process is gone (each records its pid), never those of a run still going.
host=$(hostname)
psql "$TEST_DATABASE_URL" -AtqF ' ' -c "SELECT datname, coalesce(shobj_description(oid, 'pg_database'), '')
	FROM pg_database WHERE datname LIKE 'idemctl\_t\_%'" |
	while read -r name comment; do
		pid=$(sed -n 's/.*pid=\([0-9]*\) host=\(.*\)$/\1/p' <<<"$comment")
		owner=$(sed -n 's/.*pid=[0-9]* host=\(.*\)$/\1/p' <<<"$comment")
		if [ -n "$pid" ] && [ "$owner" = "$host" ] && ! kill -0 "$pid" 2>/dev/null; then
			psql "$TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" >/dev/null
		fi
	done

unformatted=$(gofmt -l . || true)
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...

# staticcheck, pinned, installed from the Go module proxy when missing.
staticcheck_version=v0.8.2
staticcheck=$(go env GOPATH)/bin/staticcheck
if ! [ -x "$staticcheck" ] || ! "$staticcheck" -version 2>/dev/null | grep -q "${staticcheck_version#v}"; then
	echo "test: installing staticcheck $staticcheck_version" >&2
	GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
fi
"$staticcheck" ./...

# TEST_PACKAGES narrows the packages tested (scripts/fresh-debian.sh). The
# Citus suite is its own target (make test-citus).
echo "test: the Citus suite is not part of make test: make test-citus runs it" >&2
# shellcheck disable=SC2086
go test -race -count=1 -timeout 20m "$@" ${TEST_PACKAGES:-$(go list ./... | grep -v -e /internal/citustest -e /internal/oncitus)}
