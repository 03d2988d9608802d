#!/bin/sh
# The entry point of the kafka image (deploy/kafka.Dockerfile):
#
#   broker   Tansu on 0.0.0.0:9092, memory storage, advertised to clients
#            as $KAFKA_ADVERTISED (default kafka:9092: the service's name
#            on the compose network); once it answers, the topics of
#            $KAFKA_TOPICS (NAME:PARTITIONS, space-separated) are created.
#            A restarted broker is empty (memory storage).
#   health   exit 0 once every topic of $KAFKA_TOPICS exists: the service's
#            health check, so that a source (which refuses a topic that does
#            not exist) starts after it.
#   ...      any other arguments: `tansu ARGS` (topic list, cat consume ...).
set -eu
local_broker=tcp://127.0.0.1:9092

has_topics() {  # NAME...: whether the broker answers and has them all
    listed=$(tansu topic list --broker "$local_broker" 2>/dev/null) || return 1
    for name in "$@"; do
        case "$listed" in
        *"\"name\":\"$name\""*) ;;
        *) return 1 ;;
        esac
    done
}

case "${1:-broker}" in
health)
    set --
    for spec in ${KAFKA_TOPICS:-}; do set -- "$@" "${spec%%:*}"; done
    has_topics "$@"
    exit
    ;;
broker) ;;
*) exec tansu "$@" ;;
esac

tansu broker --listener-url tcp://0.0.0.0:9092 \
    --advertised-listener-url "tcp://${KAFKA_ADVERTISED:-kafka:9092}" \
    --storage-engine memory://tansu/ &
broker=$!
trap 'kill -TERM "$broker" 2>/dev/null || :' INT TERM
for spec in ${KAFKA_TOPICS:-}; do
    name=${spec%%:*} partitions=${spec#*:}
    # (tansu's client waits for the broker to listen)
    until has_topics "$name" || tansu topic create --broker "$local_broker" --partitions "$partitions" "$name"; do
        kill -0 "$broker" 2>/dev/null || break 2
        sleep 0.2
    done
    echo "kafka-entrypoint: topic $name: $partitions partitions"
done
status=0
wait "$broker" || status=$?
# A signal interrupts the first wait: wait for the broker to exit.
while kill -0 "$broker" 2>/dev/null; do wait "$broker" || status=$?; done
exit "$status"
