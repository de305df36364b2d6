# The console's image: daphne serving toolnexus_site.asgi as a non-root user, static files collected
# at build. compose.yaml runs it with PostgreSQL, Redis and a proxy (docs/operations.md, "Containers
# and a proxy"); deploy/entrypoint.sh says what each mode (serve, migrate, manage, healthcheck) does.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --system --user-group --uid 10001 --home-dir /app --no-create-home --shell /usr/sbin/nologin console
WORKDIR /app

# The runtime dependencies first, read from pyproject.toml alone: a code change keeps this layer.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The code runs from /app (manage.py, templates/ and static/ beside it); .dockerignore keeps the rest out.
COPY . .
# Collected as root, so the console's user cannot change what it serves; var/ itself is its own
# (the embedded SQLite database, when no DATABASE_URL is given).
RUN python manage.py collectstatic --noinput \
    && mkdir -p var \
    && chown console:console var

# From here on the settings refuse to start without a secret key, allowed hosts, audit keys and a signing key.
ENV CONSOLE_ENV=production
USER console
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/app/deploy/entrypoint.sh", "healthcheck"]
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["serve"]
