#!/usr/bin/env bash
# Make sure a local PostgreSQL answers on 127.0.0.1:5432: start the Debian
# cluster if it is down, create one if there is none, install the server if it
# is missing. Used by `make test` and `make demo` when no DSN is given.
set -euo pipefail

pg_ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

if ! command -v pg_isready >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
	echo "pg-up: installing PostgreSQL from Debian packages" >&2
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

if pg_ready; then
	exit 0
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -1)
if ! pg_lsclusters -h 2>/dev/null | grep -q .; then
	echo "pg-up: creating cluster $version/main" >&2
	pg_createcluster "$version" main -- --auth=trust >/dev/null
fi
cluster=$(pg_lsclusters -h | awk 'NR==1 {print $1" "$2}')
echo "pg-up: starting cluster $cluster" >&2
# shellcheck disable=SC2086
pg_ctlcluster --skip-systemctl-redirect $cluster start || true

for _ in $(seq 1 60); do
	if pg_ready; then
		exit 0
	fi
	sleep 0.5
done
echo "pg-up: PostgreSQL did not come up on 127.0.0.1:5432; see /var/log/postgresql/" >&2
exit 1
