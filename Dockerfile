# Arbiter's image (docs/deploy.md, "Containers"): gunicorn on :8000 as a non-root user, static
# files collected at build. The same image runs a web node (default), a Celery worker
# (`celery -A config worker`), beat and the one-shot `manage.py migrate` (compose.yaml).
# Not built on the project's CI machines (no image registry there); the loopback cluster
# (deploy/cluster/) runs the same processes from Debian and PyPI packages.

# 1. htmx and ECharts from npm (package-lock.json), the only front-end dependencies (ECharts: served
#    to rendered pages that load it from a CDN, docs/rendering.md "ECharts from the npm copy").
FROM node:22-bookworm-slim AS assets
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --silent

# 2. The virtualenv: the project and its runtime dependencies (no dev extra).
FROM python:3.13-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY pyproject.toml README.md ./
COPY config config
COPY stats stats
COPY rule_score rule_score
COPY annotation annotation
COPY objective objective
COPY calibration calibration
COPY judges judges
COPY kind_reports kind_reports
COPY ranking ranking
COPY demo demo
RUN pip install .
COPY . .
COPY --from=assets /src/node_modules/htmx.org/dist node_modules/htmx.org/dist
COPY --from=assets /src/node_modules/echarts/dist node_modules/echarts/dist
# collectstatic at build: the hashed, compressed files WhiteNoise serves (a throwaway key: no
# secret is baked into the image).
RUN DJANGO_SETTINGS_MODULE=config.settings.production DJANGO_SECRET_KEY=build-only-collectstatic \
    STATIC_ROOT=/app/staticfiles python manage.py collectstatic --noinput -v 0

# 3. The runtime: the venv, the code and the collected static files; nothing to build with.
FROM python:3.13-slim-bookworm AS runtime
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=config.settings.production STATIC_ROOT=/app/staticfiles \
    MEDIA_ROOT=/var/lib/arbiter/media
# arbiter-render: the browser's own user when a render runs as root (docs/rendering.md "Isolation").
RUN groupadd --system --gid 10001 arbiter \
    && useradd --system --uid 10001 --gid arbiter --home-dir /app --shell /usr/sbin/nologin arbiter \
    && groupadd --system --gid 10002 arbiter-render \
    && useradd --system --uid 10002 --gid arbiter-render --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin arbiter-render \
    && mkdir -p /var/lib/arbiter/media && chown arbiter:arbiter /var/lib/arbiter/media
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=arbiter:arbiter /app /app
WORKDIR /app
USER arbiter
EXPOSE 8000
# gunicorn.conf.py: the measured layout (cores + 1 processes x 2 threads, the balanced worker).
ENTRYPOINT ["gunicorn", "-c", "gunicorn.conf.py", "-b", "0.0.0.0:8000"]
