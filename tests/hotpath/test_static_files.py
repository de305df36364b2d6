"""Static files by WhiteNoise, answered on the event loop (approvals/hotpath/static_files.py).

Through the ASGI wrapper in front of Django's real handler, on the files the session collected
(tests/conftest.py): hashed names cached for a year as immutable, the compressed copy a client asks
for, and no thread hop on the way; whatever is not a static file goes on to Django.
"""

import gzip
import threading

import brotli
import pytest
from asgiref.sync import SyncToAsync
from channels.testing import HttpCommunicator
from django.core.asgi import get_asgi_application
from django.templatetags.static import static
from whitenoise.responders import StaticFile

from approvals.hotpath.static_files import StaticFilesOnTheLoop

MODULE = "approvals/dashboard.js"
SOURCE_DIR = "static"
YEAR = 365 * 24 * 60 * 60


@pytest.fixture
def app():
    """The wrapper as toolnexus_site.asgi builds it, its index read from the files collected this session."""
    return StaticFilesOnTheLoop(get_asgi_application())


@pytest.fixture
def hops(monkeypatch):
    """Every function sent to a thread by ``sync_to_async`` (Django's own hops included), by name."""
    sent = []
    original = SyncToAsync.__call__

    async def recording(self, *args, **kwargs):
        sent.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", recording)
    return sent


async def fetch(app, path, *, method="GET", **headers):
    headers = {"host": "localhost", **headers}
    encoded = [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    response = await HttpCommunicator(app, method, path, headers=encoded).get_response(timeout=5)
    return response["status"], {k.decode().lower(): v.decode() for k, v in response["headers"]}, response["body"]


def source_bytes(name):
    with open(f"{SOURCE_DIR}/{name}", "rb") as source:
        return source.read()


def test_the_console_serves_its_http_through_the_wrapper():
    from toolnexus_site import asgi

    assert isinstance(asgi.static_and_django, StaticFilesOnTheLoop)


async def test_a_static_file_is_answered_on_the_loop_without_a_thread_hop(app, hops, monkeypatch):
    loop_thread, served_in = threading.current_thread(), []
    original = StaticFile.get_response

    def recording(self, *args):
        served_in.append(threading.current_thread())
        return original(self, *args)

    monkeypatch.setattr(StaticFile, "get_response", recording)
    status, _, body = await fetch(app, static(MODULE), accept_encoding="gzip")
    assert status == 200 and body
    assert served_in == [loop_thread]
    assert hops == []

    # The same count sees Django's own hops: a page (here the console's 404) goes to Django, as it should.
    status, _, _ = await fetch(app, "/static/approvals/no-such-module.js")
    assert status == 404
    assert hops


async def test_a_hashed_name_is_cached_for_a_year_as_immutable(app):
    url = static(MODULE)
    assert url != "/static/" + MODULE  # a hashed name: approvals/dashboard.<hash>.js
    status, headers, _ = await fetch(app, url)
    assert status == 200
    assert headers["cache-control"] == f"max-age={YEAR}, public, immutable"
    assert headers["content-type"].startswith("text/javascript")
    assert headers["x-content-type-options"] == "nosniff"

    # The unhashed name is still served, for a minute only: its content changes under it.
    status, headers, _ = await fetch(app, "/static/" + MODULE)
    assert status == 200 and headers["cache-control"] == "max-age=60, public"


async def test_gzip_is_served_when_the_client_asks_for_it_and_brotli_when_it_takes_that(app):
    url = static("approvals/console.css")
    plain = (await fetch(app, url))[2]

    status, headers, body = await fetch(app, url, accept_encoding="gzip, deflate")
    assert status == 200 and headers["content-encoding"] == "gzip" and headers["vary"] == "Accept-Encoding"
    assert len(body) < len(plain) and gzip.decompress(body) == plain

    status, headers, body = await fetch(app, url, accept_encoding="gzip, deflate, br")
    assert headers["content-encoding"] == "br" and brotli.decompress(body) == plain

    status, headers, body = await fetch(app, url)
    assert "content-encoding" not in headers and body == plain
    assert int(headers["content-length"]) == len(plain)


async def test_a_cached_copy_is_confirmed_and_a_head_gets_no_body(app):
    url = static(MODULE)
    _, headers, _ = await fetch(app, url)
    status, _, body = await fetch(app, url, if_none_match=headers["etag"])
    assert status == 304 and body == b""

    status, head_headers, body = await fetch(app, url, method="HEAD")
    assert status == 200 and body == b"" and head_headers["content-length"] == headers["content-length"]


async def test_a_post_to_a_static_file_is_refused(app):
    status, headers, _ = await fetch(app, static(MODULE), method="POST")
    assert status == 405 and headers["allow"] == "GET, HEAD"


async def test_with_debug_on_the_source_files_are_served_as_they_are(settings):
    settings.DEBUG = True  # what `DJANGO_DEBUG=1` gives: pages link the unhashed names, read from static/
    app = StaticFilesOnTheLoop(get_asgi_application())
    assert static(MODULE) == "/static/" + MODULE
    status, headers, body = await fetch(app, static(MODULE))
    assert status == 200 and body == source_bytes(MODULE)
    assert headers["cache-control"] == "max-age=0, public"


async def test_the_wrapper_adds_no_hop_to_a_page_where_whitenoises_own_middleware_would(app, settings, hops):
    """Why a wrapper: WhiteNoiseMiddleware is sync only, so in Django's async chain every request pays a hop."""
    assert (await fetch(app, "/no-such-page/"))[0] == 404
    through_the_wrapper = list(hops)
    hops.clear()
    settings.MIDDLEWARE = ["whitenoise.middleware.WhiteNoiseMiddleware", *settings.MIDDLEWARE]
    assert (await fetch(get_asgi_application(), "/no-such-page/"))[0] == 404
    assert sorted(hops) == sorted([*through_the_wrapper, "convert_exception_to_response.<locals>.inner"])
