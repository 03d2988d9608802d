# The image of the `postgres` service (docker-compose.yml): Debian's
# postgresql package on BASE, and deploy/postgres-entrypoint.sh, which
# makes the database once and runs the server.
#
#   docker build -f deploy/postgres.Dockerfile -t semiactive-postgres .
#
# BASE is any Debian image (the default is deploy/Dockerfile's; `make
# deploy-test` builds on the Debian base it makes with debootstrap): apt
# installs from its Debian mirror, with no cluster of the package's own
# (the entry point makes the one the service runs).
ARG BASE=python:3.11-slim
FROM ${BASE}
RUN mkdir -p /etc/postgresql-common \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf \
 && apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man
COPY deploy/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
RUN chmod 755 /usr/local/bin/postgres-entrypoint
ENV PGDATA=/var/lib/postgresql/data
EXPOSE 5432
# SIGINT: PostgreSQL's fast shutdown (SIGTERM waits for every client to leave).
STOPSIGNAL SIGINT
ENTRYPOINT ["postgres-entrypoint"]
CMD ["server"]
