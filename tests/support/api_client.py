"""The JSON API through Django's ``AsyncClient``, in process: a client signed in as a user, and a JSON POST."""

import json

from django.test import AsyncClient


async def logged_in(user, **kwargs):
    """An ``AsyncClient(**kwargs)`` with ``user``'s session."""
    client = AsyncClient(**kwargs)
    await client.aforce_login(user)
    return client


async def post_json(client, path, body, **kwargs):
    """POST ``body`` as JSON (a str or bytes body is sent as it is, to send malformed JSON)."""
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return await client.post(path, data=data, content_type="application/json", **kwargs)
