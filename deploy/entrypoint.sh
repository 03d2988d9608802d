#!/bin/sh
# The entry point of the semiactive image: `semiactive ARGS...`, plus:
#
#   node ...   A container that ran before (the restart policy, or an
#              operator's `start`, brought it back after its node died)
#              starts its node again as $SEMIACTIVE_RESTART_AS says:
#                spare    (the default) an empty spare under the same name,
#                         as `cluster up` restarts a dead stage replica: its
#                         stage has moved on (the secondary took over, at the
#                         next epoch) and the coordinator decides what the
#                         replacement machine does;
#                resume   with --resume, as `cluster up` restarts a source or
#                         durable sink: a member of one with a standby
#                         (`ha: {secondary: ...}`) waits as the standby while
#                         the other serves, or goes on from the progress in
#                         the run directory if nobody does.
#   init TLS_DIR RUN_DIR CONFIG [DB_DIR]
#              Once per deployment (as root): a CA and a certificate per
#              identity of CONFIG (`semiactive certs init`, CA key kept in
#              TLS_DIR/ca/), each identity's CA certificate, certificate and
#              key copied to TLS_DIR/<identity>/ (what its container mounts
#              as /tls, and nothing else), and the run directory; both
#              owned by the image's user. With DB_DIR, a random password of
#              the database's role `semiactive`: DB_DIR/password (root's, for
#              the database's first start) and DB_DIR/pgpass (the image's
#              user's, the PGPASSFILE of the sinks and `admin`). An existing
#              CA or password is kept.
set -eu
USER_ID=10001

case "${1:-}" in
node)
    marker=/var/lib/semiactive/started
    if [ -e "$marker" ]; then
        case "${SEMIACTIVE_RESTART_AS:-spare}" in
        resume)
            echo "semiactive-entrypoint: this container ran before: its node goes on (--resume)" >&2
            set -- "$@" --resume
            ;;
        *)
            echo "semiactive-entrypoint: this container ran before: its node starts as a spare" >&2
            set -- "$@" --spare
            ;;
        esac
    fi
    : > "$marker"
    ;;
init)
    [ "$#" -eq 4 ] || [ "$#" -eq 5 ] || { echo "usage: init TLS_DIR RUN_DIR CONFIG [DB_DIR]" >&2; exit 2; }
    tls=$2 run=$3 config=$4 db=${5:-}
    if [ -e "$tls/ca/ca.pem" ]; then
        echo "$tls/ca: a CA is there already: kept"
    else
        semiactive certs init "$tls/ca" --config "$config"
        for cert in "$tls"/ca/*.pem; do
            name=$(basename "$cert" .pem)
            [ "$name" = ca ] && continue
            mkdir -p "$tls/$name"
            cp "$tls/ca/ca.pem" "$cert" "$tls/ca/$name.key" "$tls/$name/"
            chmod 600 "$tls/$name/$name.key"
            chmod 700 "$tls/$name"
            chown -R "$USER_ID:$USER_ID" "$tls/$name"
        done
        chmod 700 "$tls/ca"
        echo "$tls: one directory per identity"
    fi
    mkdir -p "$run"
    chown "$USER_ID:$USER_ID" "$run"
    if [ -n "$db" ]; then
        if [ -s "$db/password" ]; then
            echo "$db: a database password is there already: kept"
        else
            mkdir -p "$db"
            chmod 755 "$db"
            (
                umask 077
                python3 -c 'import secrets; print(secrets.token_hex(24), end="")' > "$db/password"
                printf '*:*:*:semiactive:%s\n' "$(cat "$db/password")" > "$db/pgpass"
            )
            chown "$USER_ID:$USER_ID" "$db/pgpass"
            echo "$db: the database password (password; pgpass for its clients)"
        fi
    fi
    exit 0
    ;;
esac
exec semiactive "$@"
