#!/bin/sh
# The entry point of the semiactive image: `semiactive ARGS...`, plus:
#
#   node ...   A container that ran before (the restart policy, or an
#              operator's `start`, brought it back after its node died)
#              starts as an empty spare under the same name, as `cluster up`
#              restarts a dead node: its stage has moved on (the secondary
#              took over, at the next epoch) and the coordinator decides
#              what the replacement machine does.
#   init TLS_DIR RUN_DIR CONFIG
#              Once per deployment (as root): a CA and a certificate per
#              identity of CONFIG (`semiactive certs init`, CA key kept in
#              TLS_DIR/ca/), each identity's CA certificate, certificate and
#              key copied to TLS_DIR/<identity>/ (what its container mounts
#              as /tls, and nothing else), and the run directory; both
#              owned by the image's user. An existing CA is kept.
set -eu
USER_ID=10001

case "${1:-}" in
node)
    marker=/var/lib/semiactive/started
    if [ -e "$marker" ]; then
        echo "semiactive-entrypoint: this container ran before: its node starts as a spare" >&2
        set -- "$@" --spare
    fi
    : > "$marker"
    ;;
init)
    [ "$#" -eq 4 ] || { echo "usage: init TLS_DIR RUN_DIR CONFIG" >&2; exit 2; }
    tls=$2 run=$3 config=$4
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
    exit 0
    ;;
esac
exec semiactive "$@"
