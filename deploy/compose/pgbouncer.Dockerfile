# Debian's PgBouncer, the package the loopback cluster runs (deploy/cluster/cluster.py).
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends pgbouncer postgresql-client \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/compose/pgbouncer.ini /etc/pgbouncer/pgbouncer.ini
COPY deploy/compose/pgbouncer-users.txt /etc/pgbouncer/userlist.txt
USER postgres
EXPOSE 6432
ENTRYPOINT ["pgbouncer", "/etc/pgbouncer/pgbouncer.ini"]
