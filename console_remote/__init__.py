"""RemoteWaitFor: the console as toolnexus' ``wait_for`` for a program in another process.

    from toolnexus import create_in_process_client
    from console_remote import RemoteWaitFor

    wait_for = RemoteWaitFor("https://console.example.com", token)
    client = create_in_process_client(model=..., wait_for=wait_for)

Standard library only (urllib in a worker thread, json): no Django, so a host
can copy this one file or import it without the console's settings. The
request is POSTed (idempotent on its id, so a retry after a lost response is
safe), then its answer is long-polled, reconnecting with exponential backoff
while the console is unreachable or answers 5xx, a bounded number of times in a
row before ``RemoteUnreachableError`` names the URL it could not reach. Any
other 4xx is raised at once with the console's message.

toolnexus calls ``wait_for(request)`` with the Request alone, so to show which
tool call a request guards, wrap the tools with ``wait_for.guard_tools(tools)``
(or pass ``tool=`` and ``args=`` when calling it yourself).

After an approval the console shows "approved, not yet reported" until the host
says how its tool ended: a wrapped tool reports its approved retry's result by
itself, and ``wait_for.report(answer, ok, message)`` does it for a retry run any
other way (``POST /api/v1/requests/<id>/outcome``; the first report stands).

The console signs each answer (Ed25519). Given the console's public keys (``public_keys=``, pinned; with
``cryptography`` installed: ``pip install 'toolnexus-console[verify]'``), every answer that carries a signature
is verified before it is returned: by a known key, unaltered, for this request, for the call this wait_for sent
and the call that will run, and not older than the request; ``require_signature=True`` also refuses an unsigned
one. A refusal withdraws the request (or, when the console stored an approval, reports that this host refused
it) and raises ``RemoteSignatureError`` (docs/remote-hosts.md, docs/signing.md).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import decimal
import hashlib
import http.client
import inspect
import json
import logging
import math
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from toolnexus import Answer, Request, Tool, ToolContext, ToolResult, pending_of

# A long-poll's HTTP read timeout is its wait plus this margin (the server answers at the end of the wait).
READ_MARGIN_SECONDS = 10.0
# After expiresAt the console's timer resolves the request; give it this long to do so.
EXPIRY_GRACE_SECONDS = 5.0
WITHDRAW_TIMEOUT_SECONDS = 5.0
RETRYABLE_STATUSES = {500, 502, 503, 504}
# Calls in a row that may fail to reach the console (a connection error or a 5xx) before giving up:
# with the default backoff, 0.5 s doubling to 30 s, about 30 to 60 s, which a restart fits in.
DEFAULT_ATTEMPTS = 8
# The console keeps at most this much of a reported outcome's message.
OUTCOME_MESSAGE_CHARS = 2000
# A wrapped tool's automatic report holds its result back at most this long while the console is unreachable.
REPORT_PATIENCE_SECONDS = 5.0


class RemoteWaitForError(Exception):
    """The console refused a call; ``status``, ``error`` and ``message`` say why, as the console put it."""

    def __init__(self, status: int | None, error: str, message: str, what: str) -> None:
        self.status, self.error, self.message = status, error, message
        super().__init__(f"{what} (HTTP {status} {error}): {message}")


class RemoteAuthError(RemoteWaitForError):
    """401 / 403: the token is wrong, revoked, or not allowed to do this."""


class RemoteRequestError(RemoteWaitForError):
    """Any other 4xx (400, 404, 409, 413, ...): the call itself was refused; sending it again will not help."""


class RemoteUnreachableError(RemoteWaitForError):
    """The console could not be reached (connection errors or 5xx) on ``attempts`` calls in a row."""

    def __init__(self, url: str, what: str, attempts: int, seconds: float, last_error: Exception | None) -> None:
        self.url, self.attempts, self.last_error = url, attempts, last_error
        self.status, self.error = None, "unreachable"
        self.message = (
            f"Could not reach the console at {url} to {what}: {attempts} attempts over {seconds:.1f} s failed, "
            f"the last with: {last_error}. Check that the console is running and that the URL is right."
        )
        Exception.__init__(self, self.message)


class RemoteSignatureError(RemoteWaitForError):
    """An answer the console's signature does not vouch for: ``error`` says how ("unsigned", "unknown_key",
    "bad_signature", "other_request", "other_call", "stale") and ``message`` what to do. The request was withdrawn."""

    def __init__(self, error: str, message: str) -> None:
        self.status, self.error, self.message = None, error, message
        Exception.__init__(self, message)


class _Unreachable(Exception):
    """A connection error or a 5xx: worth retrying after a pause."""


@runtime_checkable
class _HasTools(Protocol):
    """A toolkit: anything whose ``tools()`` lists its tools."""

    def tools(self) -> list[Tool]: ...


def _deadline_of(expires_at: str | None) -> float | None:
    """``expiresAt`` as a ``time.time()`` value, or None when absent or unreadable (the server has checked it)."""
    if not expires_at:
        return None
    try:
        moment = datetime.fromisoformat(expires_at.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


# -- canonical JSON (RFC 8785) and signed answers --------------------------------------
# The console signs each Answer it resolves (Ed25519) over canonical bytes a host rebuilds from the wire: these
# functions are the one definition both sides use (the console imports them), so what is signed is what is checked.

SIGNATURE_KEY = "signature"  # the Answer's top-level wire key that carries the console's signature
SIGNATURE_VERSION = 1
SIGNATURE_ALGORITHM = "Ed25519"
# The largest integer every JSON reader keeps exactly (an IEEE 754 double's 53-bit significand; RFC 8785 / I-JSON).
SAFE_INTEGER = 2**53 - 1


class CanonicalJSONError(ValueError):
    """A value RFC 8785 cannot put into canonical bytes (a NaN, an infinity, an integer beyond ±(2**53 - 1), a
    lone surrogate, a key that is not a string, a type JSON has not); the message names where it is."""


def canonical_json(value: Any) -> bytes:
    """``value`` (JSON data: dict, list, str, int, float, bool, None) as RFC 8785 (JCS) canonical UTF-8 bytes.

    Keys sorted by their UTF-16 code units, no whitespace, strings escaped as ECMAScript's JSON.stringify does,
    numbers as ECMAScript prints a double (``25.0`` and ``25`` are both ``25``; ``1e21`` is ``1e+21``). The same
    data gives the same bytes in Python, Go and JavaScript (docs/signing.md, its test vectors). Raises
    CanonicalJSONError for what has no canonical form, naming its path (``$.args.amount``).
    """
    parts: list[str] = []
    _canonical(value, parts, "$")
    return "".join(parts).encode("utf-8")


def _canonical(value: Any, parts: list[str], path: str) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        if abs(value) <= SAFE_INTEGER:
            parts.append(str(value))
        elif _is_a_doubles_shortest_form(value):
            # PostgreSQL's jsonb gives the float 1e16 back as 10000000000000000: the same number, printed as Go
            # and JavaScript print that double (1e16), so it canonicalizes as the double.
            parts.append(_canonical_number(float(value), path))
        else:
            raise CanonicalJSONError(
                f"{path} is {value}, beyond the integers every JSON reader keeps exactly (±{SAFE_INTEGER}): "
                "send it as a string."
            )
    elif isinstance(value, float):
        parts.append(_canonical_number(value, path))
    elif isinstance(value, str):
        parts.append(_canonical_string(value, path))
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise CanonicalJSONError(f"{path} has the key {key!r}: JSON object keys are strings.")
        parts.append("{")
        for index, key in enumerate(sorted(value, key=lambda name: name.encode("utf-16-be", "surrogatepass"))):
            if index:
                parts.append(",")
            parts.append(_canonical_string(key, path))
            parts.append(":")
            _canonical(value[key], parts, f"{path}.{key}")
        parts.append("}")
    elif isinstance(value, (list, tuple)):
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _canonical(item, parts, f"{path}[{index}]")
        parts.append("]")
    else:
        raise CanonicalJSONError(f"{path} is a {type(value).__name__}, which JSON has no value for.")


def _is_a_doubles_shortest_form(number: int) -> bool:
    """Whether ``number`` is exactly the decimal value of its nearest double's shortest form (10**16, 10**21):
    then every reader that parses it as a double prints it back as this number. 2**53 + 1 is not (its double is
    2**53), nor 2**60 (its double prints as 1152921504606847000)."""
    try:
        return decimal.Decimal(repr(float(number))) == number
    except OverflowError:  # beyond the largest double
        return False


def _canonical_string(text: str, path: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalJSONError(f"{path} holds a lone surrogate, which UTF-8 cannot carry.") from None
    # json.dumps without ensure_ascii escapes exactly what ECMAScript's JSON.stringify does: the quote, the
    # backslash, \b \f \n \r \t, and other control characters as lower-case \u00xx; the rest stays as it is.
    return json.dumps(text, ensure_ascii=False)


def _canonical_number(number: float, path: str) -> str:
    """A double as ECMAScript's Number.prototype.toString prints it (RFC 8785, 3.2.2.3)."""
    if math.isnan(number) or math.isinf(number):
        raise CanonicalJSONError(f"{path} is {number}, which JSON has no number for.")
    if number == 0:
        return "0"  # and -0
    if number < 0:
        return "-" + _canonical_number(-number, path)
    # repr gives the shortest digits that read back as the same double; find them and the decimal point's place.
    mantissa, _, exponent = repr(number).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    point = len(whole) + int(exponent or 0) - (len(whole + fraction) - len(digits))  # value = 0.<digits> * 10**point
    digits = digits.rstrip("0")
    if len(digits) <= point <= 21:
        return digits + "0" * (point - len(digits))
    if 0 < point <= 21:
        return digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return "0." + "0" * -point + digits
    power = point - 1
    sign = "+" if power > 0 else "-"
    head = digits[0] if len(digits) == 1 else digits[0] + "." + digits[1:]
    return f"{head}e{sign}{abs(power)}"


def call_digest(tool: str, args: dict[str, Any] | None) -> str:
    """The digest of one tool call: ``sha256:`` and the hex SHA-256 of ``{"args": args, "tool": tool}`` as
    canonical JSON (``canonical_json``). A request asked without a tool call has ``tool`` "" and ``args`` {}."""
    return "sha256:" + hashlib.sha256(canonical_json({"tool": tool or "", "args": args or {}})).hexdigest()


def signed_statement(answer: dict[str, Any]) -> bytes:
    """The bytes the console's signature covers, rebuilt from a signed Answer as it came over the wire: its
    ``id``, ``ok``, ``data`` and ``reason`` (null when absent) and its ``signature`` object without ``sig``, as
    canonical JSON. Any other key of the wire object is not covered."""
    signature = answer.get(SIGNATURE_KEY)
    if not isinstance(signature, dict):
        raise CanonicalJSONError("The answer carries no signature object.")
    return canonical_json(
        {
            "id": answer.get("id"),
            "ok": answer.get("ok"),
            "data": answer.get("data"),
            "reason": answer.get("reason"),
            SIGNATURE_KEY: {name: value for name, value in signature.items() if name != "sig"},
        }
    )


def key_id(public_key: bytes) -> str:
    """A signing key's id: the first 16 hex digits of the SHA-256 of its raw 32-byte Ed25519 public key."""
    return hashlib.sha256(public_key).hexdigest()[:16]


# -- verifying a signed answer (with ``cryptography``, optional) -----------------------------------

logger = logging.getLogger("console_remote")
SIGNING_KEYS_PATH = "/api/v1/signing-keys"
DEFAULT_MAX_CLOCK_SKEW = 300.0
VERIFY_EXTRA = "pip install 'toolnexus-console[verify]' (or pip install cryptography)"


def _ed25519() -> Any:
    """cryptography's Ed25519 module, or None when it is not installed (then nothing can be verified)."""
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        return None
    return ed25519


def _unbase64url(text: str) -> bytes:
    """Base64url with or without its padding; ValueError when it is not."""
    text = text.strip()
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64url ({exc})") from None


def public_key_of(text: str) -> tuple[str, Any]:
    """A pinned public key, ``(kid, Ed25519PublicKey)``: the raw 32-byte key in base64url (padded or not) as
    ``GET /api/v1/signing-keys`` gives it in "public_key", or its PEM SubjectPublicKeyInfo ("pem"). Needs
    ``cryptography``; ValueError says what is wrong with the text."""
    ed25519 = _ed25519()
    if ed25519 is None:
        raise ValueError(f"Verifying the console's signatures needs the cryptography package: {VERIFY_EXTRA}.")
    from cryptography.hazmat.primitives import serialization

    if not isinstance(text, str):
        raise ValueError(f"A pinned public key must be text (base64url or PEM); got {type(text).__name__}.")
    shown = repr(text[:40] + ("..." if len(text) > 40 else ""))
    if "-----BEGIN" in text:
        try:
            key = serialization.load_pem_public_key(text.strip().encode())
        except (ValueError, TypeError) as exc:
            raise ValueError(f"The pinned public key {shown} is not a PEM public key ({exc}).") from None
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise ValueError(
                f"The pinned public key {shown} is a {type(key).__name__}; the console signs with Ed25519."
            )
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return key_id(raw), key
    try:
        raw = _unbase64url(text)
    except ValueError as exc:
        raise ValueError(f"The pinned public key {shown} is neither PEM nor base64url: {exc}.") from None
    if len(raw) != 32:
        raise ValueError(
            f"The pinned public key {shown} is {len(raw)} bytes once decoded; an Ed25519 public key is 32 "
            '(copy "public_key" or "pem" from GET /api/v1/signing-keys).'
        )
    return key_id(raw), ed25519.Ed25519PublicKey.from_public_bytes(raw)


def run_digest(kind: str, tool: str, args: dict[str, Any] | None, ok: bool, data: Any) -> str:
    """The digest of the call that runs after an answer, as a host computes it: for an approved ``approval``, its
    ``args`` with the edits in ``data["args"]`` whose names it already has (a host's request carries no input
    schema, so that is the console's merge); otherwise the call as asked."""
    args = args or {}
    edits = data.get("args") if isinstance(data, dict) else None
    if kind == "approval" and ok and isinstance(edits, dict):
        args = {**args, **{name: value for name, value in edits.items() if name in args}}
    return call_digest(tool, args)


@dataclass(frozen=True)
class _Sent:
    """What one wait sent, which its answer's signature must name."""

    kind: str
    tool: str
    args: dict[str, Any]
    first_sent_at: float  # time.time() before its first POST
    created: bool = False  # its POST opened the request (201), so any answer is younger than first_sent_at


def _answer_of(body: dict[str, Any]) -> Answer:
    return Answer(id=body["id"], ok=bool(body["ok"]), data=body.get("data"), reason=body.get("reason"))


class RemoteWaitFor:
    """An async ``wait_for(request) -> Answer`` backed by a toolnexus console's HTTP API.

    ``poll_seconds`` is each long-poll's wait (at most 60). ``timeout`` is this
    host's own patience in seconds: when it runs out the request is withdrawn
    and the console's record returned (ok=False, reason cancelled). A request's
    ``expiresAt`` is the console's deadline: the server expires it and that
    Answer (ok=False, reason expired) is returned; a deadline a reviewer extended
    is read again when the one sent has passed, and waited for. If the awaiting task is
    cancelled, the request is withdrawn before the cancellation goes on.
    ``host`` names this program on the dashboard (default: the machine name).
    ``on_open``, if given, is called with the stored request once it is open.
    ``attempts`` calls in a row may fail to reach the console (backing off from
    ``backoff_initial`` to ``backoff_max`` seconds between them) before
    ``RemoteUnreachableError`` is raised; a 4xx is raised at once.

    The card shows the tool call a request guards when the tools are wrapped
    with ``guard_tools`` or ``tool=`` and ``args=`` are passed to the call.

    ``public_keys``: the console's public keys, pinned (base64url or PEM, from
    ``GET /api/v1/signing-keys``; keep rotated ones): each signed answer is
    verified, and ``RemoteSignatureError`` raised for one that fails.
    ``require_signature`` refuses unsigned answers too (without it, pinned keys
    log a warning: an answer whose signature was stripped passes). ``fetch_public_keys``
    (development only) fetches the keys from the console once instead of pinning
    them (never beside them), with a warning. ``max_clock_skew``: seconds an answer's ``at`` may precede the
    first POST. All need ``cryptography``.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        poll_seconds: float = 25,
        timeout: float | None = None,
        host: str | None = None,
        on_open: Callable[[dict[str, Any]], object] | None = None,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        attempts: int = DEFAULT_ATTEMPTS,
        opener: urllib.request.OpenerDirector | None = None,
        public_keys: Iterable[str] | None = None,
        require_signature: bool = False,
        fetch_public_keys: bool = False,
        max_clock_skew: float = DEFAULT_MAX_CLOCK_SKEW,
    ) -> None:
        if not 0 < poll_seconds <= 60:
            raise ValueError("poll_seconds must be more than 0 and at most 60 (the console's longest wait).")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.poll_seconds = poll_seconds
        self.timeout = timeout
        self.host = (host if host is not None else socket.gethostname())[:200]
        self.on_open = on_open
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        if attempts < 1:
            raise ValueError("attempts must be at least 1.")
        self.attempts = attempts
        self.opener = opener or urllib.request.build_opener()
        self._guarded_calls: dict[
            str, tuple[str, dict[str, Any]]
        ] = {}  # request id -> (tool name, args), filled by guard_tools' wrappers
        self._opened: set[str] = set()  # requests this wait_for opened, whose approved retry a wrapped tool reports
        pinned = [public_keys] if isinstance(public_keys, str) else list(public_keys or [])
        if (pinned or require_signature or fetch_public_keys) and _ed25519() is None:
            raise ValueError(f"Verifying the console's signatures needs the cryptography package: {VERIFY_EXTRA}.")
        if require_signature and not pinned and not fetch_public_keys:
            raise ValueError(
                "require_signature=True needs the console's public keys: pin them with public_keys=[...] (from "
                f"GET {SIGNING_KEYS_PATH}), or, in development, pass fetch_public_keys=True."
            )
        if pinned and fetch_public_keys:
            raise ValueError(
                "Pass either public_keys (pinned) or fetch_public_keys=True, not both: keys fetched from the console "
                "would widen the pinned set to whatever answers at its URL."
            )
        if max_clock_skew < 0:
            raise ValueError("max_clock_skew must be 0 or more seconds.")
        if pinned and not require_signature:
            logger.warning(
                "RemoteWaitFor verifies signed answers with the pinned keys, but accepts an unsigned one: an answer "
                "whose signature was stripped on the way passes. Pass require_signature=True to refuse it."
            )
        self.require_signature = require_signature
        self.fetch_public_keys = fetch_public_keys
        self.max_clock_skew = max_clock_skew
        self._public_keys: dict[str, Any] = dict(public_key_of(text) for text in pinned)  # kid -> key
        self._fetched_public_keys = False

    def guard_tools(self, tools: Iterable[Tool] | _HasTools) -> list[Tool]:
        """``tools`` (a list, or a Toolkit's ``tools()``), each wrapped to tell this wait_for which call it suspended.

        toolnexus hands ``wait_for`` the Request alone; a wrapped tool that
        returns ``pending(...)`` records its name and args under the request's
        id, and the call that waits for that request sends them to the console,
        which shows them on the card. Name, schema, source and behaviour are
        the tool's own. Use the result as the toolkit's tools:
        ``create_toolkit(extra_tools=wait_for.guard_tools([...]), builtins=False)``.
        """
        if isinstance(tools, _HasTools):
            tools = tools.tools()
        return [self._guarded(tool) for tool in tools]

    def _guarded(self, tool: Tool) -> Tool:
        async def execute(args: dict[str, Any] | None = None, ctx: ToolContext | None = None) -> ToolResult:
            answer = getattr(ctx, "answer", None)
            approved = answer.id if answer is not None and answer.ok and answer.id in self._opened else None
            try:
                result = await tool.execute(args, ctx)
            except Exception as exc:
                if approved is not None:  # the approved retry raised: that is how it ended
                    await self.report_quietly(approved, False, f"{type(exc).__name__}: {exc}")
                raise
            suspension = pending_of(result)
            if suspension is not None:
                self._guarded_calls[suspension.id] = (tool.name, dict(args or {}))
            elif approved is not None:
                await self.report_quietly(approved, not result.is_error, result.output)
            return result

        return Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            source=tool.source,
            execute=execute,
        )

    async def __call__(
        self, request: Request, *, tool: str | None = None, args: dict[str, Any] | None = None
    ) -> Answer:
        """Open ``request`` on the console and return its Answer. ``tool`` and ``args``: the call it guards, for the card."""
        guarded_tool, guarded_args = self._guarded_calls.pop(request.id, (None, None))
        body = self._body(request, tool or guarded_tool, args if args is not None else guarded_args)
        give_up_at = time.monotonic() + self.timeout if self.timeout is not None else None
        opened = False
        # The args as the console receives them (keys as strings, tuples as lists), copied: what was sent, not
        # what the caller holds now.
        sent_args = json.loads(json.dumps(body.get("args") or {}))
        sent = _Sent(request.kind, body.get("tool") or "", sent_args, time.time())
        try:
            try:
                reply = await self._retrying(
                    "open the request", "POST", "/api/v1/requests", body, give_up_at, READ_MARGIN_SECONDS
                )
            except RemoteUnreachableError:
                await self._withdraw_quietly(request, body, opened=False)
                raise
            if reply is None:  # out of patience before the console could be reached
                await self._withdraw_quietly(request, body, opened=False)
                return Answer(id=request.id, ok=False, reason="cancelled")
            status, stored = reply
            # Only a request this POST created must not have an answer older than it; an idempotent POST (200)
            # finds what the id and the call digest already bind, whatever its age (a retry after a lost reply).
            sent = replace(sent, created=status == 201)
            opened = True
            self._opened.add(request.id)
            if self.on_open is not None:
                result = self.on_open(stored)
                if inspect.isawaitable(result):
                    await result
            if stored.get("answer"):  # a retried POST of a request that is already resolved
                return self._answered(await self._checked(request.id, stored["answer"], sent))
            try:
                return self._answered(
                    await self._await_answer(request.id, sent, _deadline_of(stored.get("expiresAt")), give_up_at)
                )
            except RemoteUnreachableError:  # nobody should answer into the void, should the console come back
                await self._withdraw_quietly(request, body, opened=True)
                raise
        except RemoteSignatureError as refusal:
            # Nobody should answer into the void; and an approval the console did store, this host will not run:
            # its record says so rather than "approved, not yet reported" (refused unless it was an approval).
            await self._withdraw_quietly(request, body, opened=True)
            await self.report_quietly(
                request.id, False, f"This host refused the console's answer ({refusal.error}): {refusal.message}"
            )
            self._opened.discard(request.id)
            raise
        except asyncio.CancelledError:
            await asyncio.shield(self._withdraw_quietly(request, body, opened=opened))
            raise

    def _answered(self, answer: Answer) -> Answer:
        if not answer.ok:  # no retry will run: nothing to report for it
            self._opened.discard(answer.id)
        return answer

    async def report(
        self, answer: Answer | str, ok: bool, message: str = "", *, patience: float | None = None
    ) -> dict[str, Any]:
        """Tell the console how the tool ended after the approval ``answer`` (an Answer, or its request's id):
        ``ok`` true when it succeeded, ``message`` its output (cut to OUTCOME_MESSAGE_CHARS). Returns the request
        as the console holds it now ({} when ``patience`` ran out first). The first report stands: the same one again is accepted, another is refused
        (RemoteRequestError, 409). ``patience``: at most this many seconds of retrying an unreachable console
        (None: ``attempts`` tries, as every call)."""
        request_id = answer if isinstance(answer, str) else answer.id
        body = {"ok": bool(ok), "message": str(message)[:OUTCOME_MESSAGE_CHARS]}
        give_up_at = time.monotonic() + patience if patience is not None else None
        reply = await self._retrying(
            "report the outcome", "POST", self._path(request_id, "outcome"), body, give_up_at, READ_MARGIN_SECONDS
        )
        self._opened.discard(request_id)
        return reply[1] if reply is not None else {}

    async def report_quietly(self, request_id: str, ok: bool, message: str) -> bool:
        """``report``, for a wrapped tool's retry: a report that fails never changes the tool's result, and one
        that cannot reach the console holds the result back at most REPORT_PATIENCE_SECONDS."""
        try:
            stored = await self.report(request_id, ok, message, patience=REPORT_PATIENCE_SECONDS)
        except Exception:
            return False
        return bool(stored)  # {} when the patience ran out before the console could be reached

    # -- the steps ------------------------------------------------------------------

    def _body(self, request: Request, tool: str | None, args: dict[str, Any] | None) -> dict[str, Any]:
        body = {key: value for key, value in asdict(request).items() if value is not None}
        body["host"] = self.host
        if tool is not None:
            body["tool"] = tool
        if args is not None:
            body["args"] = args
        return body

    def _path(self, request_id: str, action: str) -> str:
        return f"/api/v1/requests/{urllib.parse.quote(request_id, safe='')}/{action}"

    async def _await_answer(
        self, request_id: str, sent: _Sent, expires_at: float | None, give_up_at: float | None
    ) -> Answer:
        path = self._path(request_id, "answer")
        while True:
            wait = self.poll_seconds
            if expires_at is not None:
                wait = min(wait, max(0.0, expires_at - time.time()) + EXPIRY_GRACE_SECONDS)
            if give_up_at is not None:
                wait = min(wait, max(0.0, give_up_at - time.monotonic()))
            reply = await self._retrying(
                "wait for the answer", "GET", f"{path}?wait={wait:.3f}", None, give_up_at, READ_MARGIN_SECONDS + wait
            )
            body = reply[1] if reply is not None else None
            if body is not None and "ok" in body:
                return await self._checked(request_id, body, sent)
            if expires_at is not None and time.time() >= expires_at + EXPIRY_GRACE_SECONDS:
                moved = await self._deadline_now(request_id)
                if moved is not None and moved > expires_at:  # a reviewer extended it: wait for the new one
                    expires_at = moved
                    continue
                return await self._expire(request_id, sent)
            if give_up_at is not None and time.monotonic() >= give_up_at:
                try:
                    return await self._withdraw(request_id, sent)
                except _Unreachable:  # the console is gone: nobody can answer it there either
                    return Answer(id=request_id, ok=False, reason="cancelled")

    async def _deadline_now(self, request_id: str) -> float | None:
        """The open request's ``expiresAt`` as the console holds it now (a reviewer may have extended it, or its
        policy escalated it), infinity when its policy keeps it open past its deadline (nothing expires it any
        more), or None when it cannot say (resolved, unreadable, unreachable)."""
        try:
            body = await self._call(
                "GET", f"/api/v1/requests/{urllib.parse.quote(request_id, safe='')}", None, WITHDRAW_TIMEOUT_SECONDS
            )
        except (_Unreachable, RemoteWaitForError):
            return None
        if body.get("status") != "open":
            return None
        if body.get("kept_open") is True:
            return math.inf
        return _deadline_of(body.get("expiresAt"))

    async def _expire(self, request_id: str, sent: _Sent) -> Answer:
        """Past expiresAt and its grace: ask once more (the server expires a due request as it answers)."""
        try:
            body = await self._call("GET", self._path(request_id, "answer") + "?wait=0", None, WITHDRAW_TIMEOUT_SECONDS)
        except _Unreachable:
            body = None
        if body is not None and "ok" in body:
            return await self._checked(request_id, body, sent)
        # The console does not agree it is due (its clock is behind ours): withdraw it, and report the expiry.
        try:
            await self._withdraw(request_id, sent)
        except (_Unreachable, RemoteWaitForError):
            pass
        return Answer(id=request_id, ok=False, reason="expired")

    async def _withdraw(self, request_id: str, sent: _Sent | None) -> Answer:
        """Withdraw the request and return the console's record of it (an answer that came first stands), checked
        against ``sent``, what this wait sent (None: nothing it sent is known, so a signed answer is refused)."""
        try:
            body = await self._call(
                "POST", self._path(request_id, "cancel"), {}, WITHDRAW_TIMEOUT_SECONDS, what="withdraw the request"
            )
        except RemoteRequestError as exc:
            if exc.status != 409:
                raise
            body = await self._call("GET", self._path(request_id, "answer") + "?wait=0", None, WITHDRAW_TIMEOUT_SECONDS)
        if "ok" not in body:
            return Answer(id=request_id, ok=False, reason="cancelled")
        return await self._checked(request_id, body, sent)

    async def _checked(self, request_id: str, body: dict[str, Any], sent: _Sent | None) -> Answer:
        """The Answer in ``body``, once its signature vouches for it (when this wait_for verifies); raises
        RemoteSignatureError otherwise. Unsigned answers pass unless ``require_signature``."""
        signature = body.get(SIGNATURE_KEY)
        if signature is None:
            if self.require_signature:
                raise RemoteSignatureError(
                    "unsigned",
                    f"The answer to request {request_id!r} carries no signature and require_signature is set: the "
                    "console is older than signed answers, or something between it and this host stripped it. "
                    "Check the console's version and the proxies in between.",
                )
            return _answer_of(body)
        if not self._public_keys and not self.fetch_public_keys:
            return _answer_of(body)  # nothing to verify it with: as before signatures
        self._check_signature(request_id, body, signature, await self._key_for(signature), sent)
        logger.debug("The answer to request %r verified: signed by key %s.", request_id, signature.get("kid"))
        return _answer_of(body)

    async def _key_for(self, signature: object) -> Any:
        kid = signature.get("kid") if isinstance(signature, dict) else None
        if not isinstance(kid, str):  # a list or an object would not even look up: no key of ours has that id
            raise RemoteSignatureError(
                "unknown_key",
                f"The answer's signature names no key id (kid is {type(kid).__name__}, not text): it was not signed "
                "by this console. Do not act on it.",
            )
        if kid not in self._public_keys and self.fetch_public_keys and not self._fetched_public_keys:
            self._fetched_public_keys = True
            await self._fetch_public_keys()
        key = self._public_keys.get(kid)
        if key is None:
            known = ", ".join(sorted(self._public_keys)) or "none"
            raise RemoteSignatureError(
                "unknown_key",
                f"The answer is signed by key {str(kid)[:40]!r}, which is not among this host's public keys "
                f"({known}): if the console rotated its key, pin the new one from GET {SIGNING_KEYS_PATH} beside "
                "the old; otherwise the answer was not signed by this console.",
            )
        return key

    async def _fetch_public_keys(self) -> None:
        """Development only: trust the keys the console serves (a proxy could serve its own: pin them instead)."""
        try:
            listed = await self._call("GET", SIGNING_KEYS_PATH, None, WITHDRAW_TIMEOUT_SECONDS)
            keys = [entry["public_key"] for entry in listed["keys"]]
            self._public_keys.update(public_key_of(text) for text in keys)
        except (_Unreachable, RemoteWaitForError, KeyError, TypeError, ValueError) as exc:
            raise RemoteSignatureError(
                "unknown_key",
                f"Could not fetch the console's public keys from {self.base_url}{SIGNING_KEYS_PATH}: {exc}",
            ) from None
        logger.warning(
            "Verifying answers with public keys fetched from %s%s (%s): whatever answers there could sign its own. "
            "Pin them: RemoteWaitFor(..., public_keys=[...]) with these keys, not fetch_public_keys=True.",
            self.base_url,
            SIGNING_KEYS_PATH,
            ", ".join(sorted(self._public_keys)),
        )

    def _check_signature(
        self, request_id: str, body: dict[str, Any], signature: Any, key: Any, sent: _Sent | None
    ) -> None:
        """Refuse (RemoteSignatureError) an answer its signature does not vouch for as the answer to what this
        wait sent (``sent``: its own, never another wait's of the same id; None fails closed)."""
        from cryptography.exceptions import InvalidSignature

        try:
            key.verify(_unbase64url(signature["sig"]), signed_statement(body))
        except (InvalidSignature, KeyError, TypeError, ValueError, AttributeError):
            raise RemoteSignatureError(
                "bad_signature",
                f"The answer to request {request_id!r} does not match the console's signature by key "
                f"{signature.get('kid')}: it was forged or altered on the way. Do not act on it; check what sits "
                "between this host and the console.",
            ) from None
        if body.get("id") != request_id:
            raise RemoteSignatureError(
                "other_request",
                f"The answer handed over for request {request_id!r} is the console's signed answer to another "
                f"request ({str(body.get('id'))[:80]!r}): it was replayed. Do not act on it.",
            )
        if sent is None:
            raise RemoteSignatureError(
                "other_call",
                f"The answer to request {request_id!r} cannot be checked against the call this host sent: it does "
                "not know what it sent. Do not act on it.",
            )
        try:
            asked = call_digest(sent.tool, sent.args)
            runs = run_digest(sent.kind, sent.tool, sent.args, bool(body.get("ok")), body.get("data"))
        except CanonicalJSONError:
            asked = runs = ""
        if signature.get("call_digest") != asked:
            raise RemoteSignatureError(
                "other_call",
                f"The answer to request {request_id!r} was signed for another call ({str(signature.get('call_digest'))[:80]}) "
                f"than the one this host asked about ({asked}): the request id was used for a different call. Do "
                "not run it; open a new request.",
            )
        if signature.get("run_digest") != runs:
            raise RemoteSignatureError(
                "other_call",
                f"The answer to request {request_id!r} lets another call run ({str(signature.get('run_digest'))[:80]}) "
                f"than this host would run with its edits ({runs}). Do not run it.",
            )
        at = _deadline_of(signature.get("at")) if isinstance(signature.get("at"), str) else None
        if at is None or (sent.created and at < sent.first_sent_at - self.max_clock_skew):
            raise RemoteSignatureError(
                "stale",
                f"The answer to request {request_id!r} was signed at {str(signature.get('at'))[:40]}, before this "
                f"host asked (more than {self.max_clock_skew:g} s of clock skew): an old answer replayed. If the "
                "request id is reused on purpose, give each call a new one.",
            )

    async def _withdraw_quietly(self, request: Request, body: dict[str, Any], *, opened: bool) -> None:
        """Best effort, for a wait that is going away: make sure nobody answers into the void.

        If the POST may still be in flight, send it once more first: it is
        idempotent, so afterwards the request exists (or already existed) and the
        cancel cannot arrive before it.
        """
        try:
            if not opened:
                await self._call("POST", "/api/v1/requests", body, WITHDRAW_TIMEOUT_SECONDS)
            await self._withdraw(request.id, None)
        except Exception:
            pass

    # -- HTTP ------------------------------------------------------------------------

    async def _retrying(
        self,
        what: str,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        give_up_at: float | None,
        read_timeout: float,
    ) -> tuple[int, dict[str, Any]] | None:
        """One call, retried with exponential backoff while the console is unreachable: its HTTP status and JSON
        body, or None if patience runs out.

        Raises RemoteUnreachableError after ``attempts`` failures in a row, and a
        4xx's RemoteWaitForError at once.
        """
        delay = self.backoff_initial
        started = time.monotonic()
        for attempt in range(1, self.attempts + 1):
            try:
                return await asyncio.to_thread(self._exchange_blocking, method, path, body, read_timeout, what)
            except _Unreachable as exc:
                last_error = exc
            if attempt == self.attempts:
                break
            pause = delay * random.uniform(0.5, 1.0)
            if give_up_at is not None:
                if time.monotonic() + pause >= give_up_at:
                    return None
            await asyncio.sleep(pause)
            delay = min(delay * 2, self.backoff_max)
        raise RemoteUnreachableError(
            self.base_url + path.split("?", 1)[0], what, self.attempts, time.monotonic() - started, last_error
        )

    async def _call(
        self, method: str, path: str, body: dict[str, Any] | None, read_timeout: float, what: str | None = None
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            self._call_blocking, method, path, body, read_timeout, what or method + " " + path
        )

    def _call_blocking(
        self, method: str, path: str, body: dict[str, Any] | None, read_timeout: float, what: str
    ) -> dict[str, Any]:
        return self._exchange_blocking(method, path, body, read_timeout, what)[1]

    def _exchange_blocking(
        self, method: str, path: str, body: dict[str, Any] | None, read_timeout: float, what: str
    ) -> tuple[int, dict[str, Any]]:
        """The call's HTTP status (2xx) and JSON body; a 4xx raised as RemoteWaitForError, the rest as _Unreachable."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        call = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with self.opener.open(call, timeout=read_timeout) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            status = exc.code
            try:
                raw = exc.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            if status in RETRYABLE_STATUSES:
                raise _Unreachable(f"HTTP {status}") from None
            try:
                refusal = json.loads(raw)
            except ValueError:
                refusal = None
            if not isinstance(refusal, dict):  # not the console's JSON refusal (a proxy's page, say)
                refusal = {}
            error = refusal.get("error", "error")
            message = refusal.get("message") or raw.decode(errors="replace")[:200] or exc.reason
            kind = RemoteAuthError if status in (401, 403) else RemoteRequestError
            raise kind(status, error, message, f"The console refused to {what}") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError, resets and timeouts are OSErrors
            # ValueError: a body cut short that is not JSON; the call is worth repeating.
            raise _Unreachable(str(exc)) from None
