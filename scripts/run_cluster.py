"""``make run-cluster``: two console processes sharing a local PostgreSQL and Redis, until Ctrl-C.

Starts redis-server and postgres on free loopback ports (tests/support/services.py, the servers the
cluster tests use), migrates, ensures the demo user, and serves the console under daphne on
127.0.0.1:PORT and 127.0.0.1:PORT+1, the way ``make run`` serves one. PostgreSQL's data lives in var/cluster/
and survives restarts (with fsync on); Redis only carries notifications, so it starts empty.
Each console's log is var/cluster/console-<port>.log; var/cluster/env has the two URLs, for
``manage.py`` against the same database: ``env $(cat var/cluster/env) .venv/bin/python manage.py shell``.
"""

import argparse
import contextlib
import signal
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.live_console import console_env, daphne_process, manage  # noqa: E402
from tests.support.services import PostgresServer, RedisServer, ServiceError  # noqa: E402

DATA = REPO / "var" / "cluster"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000, help="the first console's port; the second gets the next one")
    options = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)  # `kill` stops the servers too, in order
    (DATA / "postgres").mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            redis = RedisServer().start()  # in a temporary directory: it keeps nothing
            stack.callback(redis.close)
            postgres = PostgresServer(workdir=DATA / "postgres", durable=True).start()
            stack.callback(postgres.stop)
        except ServiceError as exc:
            sys.exit(f"run-cluster: {exc}")
        urls = {"DATABASE_URL": postgres.url, "REDIS_URL": redis.url}
        (DATA / "env").write_text("".join(f"{name}={url}\n" for name, url in urls.items()))
        env = console_env(DATA / "unused.sqlite3", CONSOLE_DEMO_LOGIN_FILE=str(DATA / "demo-login.txt"), **urls)
        try:
            manage(env, "migrate", "--noinput")
            print(manage(env, "ensure_demo_user", "--url", f"http://127.0.0.1:{options.port}/").strip())
            consoles = [
                stack.enter_context(daphne_process(env, DATA / f"console-{port}.log", port=port))
                for port in (options.port, options.port + 1)
            ]
        except RuntimeError as exc:  # manage.py or daphne failed: what it printed says why
            sys.exit(f"run-cluster: {exc}")
        print(f"PostgreSQL {postgres.url} (data in {DATA / 'postgres'}), Redis {redis.url}")
        for console in consoles:
            print(
                f"console pid {console.pid}: http://127.0.0.1:{console.port}/  (log: {DATA}/console-{console.port}.log)"
            )
        print("Both serve the same dashboard; stop one and the other takes over its runs. Ctrl-C stops everything.")
        exited = threading.Event()
        for console in consoles:
            threading.Thread(target=_tell_when_exited, args=(console, exited), daemon=True).start()
        try:
            exited.wait()
        except KeyboardInterrupt:
            print("\nstopping")
            return
        gone = next(c for c in consoles if c.poll() is not None)
        sys.exit(f"run-cluster: the console on port {gone.port} exited ({gone.returncode}); see its log. Stopping.")


def _stop_like_ctrl_c(signum, frame):
    raise KeyboardInterrupt


def _tell_when_exited(process, exited):
    process.wait()
    exited.set()


if __name__ == "__main__":
    main()
