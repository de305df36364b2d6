"""The thin app the console's round trip is measured beside (bench/roundtrip.py): at most 170 lines with models.py.

The same loop, with nothing else: POST /api/v1/runs INSERTs one suspension and tells the dashboards;
POST /api/v1/requests/<id>/answer answers it by one conditional UPDATE and tells them the run finished.
Same daphne, Channels and Django (one venv), same SQLite pragmas and transaction mode as the console
(toolnexus_site/settings.py), a group message per change. No auth, no audit, no policies: the floor.

THIN_STEPS=4 is the floor of the console's shape: the four write transactions and frames a round trip
must have (started, request opened, answered, finished), the second and fourth after the reply, as the
console's run task writes them. Still no auth, no audit, no policies.

    daphne thin_app.thin:application   (from bench/, with THIN_SQLITE_PATH or DATABASE_URL set)
"""

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import django
from django.conf import settings

if os.environ.get("DATABASE_URL"):
    from urllib.parse import urlsplit

    url = urlsplit(os.environ["DATABASE_URL"])
    DATABASE = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": url.path.lstrip("/"),
        "USER": url.username,
        "HOST": url.hostname,
        "PORT": url.port,
        "CONN_MAX_AGE": None,
    }
else:
    DATABASE = {  # the console's, word for word
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("THIN_SQLITE_PATH", "thin.sqlite3"),
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=10000;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
        "CONN_MAX_AGE": None,
    }

settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["thin_app"],
    DATABASES={"default": DATABASE},
    CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 100}}},
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    USE_TZ=True,
)
django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402

from thin_app.models import Suspension  # noqa: E402

GROUP = "dashboards"
FOUR_STEPS = os.environ.get("THIN_STEPS") == "4"
STEPS_UNDER_WAY = set()
# All ORM work on one thread with one lasting connection (the console does the same on SQLite): under
# ASGI, Django's own way gives each request a new thread, so a new connection, pragmas and all.
DATABASE_THREAD = ThreadPoolExecutor(1, thread_name_prefix="database")


async def on_database_thread(function, *args, **kwargs):
    return await asyncio.get_running_loop().run_in_executor(DATABASE_THREAD, partial(function, *args, **kwargs))


async def tell_dashboards(frame):
    await get_channel_layer().group_send(GROUP, {"type": "frame", "text": json.dumps(frame)})


async def step(pk, was, now, action):
    await on_database_thread(Suspension.objects.filter(pk=pk, status=was).update, status=now)
    await tell_dashboards({"type": "event", "action": action, "run_id": pk, "request_id": pk})


def step_after_reply(*args):  # as the console's run task writes the suspension and the finish
    task = asyncio.ensure_future(step(*args))
    STEPS_UNDER_WAY.add(task)
    task.add_done_callback(STEPS_UNDER_WAY.discard)


@csrf_exempt
async def start_run(request):
    body = json.loads(request.body)
    status = "running" if FOUR_STEPS else "open"
    suspension = await on_database_thread(
        Suspension.objects.create, tool=body["tool"], args=body.get("args", {}), status=status
    )
    if FOUR_STEPS:
        await tell_dashboards({"type": "event", "action": "run.started", "run_id": suspension.pk})
        step_after_reply(suspension.pk, "running", "open", "request.opened")
        return JsonResponse({"id": suspension.pk, "status": "waiting"}, status=201)
    await tell_dashboards(
        {"type": "event", "action": "request.opened", "run_id": suspension.pk, "request_id": suspension.pk}
    )
    return JsonResponse({"id": suspension.pk, "status": "waiting"}, status=201)


@csrf_exempt
async def answer(request, request_id):
    ok = bool(json.loads(request.body).get("ok"))
    still_open = Suspension.objects.filter(pk=request_id, status="open")
    changed = await on_database_thread(still_open.update, status="answered", answer_ok=ok)
    if not changed:
        return JsonResponse({"error": "conflict"}, status=409)
    if FOUR_STEPS:
        await tell_dashboards({"type": "event", "action": "request.answered", "run_id": request_id})
        step_after_reply(request_id, "answered", "finished", "run.finished")
        return JsonResponse({"id": request_id, "ok": ok})
    await tell_dashboards({"type": "event", "action": "run.finished", "run_id": request_id, "status": "succeeded"})
    return JsonResponse({"id": request_id, "ok": ok})


class Dashboard(AsyncWebsocketConsumer):
    async def connect(self):
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self.accept()
        await self.send(json.dumps({"type": "snapshot"}))

    async def disconnect(self, code):
        await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def frame(self, message):
        await self.send(message["text"])


urlpatterns = [
    path("api/v1/runs", start_run),
    path("api/v1/requests/<int:request_id>/answer", answer),
]

call_command("migrate", run_syncdb=True, verbosity=0)
application = ProtocolTypeRouter(
    {
        "http": get_asgi_application(),
        "websocket": URLRouter([path("ws/console/", Dashboard.as_asgi())]),
    }
)
