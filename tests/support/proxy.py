"""The shipped proxy in front of live consoles: Debian's nginx running deploy/nginx.conf.

``nginx_proxy(upstream_ports)`` starts nginx in the foreground on a free loopback port, in front of the
consoles on those ports, and yields a ``Proxy`` (``url``, ``port``, ``upstreams()``); it stops nginx when
the block ends. The configuration is deploy/nginx.conf, the file compose.yaml's proxy uses, with two
changes made by ``render_config`` and nothing else: where it listens and which consoles it proxies to.

The consoles must trust the proxy's address, 127.0.0.1, to believe its X-Forwarded-For
(``CONSOLE_TRUSTED_PROXIES=127.0.0.1``). Clients connecting from other loopback addresses
(``tests.support.live_console.ClientAt(proxy, "127.0.0.2")``: Linux accepts any 127/8 source) are
then told apart behind it.

As in the container, the master process runs as whoever runs the tests and its workers as www-data
(the config's ``user``; ignored, with a warning, when the tests do not run as root).
"""

import contextlib
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.live_console import START_DEADLINE_SECONDS, free_port

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "deploy" / "nginx.conf"
ARTIFACTS = REPO / "test-artifacts"
LISTEN = re.compile(r"^(\s*)listen 8080;$", re.MULTILINE)
UPSTREAM_SERVERS = re.compile(r"^(\s*)server [\w.-]+:\d+;\n(?:\s*server [\w.-]+:\d+;\n)*", re.MULTILINE)
UPSTREAM_LOGGED = re.compile(r" upstream=(\S+)")


class ProxyError(RuntimeError):
    """nginx is missing, or would not start; the message has what it printed."""


def render_config(template, *, port, upstream_ports):
    """deploy/nginx.conf listening on 127.0.0.1:``port`` in front of the consoles on ``upstream_ports``."""
    config, listens = LISTEN.subn(rf"\g<1>listen 127.0.0.1:{port};", template)

    def servers(match):
        return "".join(f"{match.group(1)}server 127.0.0.1:{upstream};\n" for upstream in upstream_ports)

    config, upstreams = UPSTREAM_SERVERS.subn(servers, config)
    # The shipped file changed shape: fail here, never test a config other than the one shipped.
    assert (listens, upstreams) == (1, 1), f"{CONFIG} no longer has one 'listen 8080;' and one upstream server list"
    return config


@dataclass
class Proxy:
    port: int
    log_path: Path
    lines: list = field(default_factory=list)  # what nginx printed: its access log, then any error

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def upstreams(self):
        """The upstream ports the access log names, one per proxied request, in order."""
        found = (UPSTREAM_LOGGED.search(line) for line in list(self.lines))
        return [int(match.group(1).rpartition(":")[2]) for match in found if match and match.group(1) != "-"]


def _wait_until_listening(process, proxy, drain):
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while process.poll() is None and time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)  # waiting for a socket to open: a short bounded poll
    if process.poll() is not None:
        drain.join(timeout=5)  # all it printed before it exited
    raise ProxyError(f"nginx did not listen on port {proxy.port} (exit {process.poll()}):\n{''.join(proxy.lines)}")


def _drain(process, proxy):
    with open(proxy.log_path, "w") as log:
        for line in iter(process.stdout.readline, ""):
            proxy.lines.append(line)
            log.write(line)
            log.flush()


@contextlib.contextmanager
def nginx_proxy(upstream_ports, *, name="proxy"):
    """Serve deploy/nginx.conf in front of ``upstream_ports`` until the block ends; yields the ``Proxy``."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(binary).exists():
        raise ProxyError("nginx is not installed (Debian: apt-get install nginx; .ci/run does it)")
    workdir = Path(tempfile.mkdtemp(prefix="console-proxy-"))
    ARTIFACTS.mkdir(exist_ok=True)
    proxy = Proxy(port=free_port(), log_path=ARTIFACTS / f"{name}-nginx.log")
    config = workdir / "nginx.conf"
    config.write_text(render_config(CONFIG.read_text(), port=proxy.port, upstream_ports=upstream_ports))
    process = subprocess.Popen(
        # -e stderr: no error log file; -g: a pid file of its own and the foreground, as the image's CMD.
        [binary, "-e", "stderr", "-p", str(workdir), "-c", str(config), "-g", f"pid {workdir}/nginx.pid; daemon off;"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    drain = threading.Thread(target=_drain, args=(process, proxy), daemon=True, name=f"{name}-output")
    drain.start()
    try:
        _wait_until_listening(process, proxy, drain)
        yield proxy
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        drain.join(timeout=5)
        shutil.rmtree(workdir, ignore_errors=True)
