# One image for every Sluice role: admin API, broker worker, migrations, Celery worker and beat.
#
#   docker build -t sluice:0.1.0 .
#   docker run --rm -p 8080:8080 -e DATABASE_URL=... -e REDIS_URL=... sluice:0.1.0   # the API
#   docker run --rm sluice:0.1.0 sluice worker                                        # a worker
#
# The default command runs the admin API; the HEALTHCHECK probes its liveness endpoint.  Other
# roles override the command (and, in docker-compose.yml, the health check).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------------------------
# build: a virtual environment in /opt/sluice with Sluice, its server and reports extras.
# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN python -m venv /opt/sluice \
 && /opt/sluice/bin/pip install --upgrade pip setuptools wheel

WORKDIR /src

# Dependencies first, from the two pyproject.toml files alone, so that a code change reuses this
# layer: the client's (client/pyproject.toml, the sluice package) and the server's extras (the
# server's own dependency is the client, installed from this source below).
COPY pyproject.toml README.md ./
COPY client/pyproject.toml client/README.md ./client/
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
c = tomllib.load(open('client/pyproject.toml', 'rb'))['project']; \
extras = p['optional-dependencies']; \
print('\n'.join(c['dependencies'] + extras['server'] + extras['reports']))" > /tmp/requirements.txt \
 && /opt/sluice/bin/pip install -r /tmp/requirements.txt

# Then the project itself (the .dockerignore keeps tests, docs and the chart out).
COPY . .
# (pip byte-compiles what it installs: the runtime user cannot write there, so the .pyc files
# are kept for fast start-up.)
RUN /opt/sluice/bin/pip install --no-deps ./client . \
 && /opt/sluice/bin/sluice --help > /dev/null

# ---------------------------------------------------------------------------------------------
# runtime: Python, a Java 17 runtime and the PostgreSQL JDBC driver for Spark, tini as PID 1.
# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

ARG SLUICE_UID=10001
ARG SLUICE_GID=10001

# /usr/share/man/man1 must exist for the JRE's post-install script on slim images.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless \
        libpostgresql-jdbc-java \
        tini \
        procps \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/* \
 && test -f /usr/share/java/postgresql.jar \
 && groupadd --system --gid "${SLUICE_GID}" sluice \
 && useradd --system --uid "${SLUICE_UID}" --gid sluice --home-dir /home/sluice \
        --create-home --shell /usr/sbin/nologin sluice \
 && install -d -o sluice -g sluice -m 0750 /var/lib/sluice /var/lib/sluice/lake

COPY --from=build /opt/sluice /opt/sluice

ENV PATH=/opt/sluice/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/home/sluice \
    SLUICE_DATA_DIR=/var/lib/sluice \
    SLUICE_LAKE_PATH=/var/lib/sluice/lake

WORKDIR /var/lib/sluice
USER ${SLUICE_UID}:${SLUICE_GID}

EXPOSE 8080 8081

HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/admin/v2/brokers/health', timeout=4); sys.exit(0)"]

# tini forwards SIGTERM to the role's process (a worker then releases its leases) and reaps
# Spark's JVM children.  Kubernetes sets only `args`, so tini stays PID 1 there too.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["sluice", "api", "--host", "0.0.0.0", "--port", "8080"]
