"""The log and access log of a live console under daphne: one JSON object per line, each line once, no secret.

One console (CONSOLE_LOG_FORMAT=json, CONSOLE_LOG_LEVEL=DEBUG, so every line a library writes is searched
too) is driven through what puts secrets in reach of a log: a login with a planted password, bearer
tokens good and bad, a planted DJANGO_SECRET_KEY, an input answer's value, a policy webhook whose URL
carries its secret and fails to deliver, and tokens in query strings (HTTP and socket). It is stopped, so
every queued line is written, then its whole output (daphne's stdout and stderr) is searched.
"""

import asyncio
import json
import re
import time
import urllib.request
from pathlib import Path

import pytest
import websockets

from tests.support.live_console import ClientAt, free_port, live_console, manage, poll, start

pytestmark = pytest.mark.django_db(transaction=True)

PLANTED = {
    "password": "planted-Password-71c4e",
    "wrong password": "planted-Wrong-pass-3b9a",
    "bearer token": "tnx_plantedBearer0e58c2",
    "secret key": "planted-secret-key-8d7f1b2e6a4c9d0f3e5b7a1c8d2f4e6a9b0c",
    "input answer": "Planted Input Value 4f2a",
    "webhook secret": "planted-webhook-secret-a61f",
    "query token": "tnx_plantedQueryToken77e1",
    "socket query token": "tnx_plantedSocketToken5c3d",
}
SIGNUP = {"name": PLANTED["input answer"], "email": "ops@example.com", "seats": 5, "plan": "team", "regions": ["eu"]}


def get_with_header(console, path, token):
    request = urllib.request.Request(console.base_url + path, headers={"Authorization": f"Bearer {token}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        return response.headers["X-Request-ID"], json.loads(response.read())


async def socket_with_query_token(port, token):
    try:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/host/?token={token}", open_timeout=10):
            return "open"
    except websockets.InvalidStatus as refused:
        return refused.response.status_code


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """Drive the console, stop it, and hand over what happened and its whole log."""
    artifacts = Path(__file__).resolve().parents[2] / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    log_path = artifacts / "live-logs-daphne.log"
    closed_port = free_port()  # nothing listens there: the webhook's delivery fails and is logged
    happened = {}
    with live_console(
        tmp_path_factory.mktemp("logs"),
        log_path,
        CONSOLE_LOG_FORMAT="json",
        CONSOLE_LOG_LEVEL="DEBUG",
        DJANGO_SECRET_KEY=PLANTED["secret key"],
        CONSOLE_WEBHOOK_ATTEMPTS="1",
        # A policy in the settings, there from the start: one saved while the console runs applies within the
        # policies' cache time (policies.CACHE_SECONDS), and the request's opening might come sooner.
        CONSOLE_POLICIES=json.dumps(
            [
                {
                    "name": "signups",
                    "tool": "signup",
                    "webhook_url": f"http://127.0.0.1:{closed_port}/hooks/{PLANTED['webhook secret']}",
                }
            ]
        ),
    ) as console:
        manage(
            console.env,
            "shell",
            "--no-imports",
            "-c",
            "from django.contrib.auth.models import User\n"
            f"User.objects.create_user('planter', password={PLANTED['password']!r})\n",
        )
        browser = ClientAt(console, "127.0.0.41")
        happened["wrong login"] = browser.log_in("planter", PLANTED["wrong password"])[0]
        happened["login"] = browser.log_in("planter", PLANTED["password"])[0]
        happened["bad bearer"] = console.call("GET", "/api/v1/requests", token=PLANTED["bearer token"])[0]
        happened["query token"] = console.call("GET", f"/api/v1/requests?token={PLANTED['query token']}")[0]
        happened["socket"] = asyncio.run(socket_with_query_token(console.port, PLANTED["socket query token"]))

        run_id = start(console, {"tool": "signup", "args": {"company": "Acme"}})
        waiting = poll(
            console,
            "/api/v1/requests?status=open",
            lambda body: any(r["run"] == run_id for r in body["requests"]),
            what="the signup's input request",
        )
        request_id = next(r["id"] for r in waiting["requests"] if r["run"] == run_id)
        happened["answer"] = console.call("POST", f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": SIGNUP})
        poll(console, f"/api/v1/runs/{run_id}", lambda run: run["status"] == "succeeded", what="the signup's end")
        happened["correlation"], _ = get_with_header(console, f"/api/v1/runs/{run_id}", console.reviewer_token)
        # The failed delivery is logged on a webhook thread: wait for its line before stopping.
        poll_log(log_path, lambda text: text.count("failed after") >= 2)  # the request's opening and its answer
        happened.update(run=run_id, request=request_id, tokens=dict(console.tokens))
    return happened, log_path.read_text()


def poll_log(path, until):
    """Until the log shows it (written by another process's thread): a bounded wait on the file."""
    deadline = time.monotonic() + 20
    while not until(path.read_text()):
        assert time.monotonic() < deadline, f"the log never showed it:\n{path.read_text()[-3000:]}"
        time.sleep(0.05)


def lines_of(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_the_console_did_what_the_plants_need(session):
    happened, _ = session
    assert happened["wrong login"] == 200 and happened["login"] == 302
    assert happened["bad bearer"] == 401 and happened["query token"] == 200 and happened["socket"] == 403
    assert happened["answer"][0] == 200


@pytest.mark.parametrize("what", sorted(PLANTED))
def test_no_secret_reaches_the_log_or_the_access_log(session, what):
    _, text = session
    assert PLANTED[what] not in text, f"the {what} is in the log"


def test_no_api_token_reaches_the_log(session):
    happened, text = session
    for secret in happened["tokens"].values():
        assert secret not in text and secret[4:] not in text


def test_every_line_is_one_json_object(session):
    _, text = session
    for line in text.splitlines():
        assert isinstance(json.loads(line), dict), line


def test_each_state_change_is_one_line_with_its_subject_and_channel(session):
    happened, text = session
    lines = lines_of(text)
    changes = [line for line in lines if line["logger"] == "approvals.changes" and line.get("run") == happened["run"]]
    assert [line["message"] for line in changes if line["message"] != "run.transcript"] == [
        "run.started",
        "request.opened",
        "request.answered",
        "run.finished",
    ]
    answered = next(line for line in changes if line["message"] == "request.answered")
    assert answered | {"time": "", "event": 0} == {
        "time": "",
        "level": "INFO",
        "logger": "approvals.changes",
        "message": "request.answered",
        "request_id": answered["request_id"],
        "run": happened["run"],
        "request": happened["request"],
        "tool": "signup",
        "actor": "reviewer",
        "outcome": "answered",
        "channel": "api",
        "event": 0,
        "policy": "signups",  # the policy that let the reviewer answer
    }
    # The access line of the answer's POST carries the same request id.
    (post,) = [
        line
        for line in lines
        if line["logger"] == "approvals.access" and line["path"] == f"/api/v1/requests/{happened['request']}/answer"
    ]
    assert (post["request_id"], post["method"], post["status"]) == (answered["request_id"], "POST", 200)


def test_no_line_is_written_twice(session):
    """Under daphne, approvals' own handler and daphne's basicConfig one each wrote every approvals line."""
    _, text = session
    repeated = [line for line in set(text.splitlines()) if text.splitlines().count(line) > 1]
    assert repeated == []


def test_refusals_are_logged_without_what_was_refused(session):
    _, text = session
    lines = lines_of(text)
    refused = [line for line in lines if line["message"] == "token refused"]
    assert [line["channel"] for line in refused] == ["api", "socket"]
    failed = [line["message"] for line in lines if "failed after" in line["message"]]
    assert len(failed) == 2  # the request's opening and its answer
    assert all(re.match(r"webhook http://127\.0\.0\.1:\d+/… failed after 1 attempt", message) for message in failed)


def test_the_response_header_names_the_request_id_of_its_access_line(session):
    happened, text = session
    (line,) = [
        line
        for line in lines_of(text)
        if line["logger"] == "approvals.access" and line.get("request_id") == happened["correlation"]
    ]
    assert line["path"] == f"/api/v1/runs/{happened['run']}"


def test_daphnes_own_access_log_is_not_written(session):
    _, text = session
    assert not re.search(r'"(GET|POST) /api/', text.replace('"message": "', "")), "an NCSA line from daphne"
