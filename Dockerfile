# The SensorWatch image: producer, streaming job, dashboard and the Spark standalone
# master/workers all run from it (docker-compose.yml). It installs with scripts/setup, the
# same command and the same pins (requirements.lock, and .env's versions) as a laptop, at
# build time, so containers start offline. .env itself never enters the build context
# (.dockerignore): it may hold a user's settings and secrets. Its version pins arrive as
# build arguments (docker-compose.yml passes them) and become the image's own .env.

# The official image by default; a registry mirror's copy, or the engine lane's stand-in
# (scripts/docker-lane), through the PYTHON_IMAGE build argument (docker-compose.yml).
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm
FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Spark needs a Java 17 runtime. The man directory is missing from slim images and the
# JRE's post-install step fails without it.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# The app's user: every container of the project runs as it (or as its image's own user).
RUN useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin sensorwatch

# --- venv: scripts/setup's Python packages, a layer the runtime image shares ------------
# Its own stage, so that the runtime is built FROM it: copying the 1.4 GB venv out of the
# build stage (COPY --from) took 46 of a cold build's 154 s on 2 cores (2026-12-03).
FROM base AS venv
# Only what scripts/setup reads for its Python step: a code change leaves this layer be.
COPY requirements.lock ./
COPY scripts/setup scripts/
COPY local_stack/__init__.py local_stack/jvm_perfdata.py local_stack/
COPY common/__init__.py common/waiting.py common/
RUN scripts/setup --no-browser --no-alertmanager --no-prometheus --no-mosquitto --no-jars \
      --no-bridge-engine

# --- build: scripts/setup resolves the jars on the same venv (Maven only lives here) -----
FROM venv AS build
ARG KAFKA_VERSION
ARG S3PROXY_VERSION
RUN apt-get update \
 && apt-get install -y --no-install-recommends maven \
 && rm -rf /var/lib/apt/lists/*
RUN if [ -z "${KAFKA_VERSION}" ] || [ -z "${S3PROXY_VERSION}" ]; then \
      echo "build with 'docker compose build': it passes KAFKA_VERSION and S3PROXY_VERSION from .env" >&2; \
      exit 1; fi \
 && printf 'KAFKA_VERSION=%s\nS3PROXY_VERSION=%s\n' "${KAFKA_VERSION}" "${S3PROXY_VERSION}" > .env
COPY local_stack/jvm_jars.py local_stack/
COPY local_stack/jvm/ local_stack/jvm/
COPY conf/__init__.py conf/cli.py conf/jars.py conf/paths.py conf/secrets.py conf/versions.py conf/
COPY conf/settings/__init__.py conf/settings/base.py conf/settings/
# No browser: Chromium is for the dashboard's test only; no Alertmanager or Prometheus:
# compose runs their official images; no class archive (its training run needs the
# project's code, which this stage does not copy: containers' jobs start without it).
RUN scripts/setup --no-browser --no-alertmanager --no-prometheus --no-mosquitto --no-class-archive \
      --no-bridge-engine
# This stage also runs as the compose profile s3's s3a-jars service (it has Maven):
# `.venv/bin/python -m local_stack.optional_jars` fetches Hadoop's S3 connector into a volume.
# It runs as the app's user too, so that user owns Maven's repository here and the folder
# the volume is mounted on (an empty volume takes that folder's ownership).
COPY local_stack/optional_jars.py local_stack/
RUN mkdir -p .cache/jars/spark-s3 \
 && chown -R sensorwatch:sensorwatch .cache/m2 .cache/jars/spark-s3
USER sensorwatch

# --- engine: the bridge's engine (bridge/engine/, Go), a static program -----------------
# With Go's pinned toolchain, fetched from the Go module proxy (local_stack/bridge_engine.py),
# into a place of its own: the runtime takes the program alone.
FROM venv AS engine
COPY conf/__init__.py conf/cli.py conf/paths.py conf/secrets.py conf/versions.py conf/
COPY conf/settings/__init__.py conf/settings/base.py conf/settings/
COPY local_stack/bridge_engine.py local_stack/go_build.py local_stack/
COPY bridge/engine/ bridge/engine/
RUN SENSORWATCH_BRIDGE_ENGINE=/app/engine/sensorwatch-bridge .venv/bin/python -m local_stack.bridge_engine

# --- runtime ------------------------------------------------------------------------------
# The venv stage: the venv keeps its path (/app/.venv) and its link to the project (/app).
FROM venv
# Named volumes mounted on /data/*, /run/s3, /run/mqtt and /app/var start with the
# ownership (and mode) these folders have here: no container needs root to prepare them.
# /app itself (the folder, not the code in it) belongs to the app user: Spark creates
# scratch folders in its working directory (artifacts/spark-<uuid> in Spark 4).
RUN mkdir -p /data/lake /data/fleet /data/s3 /data/mosquitto /run/s3 /run/mqtt /app/var/notifier \
 && chown -R sensorwatch:sensorwatch /data /run/s3 /run/mqtt /app/var \
 && chmod 0700 /run/s3 /run/mqtt \
 && chown sensorwatch:sensorwatch /app
# Only the Spark connector jars: containers use the apache/kafka image, not the Maven
# broker jars.
COPY --from=build /app/.cache/jars/spark /app/.cache/jars/spark
COPY --from=engine /app/engine/sensorwatch-bridge /usr/local/bin/sensorwatch-bridge
COPY . .
COPY --from=build /app/.env .env
# scripts/* run the set-up when the venv is missing; the image never needs the browser,
# nor Alertmanager or Prometheus (compose runs the official prom/alertmanager and
# prom/prometheus images), nor Mosquitto (the bridge connects to a broker, runs none).
ENV PATH=/app/.venv/bin:$PATH \
    SENSORWATCH_NO_BROWSER=1 \
    SENSORWATCH_NO_ALERTMANAGER=1 \
    SENSORWATCH_NO_PROMETHEUS=1 \
    SENSORWATCH_NO_MOSQUITTO=1 \
    SENSORWATCH_NO_BRIDGE_ENGINE=1 \
    SENSORWATCH_BRIDGE_ENGINE=/usr/local/bin/sensorwatch-bridge
USER sensorwatch
CMD ["python", "-m", "jobs.stream", "--help"]
