"""Password reset by email: not offered without a mail server; with one, it works end to end.

The working path runs a real daphne configured with a real SMTP server (aiosmtpd on a
loopback port), and follows the link from the email it received.
"""

import queue
import re
from email import message_from_bytes
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from django.test import Client

from tests.support.live_console import ClientAt, free_port, live_console

pytestmark = pytest.mark.django_db

RESET_LINK = re.compile(r"http://[^/\s]+(/accounts/reset/[^/\s]+/[^/\s]+/)")


def test_without_a_mail_server_reset_is_not_offered(alice, mailoutbox):
    client = Client()
    assert "Forgot your password?" not in client.get("/accounts/login/").content.decode()
    for response in (
        client.get("/accounts/password_reset/"),
        client.post("/accounts/password_reset/", {"email": "alice@example.com"}),
    ):
        assert response.status_code == 404
        assert "no mail server to send a reset link with" in response.content.decode()
        assert "manage.py changepassword" in response.content.decode()
    assert mailoutbox == []


def test_with_the_mail_server_down_asking_for_a_reset_does_not_fail(alice, settings):
    settings.PASSWORD_RESET_BY_EMAIL = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nothing listens there
    client = Client(raise_request_exception=False)
    response = client.post("/accounts/password_reset/", {"email": "alice@example.com"}, follow=True)
    assert response.status_code == 200
    assert "If an active account uses that address, a link to set a new password is on its way" in (
        response.content.decode()
    )


class Mailbox:
    """aiosmtpd's handler: every message the SMTP server accepts, in a queue to wait on."""

    def __init__(self):
        self.received = queue.Queue()

    async def handle_DATA(self, server, session, envelope):
        self.received.put((envelope.rcpt_tos, message_from_bytes(envelope.content)))
        return "250 Message accepted for delivery"


@pytest.fixture(scope="module")
def mailbox():
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        box.port = controller.port
        yield box
    finally:
        controller.stop()


@pytest.fixture(scope="module")
def console(tmp_path_factory, mailbox):
    artifacts = Path(__file__).resolve().parents[2] / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    with live_console(
        tmp_path_factory.mktemp("reset"),
        artifacts / "reset-daphne.log",
        CONSOLE_EMAIL_HOST="127.0.0.1",
        CONSOLE_EMAIL_PORT=str(mailbox.port),
        CONSOLE_EMAIL_FROM="console@example.com",
    ) as live:
        yield live


def test_with_a_mail_server_a_reviewer_resets_the_password_by_the_emailed_link(console, mailbox):
    browser = ClientAt(console, "127.0.0.31")
    assert "Forgot your password?" in browser.request("GET", "/accounts/login/")[2]

    _, _, form = browser.request("GET", "/accounts/password_reset/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    status, headers, _ = browser.request(
        "POST", "/accounts/password_reset/", form={"email": "reviewer@example.com", "csrfmiddlewaretoken": csrf}
    )
    assert (status, headers["Location"]) == (302, "/accounts/password_reset/done/")

    recipients, message = mailbox.received.get(timeout=30)
    assert recipients == ["reviewer@example.com"] and message["From"] == "console@example.com"
    assert message["Subject"] == "Reset your toolnexus console password"
    link = RESET_LINK.search(message.get_payload(decode=True).decode()).group(1)

    status, headers, _ = browser.request("GET", link)  # Django swaps the token for a session one
    assert status == 302
    set_password = headers["Location"]
    _, _, form = browser.request("GET", set_password)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    status, _, page = browser.request(
        "POST",
        set_password,
        form={"new_password1": "password", "new_password2": "password", "csrfmiddlewaretoken": csrf},
    )
    assert status == 200 and "This password is too common." in page
    status, headers, _ = browser.request(
        "POST",
        set_password,
        form={
            "new_password1": "Reset-by-mail-pass-3307",
            "new_password2": "Reset-by-mail-pass-3307",
            "csrfmiddlewaretoken": csrf,
        },
    )
    assert (status, headers["Location"]) == (302, "/accounts/reset/done/")

    assert ClientAt(console, "127.0.0.32").log_in("reviewer", "Reset-by-mail-pass-3307")[0] == 302
    assert browser.request("GET", link)[0] == 200  # the link worked once; now it says so
