"""Two consoles behind the shipped proxy: deploy/nginx.conf run by Debian's nginx (tests/support/proxy.py).

The consoles trust the proxy's address (CONSOLE_TRUSTED_PROXIES=127.0.0.1) and nothing else, as
compose.yaml's do: clients connect to the proxy, or straight to a console, from loopback addresses
of their own (127.0.0.2 and up), so whose failures count where is seen, not assumed.
"""

import re

import pytest

from tests.cluster.harness import REVIEWER, REVIEWER_PASSWORD, eventually
from tests.support.live_console import CSRF_FIELD, ClientAt

PROXY_ADDRESS = "127.0.0.1"
UPSTREAM = re.compile(r"upstream=[\d.]+:(\d+)")


@pytest.fixture(scope="module")
def cluster_options():
    return {"env": {"CONSOLE_TRUSTED_PROXIES": PROXY_ADDRESS, "CONSOLE_LOCKOUT_FAILURES": "5"}}


def log_in(client, username, password, forged_for=None):
    """The login form as a browser posts it, with an X-Forwarded-For the client made up, if any."""
    headers = {"X-Forwarded-For": forged_for} if forged_for else {}
    _, _, page = client.request("GET", "/accounts/login/", headers=headers)
    form = {"username": username, "password": password, "next": "/", "csrfmiddlewaretoken": CSRF_FIELD.search(page)[1]}
    status, _, page = client.request("POST", "/accounts/login/", form=form, headers=headers)
    return status, page


async def test_a_dashboard_through_the_proxy_receives_a_request_started_through_it(front, label):
    async with front.dashboard() as dashboard:
        run_id = front.start_run({"tool": "cluster_approve", "args": {"label": label}})
        opened = await dashboard.event("request.opened", run_id=run_id)
    assert opened["request"]["prompt"] == f"Go ahead with {label}?"
    assert front.call("POST", f"/api/v1/runs/{run_id}/cancel", token=front.host_token)[0] == 202


@pytest.mark.parametrize("answered_through", ["socket", "api"])
async def test_an_answer_through_the_proxy_resumes_the_run(front, label, answered_through):
    async with front.dashboard() as dashboard:
        run_id = front.start_run({"tool": "cluster_approve", "args": {"label": label}})
        request_id = (await dashboard.event("request.opened", run_id=run_id))["request_id"]
        if answered_through == "socket":
            assert (await dashboard.answer(request_id, ok=True))["type"] == "answered"
        else:
            assert front.answer(request_id, ok=True)[0] == 200
        finished = await dashboard.event("run.finished", run_id=run_id)
    assert finished["run"]["status"] == "succeeded"
    assert re.fullmatch(rf"{label} approved in pid \d+", finished["run"]["result"]["output"])


def test_the_proxy_spreads_requests_over_both_consoles(cluster, front, proxy):
    before = len(proxy.upstreams())
    for _ in range(6):
        assert front.call("GET", "/api/v1/requests?limit=1")[0] == 200
    assert set(proxy.upstreams()[before:]) == {member.port for member in cluster.members}


def test_a_login_through_the_proxy_counts_failures_per_real_client_address(front):
    # Five wrong passwords, each for another account and each claiming another address: the proxy
    # appends the one it was connected from, and the console counts them all against 127.0.0.2.
    sprayer = ClientAt(front, "127.0.0.2")
    statuses = [log_in(sprayer, f"someone-{n}", "Summer2026!", forged_for=f"198.51.100.{n}")[0] for n in range(5)]
    assert statuses == [200] * 4 + [429]
    status, page = log_in(sprayer, REVIEWER, REVIEWER_PASSWORD)
    assert status == 429 and "for your address" in page
    # Not the proxy's address that is locked: another client behind the same proxy logs in.
    assert log_in(ClientAt(front, "127.0.0.3"), REVIEWER, REVIEWER_PASSWORD)[0] == 302


def test_a_client_going_round_the_proxy_is_counted_by_its_own_address_whatever_it_forges(cluster, front):
    a, _ = cluster.members
    direct = ClientAt(a, "127.0.0.4")
    statuses = [log_in(direct, f"nobody-{n}", "Winter2026!", forged_for="127.0.0.5")[0] for n in range(5)]
    assert statuses == [200] * 4 + [429]
    assert log_in(direct, REVIEWER, REVIEWER_PASSWORD)[0] == 429
    # The address it claimed was never charged: from there, through the proxy, the login works.
    assert log_in(ClientAt(front, "127.0.0.5"), REVIEWER, REVIEWER_PASSWORD)[0] == 302


def test_nginx_and_the_console_log_one_request_id(cluster, front, proxy):
    """nginx passes its $request_id on as X-Request-ID: its access line, the response and the console's line agree."""
    status, headers, _ = ClientAt(front, "127.0.0.6").api("/api/v1/requests?limit=1", front.reviewer_token)
    correlation = headers["X-Request-ID"]
    assert status == 200 and re.fullmatch(r"[0-9a-f]{32}", correlation)  # nginx's id, not one the console made
    # nginx writes its line once the response is sent, and its output is read on a thread of the test's.
    nginx_line = eventually(
        lambda: next((line for line in list(proxy.lines) if f"request_id={correlation}" in line), None),
        "nginx's access line with the request id",
    )
    upstream = int(UPSTREAM.search(nginx_line).group(1))
    member = next(m for m in cluster.members if m.port == upstream)
    assert "GET /api/v1/requests?limit=1 200" in member.logged(f"[{correlation}]")
