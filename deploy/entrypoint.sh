#!/bin/sh
# The console image's entry point (Dockerfile, compose.yaml; docs/operations.md, "Containers and a proxy").
#
#   serve [daphne options]   serve the console with daphne on CONSOLE_BIND:CONSOLE_PORT (0.0.0.0:8000)
#   migrate                  apply the database migrations once, then exit
#   manage <command> [...]   any manage.py command (createsuperuser, issue_token, reseal_audit, ...)
#   healthcheck              exit 0 when this container's /healthz answers 200 (the image's HEALTHCHECK)
#
# DATABASE_URL, REDIS_URL and CONSOLE_AUDIT_KEYS may come from a file instead, named by the same
# variable with _FILE (compose's secrets); DJANGO_SECRET_KEY_FILE is read by the settings themselves.
set -eu
cd "$(dirname "$0")/.."

for name in DATABASE_URL REDIS_URL CONSOLE_AUDIT_KEYS; do
  file=$(printenv "${name}_FILE" || true)
  if [ -n "$file" ]; then
    if [ -n "$(printenv "$name" || true)" ]; then
      echo "entrypoint: both $name and ${name}_FILE are set; keep one." >&2
      exit 64
    fi
    value=$(cat "$file")
    export "$name=$value"
    unset "${name}_FILE"
  fi
done

mode=${1:-}
[ $# -gt 0 ] && shift
case "$mode" in
  serve)
    # exec: daphne replaces this shell, so the container's SIGTERM reaches it. No --proxy-headers:
    # X-Forwarded-For counts only from CONSOLE_TRUSTED_PROXIES (approvals/web/proxy_headers.py).
    exec daphne -b "${CONSOLE_BIND:-0.0.0.0}" -p "${CONSOLE_PORT:-8000}" "$@" toolnexus_site.asgi:application
    ;;
  migrate)
    exec python manage.py migrate --noinput "$@"
    ;;
  manage)
    exec python manage.py "$@"
    ;;
  healthcheck)
    exec python -c '
import os, sys, urllib.request
url = "http://127.0.0.1:%s/healthz" % os.environ.get("CONSOLE_PORT", "8000")
try:
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=4).close()
except Exception as exc:
    sys.exit(f"{url}: {exc}")
'
    ;;
  *)
    echo "entrypoint: unknown mode '${mode}'. Use serve, migrate, manage <command> or healthcheck." >&2
    exit 64
    ;;
esac
