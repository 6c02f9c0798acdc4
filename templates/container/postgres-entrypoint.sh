#!/bin/sh
# PostgreSQL for compose.yaml. First start (empty $PGDATA): initdb with POSTGRES_USER as the superuser and
# POSTGRES_PASSWORD (scram-sha-256 over TCP), the database POSTGRES_DB with the vector extension. Then runs
# the server in the foreground, listening on every address of the container (the compose network only:
# compose.yaml publishes no port for it).
set -eu
: "${POSTGRES_USER:=agentws}" "${POSTGRES_DB:=agentws}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then echo "postgres: set POSTGRES_PASSWORD (first start)" >&2; exit 64; fi
  pw=$(mktemp); printf '%s' "$POSTGRES_PASSWORD" >"$pw"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pw" --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >&2
  rm -f "$pw"
  # Local socket: the postgres OS user (this process) as the superuser role, for the setup below.
  printf 'local all all trust\nhost all all all scram-sha-256\n' >"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >&2
  psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\"" >&2
  psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$POSTGRES_USER" -d "$POSTGRES_DB" -c 'CREATE EXTENSION IF NOT EXISTS vector' >&2
  pg_ctl -D "$PGDATA" -m fast -w stop >&2
  # From now on the socket too asks for the password: only this container's own user could use it anyway.
  printf 'local all all scram-sha-256\nhost all all all scram-sha-256\n' >"$PGDATA/pg_hba.conf"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
