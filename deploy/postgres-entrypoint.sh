#!/bin/sh
# The entry point of the postgres image (deploy/postgres.Dockerfile), as root:
#
#   server   On the first start (an empty $PGDATA): initdb as the postgres
#            user, the role $POSTGRES_USER (default semiactive) as the
#            superuser, its password the file $POSTGRES_PASSWORD_FILE (which
#            `init` made), the database $POSTGRES_DB (default results) it
#            owns, and every connection authenticated by password
#            (scram-sha-256). Then the server, as postgres, on port 5432 of
#            every address of the container: the compose network and the
#            port published on the host's 127.0.0.1.
#   health   exit 0 when the server accepts connections (the health check).
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
data=${PGDATA:-/var/lib/postgresql/data}
user=${POSTGRES_USER:-semiactive}
db=${POSTGRES_DB:-results}

case "${1:-server}" in
health) exec "$bin/pg_isready" -q -h /tmp -p 5432 -d "$db" -U "$user" ;;
server) ;;
*) echo "usage: postgres-entrypoint [server | health]" >&2; exit 2 ;;
esac

as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

mkdir -p "$data"
chown postgres:postgres "$data"
chmod 700 "$data"
if [ ! -s "$data/PG_VERSION" ]; then
    password=${POSTGRES_PASSWORD_FILE:-}
    if [ -z "$password" ] || [ ! -s "$password" ]; then
        echo "postgres-entrypoint: no password file (POSTGRES_PASSWORD_FILE=$password): run init first" >&2
        exit 2
    fi
    pwfile=$(mktemp)
    cp "$password" "$pwfile"
    chown postgres "$pwfile"
    as_postgres "$bin/initdb" -D "$data" -U "$user" --pwfile="$pwfile" -A scram-sha-256 -E UTF8 --locale=C >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$data/pg_hba.conf"
    echo "CREATE DATABASE $db OWNER $user" | as_postgres "$bin/postgres" --single -D "$data" postgres >/dev/null
    echo "postgres-entrypoint: made the database $db (role $user) in $data"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups \
    "$bin/postgres" -D "$data" -c listen_addresses='*' -c unix_socket_directories=/tmp
