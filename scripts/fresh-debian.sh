#!/usr/bin/env bash
# Both README commands on a cluster set up as `apt-get install postgresql`
# sets one up on Debian 12: peer authentication on the socket,
# scram-sha-256 on TCP, no password for anyone. A scratch cluster (its own
# directory, socket and port; the machine's clusters are not touched) stands
# in for it. `make demo` and the whole `make test` (every package; set
# TEST_PACKAGES and TEST_ARGS to narrow it by hand) must pass against it
# without pg_hba.conf being edited, and pg_hba.conf must be unchanged
# afterwards. Needs root (or to be the postgres OS user) and the PostgreSQL
# server binaries. Each step says how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$bindir" ]; then
	echo "fresh-debian: no PostgreSQL server binaries in /usr/lib/postgresql; install postgresql" >&2
	exit 1
fi
as_postgres() {
	if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}
if [ "$(id -u)" != 0 ] && [ "$(id -un)" != postgres ]; then
	echo "fresh-debian: run as root (the scratch cluster runs as the postgres OS user)" >&2
	exit 1
fi

dir=$(mktemp -d /tmp/idemctl-fresh-XXXXXX)
chown postgres "$dir" 2>/dev/null || true
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
	as_postgres "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT

echo "fresh-debian: scratch cluster on 127.0.0.1:$port (peer on the socket, scram-sha-256 on TCP) in $dir" >&2
as_postgres "$bindir/initdb" -D "$dir/data" -U postgres --auth-local=peer --auth-host=scram-sha-256 \
	--no-sync -E UTF8 --locale C >/dev/null
cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
fsync = off
max_connections = 100
CONF
as_postgres "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null
hba_before=$(sha256sum "$dir/data/pg_hba.conf")

export PG_UP_PORT=$port PG_UP_SOCKET_DIR=$dir PG_UP_SAVED=$dir/admin.url
unset TEST_DATABASE_URL IDEMCTL_DEMO_ADMIN_DSN
# What a user with the on-call laptop's DSN in the shell would have: the demo
# must not touch it.
export IDEMCTL_DSN="postgres://nobody:secret@127.0.0.1:1/production"

if PGCONNECT_TIMEOUT=5 psql -w "postgres://postgres@127.0.0.1:$port/postgres" -c 'SELECT 1' >/dev/null 2>&1; then
	echo "fresh-debian: the scratch cluster let postgres in over TCP without a password; the test proves nothing" >&2
	exit 1
fi

echo "== make demo" >&2
started=$SECONDS
make demo
echo "fresh-debian: make demo took $((SECONDS - started))s" >&2
echo "== make test${TEST_PACKAGES:+ (TEST_PACKAGES=$TEST_PACKAGES)}" >&2
started=$SECONDS
if [ -n "${TEST_ARGS:-}" ]; then make test ARGS="$TEST_ARGS"; else make test; fi
echo "fresh-debian: make test took $((SECONDS - started))s" >&2

if [ "$(sha256sum "$dir/data/pg_hba.conf")" != "$hba_before" ]; then
	echo "fresh-debian: pg_hba.conf was changed" >&2
	exit 1
fi
echo "fresh-debian: make demo and make test passed on a cluster with Debian's default authentication; pg_hba.conf unchanged" >&2
