"""The realtime measurements against a live console (daphne in its own process), one function each.

Every latency is the difference of two ``time.time_ns()`` stamps taken in two
processes of one machine: one where the tool is (bench/bench_tools.py), one where the
dashboard socket or the API client is (bench/dashboards.py). Every wait has a deadline.
"""

import asyncio
import json
import queue
import threading
import time

from dashboards import ApiClient, Dashboard, event

# A reviewer is slower than this: the run is parked in its wait before the answer or cancel is sent.
PARK_SECONDS = 0.02
# Between fan-out rounds, so the 100 sockets have drained the last round's frames.
FANOUT_GAP_SECONDS = 0.1
RUN_FINISHED_SECONDS = 60.0


async def start_run(api, tool, **args):
    status, run = await asyncio.to_thread(api.call, "POST", "/api/v1/runs", {"tool": tool, "args": args, "timeout": 60})
    if status != 201:
        raise RuntimeError(f"could not start {tool}: HTTP {status} {run}")
    return run["id"]


async def suspension_and_answer(dashboard, api, rounds):
    """Per round: a run suspends (-> its request.opened on the dashboard), then the dashboard answers
    it (-> the tool's retry starts). Returns both latencies in ms, the frame size, and what was lost."""
    to_dashboard, to_resumed, sizes, lost = [], [], [], 0
    for i in range(rounds):
        since = dashboard.mark()
        run_id = await start_run(api, "bench_suspend", round=i)
        received_ns, opened, size = await dashboard.next_frame(event("request.opened", run=run_id), since=since)
        to_dashboard.append((received_ns - opened["request"]["data"]["suspended_ns"]) / 1e6)
        sizes.append(size)
        await asyncio.sleep(PARK_SECONDS)
        sent_ns = await dashboard.send(
            {"type": "answer", "request": opened["request"]["id"], "ok": True, "ref": f"a{i}"}
        )
        _, finished, _ = await dashboard.next_frame(event("run.finished", run=run_id), since=since)
        run = finished["run"]
        if run["status"] != "succeeded":
            lost += 1
            continue
        to_resumed.append((json.loads(run["result"]["output"])["resumed_ns"] - sent_ns) / 1e6)
        dashboard.frames.clear()
    return {"to_dashboard": to_dashboard, "to_resumed": to_resumed, "frame_bytes": max(sizes), "lost": lost}


async def cancel_observed(dashboard, api, tool, rounds):
    """Per round: a run of ``tool`` parks on its token, the dashboard sends cancel_run, the tool stamps
    the moment it sees the trip. Returns those latencies in ms and the rounds that did not end cancelled."""
    samples, lost, unparked = [], 0, 0
    for i in range(rounds):
        since = dashboard.mark()
        run_id = await start_run(api, tool)
        await dashboard.next_frame(event("run.started", run=run_id), since=since)
        await asyncio.sleep(PARK_SECONDS)
        sent_ns = await dashboard.send({"type": "cancel_run", "run": run_id, "ref": f"c{i}"})
        _, finished, _ = await dashboard.next_frame(event("run.finished", run=run_id), since=since)
        run = finished["run"]
        if run["status"] != "cancelled" or not run["result"]:
            lost += 1
            continue
        stamps = json.loads(run["result"]["output"])
        if stamps["parked_ns"] > sent_ns:
            unparked += 1  # the tool was not waiting yet: not a measurement of the wake-up
            continue
        samples.append((stamps["observed_ns"] - sent_ns) / 1e6)
        dashboard.frames.clear()
    return {"samples": samples, "lost": lost, "not_parked": unparked}


async def fan_out(base_url, session, dashboard, api, count, rounds):
    """One request.opened event to ``count`` dashboards (``dashboard`` among them), ``rounds`` times.

    Returns every arrival in ms (tool's stamp -> socket's receipt), the slowest socket of each
    round, and how long connecting the other sockets took.
    """
    began = time.perf_counter()
    others = [await Dashboard.open(base_url, session) for _ in range(count - 1)]
    connect_seconds = time.perf_counter() - began
    sockets = [dashboard, *others]
    arrivals, slowest, lost = [], [], 0
    try:
        for i in range(rounds):
            marks = [s.mark() for s in sockets]
            run_id = await start_run(api, "bench_suspend", round=10_000 + i)
            seen = await asyncio.gather(
                *(s.next_frame(event("request.opened", run=run_id), since=m) for s, m in zip(sockets, marks))
            )
            round_ms = [
                (received_ns - frame["request"]["data"]["suspended_ns"]) / 1e6 for received_ns, frame, _ in seen
            ]
            arrivals += round_ms
            slowest.append(max(round_ms))
            await dashboard.send({"type": "answer", "request": seen[0][1]["request"]["id"], "ok": True, "ref": f"f{i}"})
            _, finished, _ = await dashboard.next_frame(event("run.finished", run=run_id), since=marks[0])
            lost += finished["run"]["status"] != "succeeded"
            await asyncio.sleep(FANOUT_GAP_SECONDS)
            for s in sockets:
                s.frames.clear()
    finally:
        await asyncio.gather(*(s.close() for s in others), return_exceptions=True)
    return {"arrivals": arrivals, "slowest_per_round": slowest, "connect_seconds": connect_seconds, "lost": lost}


def _answer_all(base_url, token, request_ids, clients, deadline):
    """Answer every request from ``clients`` threads, each on its own keep-alive connection.

    Returns the per-answer call times (ms), the seconds from the first call to the last
    response, and the answers that were not a 200.
    """
    work = queue.Queue()
    for request_id in request_ids:
        work.put(request_id)
    latencies, refused, lock = [], [], threading.Lock()

    def client():
        api = ApiClient(base_url, token)
        try:
            while time.monotonic() < deadline:
                try:
                    request_id = work.get_nowait()
                except queue.Empty:
                    return
                began = time.perf_counter()
                status, body = api.call("POST", f"/api/v1/requests/{request_id}/answer", {"ok": True})
                took = (time.perf_counter() - began) * 1000
                with lock:
                    (latencies.append(took) if status == 200 else refused.append((request_id, status, body)))
        finally:
            api.close()

    threads = [threading.Thread(target=client, name=f"answerer-{n}") for n in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + 5)
    return latencies, time.perf_counter() - began, refused


async def answers_per_second(base_url, dashboard, api, reviewer_token, runs, clients, seconds):
    """Sustained answers through the API: ``runs`` runs wait, then ``clients`` reviewers answer them
    all at once; each answer resumes its run. Counts answers/s (the API's 200s), resumed/s (to the
    dashboard's last run.finished), and every run that did not end succeeded."""
    deadline = time.monotonic() + seconds
    opening = time.perf_counter()
    since = dashboard.mark()
    run_ids = set()
    for i in range(runs):  # opened one after another, as start_run measures elsewhere
        run_ids.add(await start_run(api, "bench_suspend", round=20_000 + i))
    requests = {}
    while len(requests) < runs:
        _, frame, _ = await dashboard.next_frame(
            lambda f: (
                f.get("action") == "request.opened" and f.get("run_id") in run_ids and f["run_id"] not in requests
            ),
            since=since,
        )
        requests[frame["run_id"]] = frame["request"]["id"]
    opened_seconds = time.perf_counter() - opening

    since = dashboard.mark()
    answering = time.perf_counter()
    latencies, answer_seconds, refused = await asyncio.to_thread(
        _answer_all, base_url, reviewer_token, list(requests.values()), clients, deadline
    )
    finished = {}
    while len(finished) < len(latencies) and time.monotonic() < deadline + RUN_FINISHED_SECONDS:
        received_ns, frame, _ = await dashboard.next_frame(
            lambda f: f.get("action") == "run.finished" and f.get("run_id") in run_ids and f["run_id"] not in finished,
            since=since,
            timeout=RUN_FINISHED_SECONDS,
        )
        finished[frame["run_id"]] = frame["run"]["status"]
    resumed_seconds = time.perf_counter() - answering
    succeeded = sum(status == "succeeded" for status in finished.values())
    dashboard.frames.clear()
    return {
        "runs": runs,
        "clients": clients,
        "opened_seconds": opened_seconds,
        "answered": len(latencies),
        "answer_seconds": answer_seconds,
        "answers_per_second": len(latencies) / answer_seconds,
        "answer_call_ms": latencies,
        "resumed_seconds": resumed_seconds,
        "resumed_per_second": succeeded / resumed_seconds,
        "succeeded": succeeded,
        "refused": len(refused),
        "lost": runs - succeeded,
    }
