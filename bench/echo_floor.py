"""The floor the realtime benchmarks are compared with: the raw ``websockets`` library on loopback.

    .venv/bin/python bench/echo_floor.py serve      # prints "listening <port>", serves until stdin closes
    .venv/bin/python bench/echo_floor.py            # starts one and prints the floor it measures

The server runs in its own process, as daphne does, and does the least a server can:
it echoes every text frame back, and a frame starting with ``broadcast `` goes to every
connected client at once (``websockets.broadcast``) with the server's ``time.time_ns()``
in front, so each client can tell how long the push took.
"""

import asyncio
import contextlib
import subprocess
import sys
import time
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.asyncio.server import broadcast, serve

BROADCAST = "broadcast "
START_SECONDS = 10.0
FRAME_TIMEOUT_SECONDS = 5.0


async def _serve_until_stdin_closes():
    clients = set()

    async def handler(socket):
        clients.add(socket)
        try:
            async for message in socket:
                if message.startswith(BROADCAST):
                    broadcast(clients, f"{time.time_ns()} {message[len(BROADCAST) :]}")
                else:
                    await socket.send(message)
        finally:
            clients.discard(socket)

    async with serve(handler, "127.0.0.1", 0, max_size=None, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening {port}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


@contextlib.contextmanager
def echo_server():
    """The echo server in a child process; yields its ``ws://`` URL and stops it when the block ends."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = _read_line(process, START_SECONDS)
        if not line.startswith("listening "):
            raise RuntimeError(f"the echo server did not start: {line!r}")
        yield f"ws://127.0.0.1:{int(line.split()[1])}/"
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _read_line(process, seconds):
    import threading

    lines = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    return lines[0].strip() if lines else ""


async def round_trips(url, payload, count):
    """Send ``payload`` and wait for its echo, ``count`` times; returns the round trips in ms."""
    samples = []
    async with connect(url, max_size=None, compression=None) as socket:
        for _ in range(10):  # warm-up
            await socket.send(payload)
            await asyncio.wait_for(socket.recv(), FRAME_TIMEOUT_SECONDS)
        for _ in range(count):
            began = time.perf_counter_ns()
            await socket.send(payload)
            await asyncio.wait_for(socket.recv(), FRAME_TIMEOUT_SECONDS)
            samples.append((time.perf_counter_ns() - began) / 1e6)
    return samples


async def broadcast_arrivals(url, payload, clients, rounds, gap_seconds=0.02):
    """One frame pushed to ``clients`` sockets at once, ``rounds`` times; returns every arrival in ms
    (the server's stamp before it sends to the client's receipt) and the time to connect them all."""
    began = time.perf_counter()
    sockets = [await connect(url, max_size=None, compression=None) for _ in range(clients)]
    connect_seconds = time.perf_counter() - began
    samples = []
    try:
        for _ in range(rounds):
            arrivals = [asyncio.ensure_future(_arrival(s)) for s in sockets]
            await sockets[0].send(BROADCAST + payload)
            samples += await asyncio.wait_for(asyncio.gather(*arrivals), FRAME_TIMEOUT_SECONDS)
            await asyncio.sleep(gap_seconds)
    finally:
        await asyncio.gather(*(s.close() for s in sockets), return_exceptions=True)
    return samples, connect_seconds


async def _arrival(socket):
    message = await socket.recv()
    at = time.time_ns()
    return (at - int(message.split(" ", 1)[0])) / 1e6


def main():
    if sys.argv[1:] == ["serve"]:
        asyncio.run(_serve_until_stdin_closes())
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from longpoll import percentile

    payload = "x" * 2048
    with echo_server() as url:
        echo = asyncio.run(round_trips(url, payload, 1000))
        push, _ = asyncio.run(broadcast_arrivals(url, payload, 1, 200))
        fan, connected = asyncio.run(broadcast_arrivals(url, payload, 100, 20))
    for label, samples in (("echo round trip", echo), ("push to 1 client", push), ("push to 100 clients", fan)):
        print(f"{label:22s} p50 {percentile(samples, 0.5):.3f} ms  p99 {percentile(samples, 0.99):.3f} ms")
    print(f"100 clients connected in {connected * 1000:.0f} ms")


if __name__ == "__main__":
    main()
