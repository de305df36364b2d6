# The proxy's image: Debian's nginx, the package tests/support/proxy.py runs, with deploy/nginx.conf.
# The master process opens the logs and the listening socket; its workers run as www-data.
FROM debian:bookworm-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends nginx \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/nginx.conf /etc/nginx/nginx.conf
EXPOSE 8080
STOPSIGNAL SIGQUIT
CMD ["nginx", "-e", "stderr", "-g", "daemon off;"]
