"""Real redis-server and PostgreSQL processes on loopback, for the cluster tests, the
benchmarks and ``make run-cluster``.

Each server runs from a fresh temporary directory on a free port and is stopped
(and its directory removed) by ``stop()``. Readiness is the server's own "ready"
line on its output, not a guess. PostgreSQL refuses to run as root, so as root
its directory belongs to the ``postgres`` user that Debian's package creates.
"""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

READY_SECONDS = 30
POSTGRES_BIN_DIRS = [Path("/usr/lib/postgresql") / v / "bin" for v in ("17", "16", "15", "14", "13")]


class ServiceError(RuntimeError):
    """A server could not be started; the message includes what it printed."""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _await_line(process, marker, what):
    """Read the server's output until ``marker`` appears; keep draining it afterwards."""
    seen, ready = [], threading.Event()

    def drain():
        for line in iter(process.stdout.readline, ""):
            if len(seen) < 200:
                seen.append(line)
            if marker in line:
                ready.set()
        ready.set()  # the output ended: the process is gone

    threading.Thread(target=drain, daemon=True, name=f"{what}-output").start()
    if not ready.wait(READY_SECONDS) or process.poll() is not None:
        process.kill()
        raise ServiceError(f"{what} did not start:\n{''.join(seen)}")


def _stop(process, timeout=10):
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class RedisServer:
    port: int = field(default_factory=free_port)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="console-redis-")))
    process: subprocess.Popen | None = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceError("redis-server is not installed (Debian: apt-get install redis-server; .ci/run does it)")
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
                "--loglevel",
                "notice",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        _await_line(self.process, "Ready to accept connections", "redis-server")
        return self

    def stop(self):
        _stop(self.process)
        self.process = None

    def restart(self):
        """Stop and start again on the same port: every client's connection breaks, all data is gone."""
        self.stop()
        return self.start()

    def close(self):
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def postgres_bin(name):
    for directory in POSTGRES_BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    found = shutil.which(name)
    if found is None:
        raise ServiceError(f"{name} is not installed (Debian: apt-get install postgresql; .ci/run does it)")
    return found


@dataclass
class PostgresServer:
    """A throw-away cluster: trust authentication on loopback, fsync off (tests and benchmarks only).

    ``durable=True`` keeps PostgreSQL's crash safety (fsync and the rest on), for a data directory
    that is kept (``make run-cluster``).
    """

    port: int = field(default_factory=free_port)
    user: str = "console"
    database: str = "console"
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="console-pg-")))
    process: subprocess.Popen | None = None
    durable: bool = False

    @property
    def url(self):
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def _as_owner(self, argv):
        if os.geteuid() != 0:
            return argv
        return ["runuser", "-u", "postgres", "--", *argv]

    def start(self):
        data = self.workdir / "data"
        if not data.exists():  # else a kept data directory (make run-cluster)
            if os.geteuid() == 0:
                owner = pwd.getpwnam("postgres")
                os.chown(self.workdir, owner.pw_uid, owner.pw_gid)
            subprocess.run(
                self._as_owner(
                    [
                        postgres_bin("initdb"),
                        "-D",
                        str(data),
                        "-U",
                        self.user,
                        "--auth=trust",
                        "--encoding=UTF8",
                        "--locale=C",
                        "--no-sync",
                    ]
                ),
                check=True,
                capture_output=True,
                text=True,
            )
        fast = [] if self.durable else ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        self.process = subprocess.Popen(
            self._as_owner(
                [
                    postgres_bin("postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.workdir),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    *fast,
                    "-c",
                    "max_connections=200",
                ]
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        _await_line(self.process, "database system is ready to accept connections", "postgres")
        if not self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'", database="postgres"):
            subprocess.run(
                [postgres_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, self.database],
                check=True,
                capture_output=True,
                text=True,
            )
        return self

    def psql(self, sql, database=None):
        """Run ``sql`` with psql (in ``database``, default the server's own) and return its output (tuples only, unaligned)."""
        result = subprocess.run(
            [
                postgres_bin("psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                self.user,
                "-d",
                database or self.database,
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return result.stdout

    def stop(self):
        _stop(self.process)
        self.process = None

    def halt(self):
        """PostgreSQL's fast shutdown (SIGINT to the postmaster), with clients still connected: their
        connections break at once (``stop``'s SIGTERM, a smart shutdown, waits for them to leave)."""
        postmaster = int((self.workdir / "data" / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGINT)
        self.process.wait(timeout=30)
        self.process = None

    def close(self):
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
