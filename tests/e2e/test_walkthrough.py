"""The README's walkthrough in Chromium, start to finish, with nothing but the login ``make run`` prints.

A fresh console with the default settings (no users, no policies): the demo user is made and
printed by the command ``make run`` runs last, and the test reads the address and the login
from that output, as a newcomer reads them off the terminal.
"""

import re

from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, finished_row, request_card, start_run_from_the_form
from tests.support.live_console import console_env, daphne_process, free_port, manage

from .conftest import ARTIFACTS, VIEWPORT, ConsoleServer, login


def printed_login(output):
    """The address and the login in what ``ensure_demo_user`` printed."""
    url = re.search(r"^Open (\S+) and log in:$", output, re.M).group(1)
    username, password = re.search(r"^  username (\S+)   password (\S+)$", output, re.M).groups()
    return url, username, password


def test_the_readme_walkthrough_with_only_the_printed_demo_login(browser, tmp_path):
    env = console_env(tmp_path / "walkthrough.sqlite3", CONSOLE_DEMO_LOGIN_FILE=str(tmp_path / "demo-login.txt"))
    manage(env, "migrate", "--noinput")
    port = free_port()
    url, username, password = printed_login(manage(env, "ensure_demo_user", "--url", f"http://127.0.0.1:{port}/"))

    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / "walkthrough-daphne.log"
    with daphne_process(env, log_path, port=port):
        server = ConsoleServer(
            base_url=url.rstrip("/"),
            host="127.0.0.1",
            port=port,
            users=(username,),
            password=password,
            db_path=tmp_path / "walkthrough.sqlite3",
            log_path=log_path,
        )
        context = browser.new_context(viewport=VIEWPORT)
        try:
            page = context.new_page()
            page.goto(url)
            expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))  # "log in"
            login(page, server, username)
            expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")

            run_id = start_run_from_the_form(page, "deploy")  # "pick deploy under Start a run"
            card = request_card(page, run_id, kind="input")  # "answer the request that appears"
            expect(card).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
            card.locator("select").select_option(label="staging")
            card.locator("button[type=submit]").click()

            row = finished_row(page, run_id)
            expect(row.locator(".status")).to_have_text("succeeded", timeout=EVENT_TIMEOUT_MS)
            expect(row.locator(".result")).to_have_text("deployed to staging")
        finally:
            context.close()
