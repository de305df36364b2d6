"""How quickly a waiting long-poll returns once its request is answered: p50 / p99 over N rounds.

    .venv/bin/python bench/longpoll.py            # starts its own daphne on a free port
    .venv/bin/python bench/longpoll.py -n 200 --target-ms 100
    .venv/bin/python bench/longpoll.py --base-url http://127.0.0.1:8000 --host-token T --reviewer-token T

Each round a host opens a request and long-polls its answer (wait=30) while a
reviewer answers it. The latency is from the moment the answer is sent to the
moment the long-poll's response arrives, so it includes the answer's own write.
It also prints the answer call's own share, and what is left: the wake-up.
The console it starts re-reads the database only every 30 s
(CONSOLE_SAFETY_POLL_SECONDS), so a fast return can only be the wake-up on the
resolving event. Exits 1 when p99 is over --target-ms.
"""

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
# Time for the long-poll to reach the server and park before the answer is sent.
PARK_SECONDS = 0.05


def call(base_url, token, method, path, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(base_url + path, data=data, headers=headers, method=method)
    with OPENER.open(request, timeout=timeout) as response:
        return response.status, json.loads(response.read())


def one_round(base_url, host_token, reviewer_token, request_id):
    status, _ = call(
        base_url, host_token, "POST", "/api/v1/requests", {"id": request_id, "kind": "approval", "prompt": "Bench?"}
    )
    assert status == 201, status
    returned = {}

    def long_poll():
        returned["status"], returned["body"] = call(
            base_url, host_token, "GET", f"/api/v1/requests/{request_id}/answer?wait=30"
        )
        returned["at"] = time.perf_counter()

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(PARK_SECONDS)
    sent_at = time.perf_counter()
    call(base_url, reviewer_token, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True})
    answered_at = time.perf_counter()
    poller.join(timeout=60)
    assert returned.get("status") == 200 and returned["body"]["ok"] is True, returned
    return returned["at"] - sent_at, answered_at - sent_at


def percentile(samples, fraction):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@contextlib.contextmanager
def console(args):
    if args.base_url:
        yield args.base_url, args.host_token, args.reviewer_token
        return
    from tests.support.live_console import live_console

    with tempfile.TemporaryDirectory() as workdir:
        log = Path(workdir) / "daphne.log"
        with live_console(workdir, log, CONSOLE_SAFETY_POLL_SECONDS="30") as live:
            yield live.base_url, live.host_token, live.reviewer_token


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=50, help="rounds (default 50)")
    parser.add_argument("--target-ms", type=float, default=100.0, help="p99 above this exits 1 (default 100)")
    parser.add_argument("--base-url", help="an already running console (default: start one)")
    parser.add_argument("--host-token", help="with --base-url: the token that opens and polls")
    parser.add_argument("--reviewer-token", help="with --base-url: the token that answers")
    args = parser.parse_args()
    if args.base_url and not (args.host_token and args.reviewer_token):
        parser.error("--base-url needs --host-token and --reviewer-token")

    with console(args) as (base_url, host_token, reviewer_token):
        one_round(base_url, host_token, reviewer_token, f"bench-warmup-{time.time_ns()}")
        run = time.time_ns()
        rounds = [one_round(base_url, host_token, reviewer_token, f"bench-{run}-{i}") for i in range(args.n)]

    ms = [latency * 1000 for latency, _ in rounds]
    answer_ms = [answering * 1000 for _, answering in rounds]
    p50, p99 = percentile(ms, 0.50), percentile(ms, 0.99)
    print(
        f"answer sent -> long-poll returned, {args.n} rounds: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
        f"mean {statistics.mean(ms):.1f} ms, max {max(ms):.1f} ms"
    )
    wake_ms = [total - answering for total, answering in zip(ms, answer_ms)]
    print(
        f"  of which the answer call itself: p50 {percentile(answer_ms, 0.5):.1f} ms, "
        f"p99 {percentile(answer_ms, 0.99):.1f} ms"
    )
    print(
        f"  and the wake-up after its response: p50 {percentile(wake_ms, 0.5):.1f} ms, "
        f"p99 {percentile(wake_ms, 0.99):.1f} ms (negative: the poll returned first)"
    )
    verdict = "within" if p99 <= args.target_ms else "OVER"
    print(f"p99 {verdict} the {args.target_ms:g} ms target")
    return 0 if p99 <= args.target_ms else 1


if __name__ == "__main__":
    sys.exit(main())
