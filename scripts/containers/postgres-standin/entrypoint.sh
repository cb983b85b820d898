#!/bin/sh
# The official postgres image's entrypoint, the part compose uses: as root, make PGDATA the postgres user's and run
# again as that user; on an empty PGDATA, initdb with POSTGRES_USER and its password (POSTGRES_PASSWORD or the file
# POSTGRES_PASSWORD_FILE names), password logins from any address, and POSTGRES_DB created (the server listening on
# no TCP address meanwhile, so a client never connects to a database that is still being made); then the server.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec runuser -u postgres -- "$0" "$@"
fi
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    user="${POSTGRES_USER:-postgres}"
    password="${POSTGRES_PASSWORD:-}"
    if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
        password="$(cat "$POSTGRES_PASSWORD_FILE")"
    fi
    if [ -z "$password" ]; then
        echo "error: the database is uninitialised and no password is set (POSTGRES_PASSWORD or _FILE)" >&2
        exit 1
    fi
    pwfile="$(mktemp)"
    printf '%s' "$password" >"$pwfile"
    initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    db="${POSTGRES_DB:-$user}"
    if [ "$db" != postgres ]; then
        pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
        psql -v ON_ERROR_STOP=1 -q -U "$user" -d postgres -c "CREATE DATABASE \"$db\""
        pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    fi
    echo "database initialised: $db, owner $user"
fi
if [ "${1:-}" = postgres ]; then
    shift
    exec postgres -D "$PGDATA" "$@"
fi
exec "$@"
