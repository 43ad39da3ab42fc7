#!/usr/bin/env bash
# Start the real servers the tests use, on loopback, and export where they are.
# Source it:  . .ci/services.sh   (stop with: corevo_services_stop)
# PostgreSQL refuses to run as root, so it runs as the `postgres` user.
set -euo pipefail
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
PGPORT=${COREVO_PG_PORT:-54329}
COREVO_PGDATA=$(mktemp -d /tmp/corevo-pg.XXXXXX)
if [ "$(id -u)" = 0 ]; then
  chown postgres:postgres "$COREVO_PGDATA"
  as_pg() { runuser -u postgres -- "$@"; }
else
  as_pg() { "$@"; }
fi
as_pg "$PGBIN/initdb" -D "$COREVO_PGDATA" -A trust -U postgres >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$COREVO_PGDATA" -l "$COREVO_PGDATA/server.log" -w \
  -o "-p $PGPORT -k $COREVO_PGDATA -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
  start >/dev/null
export COREVO_TEST_PG_DSN="postgresql://postgres@127.0.0.1:$PGPORT/postgres"
export COREVO_PGDATA
corevo_services_stop() {
  as_pg "$PGBIN/pg_ctl" -D "$COREVO_PGDATA" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$COREVO_PGDATA"
}
