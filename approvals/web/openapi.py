"""The OpenAPI 3.1 description of /api/v1/, written by hand beside api.py.

Served at /api/v1/openapi.json. It states what the views really return, error
bodies included; tests/web/test_openapi.py checks every route in api_urls.py is here
and lets schemathesis hold the API to it.
"""

from collections.abc import Collection
from typing import Any

from django.conf import settings

from approvals import inbox, selectors
from approvals.inbox import bulk
from approvals.models import RequestStatus, RunStatus
from approvals.review import intake, outcomes
from approvals.runs import services

REF = "#/components/schemas/"

# A JSON Schema or OpenAPI object, as JSON: string keys, any JSON values.
Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": REF + name}


def _nullable(schema: Schema) -> Schema:
    return {"oneOf": [schema, {"type": "null"}]}


def _json(description: str, schema: Schema, **extra: Any) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}, **extra}


def _error(description: str) -> Schema:
    return _json(description, _ref("Error"))


UNAUTHORIZED = _json(
    "No credentials, or a bad, unknown or revoked token (`error` is `unauthenticated` or `invalid_token`).",
    _ref("Error"),
    headers={"WWW-Authenticate": {"schema": {"type": "string"}, "description": 'Bearer realm="toolnexus console"'}},
)
SHUTTING_DOWN = _json(
    "This console process is shutting down (SIGTERM) and starts no new runs (`error`: `shutting_down`): "
    'send it again, to another console (docs/operations.md, "Stopping a console").',
    _ref("Error"),
    headers={"Retry-After": {"schema": {"type": "string"}, "description": "Seconds: 1."}},
)
LOCKED_OUT = _json(
    "Too many refused tokens or failed logins from this client address (`error`: `locked_out`): no token is "
    "looked at until the cool-down ends; `Retry-After` says in how many seconds.",
    _ref("Error"),
    headers={"Retry-After": {"schema": {"type": "string"}, "description": "Seconds until the lockout lifts."}},
)
TOO_LARGE = _error("The body is larger than the console accepts (`error`: `too_large`).")
BAD_REQUEST = _error("The body or a parameter is not what this call takes; `message` says what to change.")
REQUEST_ID: Schema = {
    "name": "request_id",
    "in": "path",
    "required": True,
    "description": "The Request id the host or tool chose.",
    "schema": {"type": "string", "pattern": f"^{intake.ID_PATTERN.pattern}$"},
}
RUN_ID: Schema = {
    "name": "run_id",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
}
ANY_OBJECT = {"type": "object"}
FLAG = {"type": "string", "enum": list(inbox.FLAG_WORDS)}
# A choice may also be empty, as a form's empty field sends it: then it is left at its default.
SORT = {"type": "string", "enum": [*inbox.SORTS, ""]}
# The inbox's filters (approvals/inbox/), as query parameters; a bulk answer's filter takes the same.
FILTER_SCHEMAS: dict[str, Schema] = {
    "q": {"type": "string", "maxLength": inbox.TEXT_LIMITS["q"]},
    "status": {"type": "string", "enum": [*inbox.STATUS_CHOICES, ""]},
    "kind": {
        "type": "array",
        "maxItems": inbox.MAX_KIND_VALUES,
        "items": {"type": "string", "maxLength": inbox.MAX_KIND_TEXT},
    },
    "tool": {"type": "string", "maxLength": inbox.TEXT_LIMITS["tool"]},
    "host": {"type": "string", "maxLength": inbox.TEXT_LIMITS["host"]},
    "policy": {"type": "string", "maxLength": inbox.TEXT_LIMITS["policy"]},
    "starter": {"type": "string", "maxLength": inbox.TEXT_LIMITS["starter"]},
    "assigned": {"type": "string", "enum": ["me", ""]},
    "may_answer": FLAG,
    "expiring": FLAG,
}
FILTER_WORDS = {
    "q": "Text in the prompt, tool, args, host or requester's username (any case).",
    "status": "open, resolved, all, or one stored status; every status when left out.",
    "kind": "One or more kinds, repeated or comma-separated.",
    "tool": "The tool's name, exactly.",
    "host": "The remote host's name, exactly.",
    "policy": "The name of the policy that governs the request.",
    "starter": "Who set it going: its run's starter, or for a request without a run, who opened it.",
    "assigned": "`me`: assigned to the caller (by policy, by the request, or handed over).",
    "may_answer": "1: only those the caller may answer now.",
    "expiring": f"1: open ones whose deadline is within {int(inbox.EXPIRING_WITHIN.total_seconds() // 60)} minutes.",
}


def _schemas(tool_names: Collection[str]) -> dict[str, Schema]:
    tool_choices = {"enum": sorted(tool_names)} if tool_names else {}  # an empty enum is not valid JSON Schema
    answer_reason = {"type": "string", "enum": ["declined", "cancelled", "expired"]}
    request_view = {
        "type": "object",
        "description": "A stored request: the §10 wire fields (id, kind, prompt, url, data, expiresAt) and the console's own.",
        "required": [
            "id",
            "kind",
            "prompt",
            "url",
            "data",
            "expiresAt",
            "status",
            "run",
            "tool",
            "args",
            "arg_order",
            "host",
            "opened_by",
            "created_at",
            "answer",
            "comment",
            "answered_by",
            "answered_at",
            "form",
            "credentials",
            "decision",
            "requester",
            "starter",
        ],
        "properties": {
            "id": {"type": "string"},
            "kind": {"type": "string"},
            "prompt": {"type": "string"},
            "url": {"type": ["string", "null"]},
            "data": {"type": ["object", "null"]},
            "expiresAt": {"type": ["string", "null"], "description": "As sent, or the console's per-kind default."},
            "status": {"type": "string", "enum": list(RequestStatus.values)},
            "run": {
                "type": ["integer", "null"],
                "description": "The console run that raised it; null for a host's request.",
            },
            "tool": {"type": "string"},
            "args": ANY_OBJECT,
            "arg_order": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The names in `args` in the order to show them: the tool's input schema's order, "
                "then any others as sent (a JSON object's key order is not kept).",
            },
            "host": {"type": ["string", "null"], "description": "The remote host that opened it, as it named itself."},
            "opened_by": {"type": ["string", "null"], "description": "The user whose token opened it."},
            "requester": {"type": ["string", "null"], "description": "Who opened it (as `opened_by`)."},
            "starter": {
                "type": ["string", "null"],
                "description": "Who set it going: the starter of its run, or for a host's request, who opened it.",
            },
            "created_at": {"type": "string", "format": "date-time"},
            "answer": _nullable(_ref("Answer")),
            "comment": {"type": "string"},
            "answered_by": {"type": ["string", "null"]},
            "answered_at": {"type": ["string", "null"], "format": "date-time"},
            "claimed_by": {"type": ["string", "null"], "description": "The reviewer working on it."},
            "claimed_at": {"type": ["string", "null"], "format": "date-time"},
            "handed_to": {"type": ["string", "null"], "description": "A username or group:<name> it was handed to."},
            "form": {"type": ["object", "null"], "description": "How the dashboard renders the answer form."},
            "credentials": {
                "type": ["string", "null"],
                "description": "Why it may only be declined (it asks for a secret).",
            },
            "decision": _nullable(_ref("Decision")),
        },
    }
    run_view = {
        "type": "object",
        "required": [
            "id",
            "tool",
            "args",
            "timeout",
            "status",
            "result",
            "started_by",
            "cancel_requested",
            "created_at",
            "finished_at",
            "request",
        ],
        "properties": {
            "id": {"type": "integer"},
            "tool": {"type": "string"},
            "args": ANY_OBJECT,
            "timeout": {"type": ["number", "null"]},
            "status": {"type": "string", "enum": list(RunStatus.values)},
            "status_label": {
                "type": "string",
                "description": "The status for people: a tool run a person's refusal ended reads `declined`, "
                "`cancelled` or `expired`, not `failed`.",
            },
            "outcome_text": {
                "type": ["string", "null"],
                "description": "What became of a finished run, for people: the decision in words "
                "(`Declined by alice: too risky`) when a refusal ended it, else its result; null while active.",
            },
            "result": _nullable(
                {
                    "type": "object",
                    "required": ["output", "is_error"],
                    "properties": {"output": {"type": "string"}, "is_error": {"type": "boolean"}},
                }
            ),
            "started_by": {"type": ["string", "null"]},
            "cancel_requested": {"type": "boolean"},
            "created_at": {"type": "string", "format": "date-time"},
            "finished_at": {"type": ["string", "null"], "format": "date-time"},
            "request": _nullable(_ref("RequestView")),
            "kind": {"type": "string", "enum": ["tool", "agent"]},
            "label": {"type": "string", "description": "The tool's name, or `agent (<model>)`."},
            "agent": _nullable(
                {
                    "type": "object",
                    "required": ["prompt", "model"],
                    "properties": {"prompt": {"type": "string"}, "model": {"type": "string"}},
                }
            ),
            "retry_of": {"type": ["integer", "null"], "description": "The run this one retries."},
            "owner": {
                "type": "string",
                "description": "The console process executing it (`host:pid:id`; `host:pid:id:released` once a stopping console "
                "handed it over, until another adopts it).",
            },
            "cancel": _nullable(
                {
                    "type": "object",
                    "description": "Who may cancel an active run: its starter, and the facts of each open request it waits on.",
                    "required": ["run", "starter", "requests"],
                    "properties": {
                        "run": {"type": "integer"},
                        "starter": {"type": ["string", "null"]},
                        "requests": {"type": "array", "items": ANY_OBJECT},
                    },
                }
            ),
        },
    }
    transcript_entry = {
        "type": "object",
        "required": [
            "seq",
            "kind",
            "turn",
            "text",
            "call_id",
            "tool",
            "args",
            "is_error",
            "request",
            "data",
            "at",
            "decision",
        ],
        "properties": {
            "seq": {"type": "integer", "minimum": 1},
            "kind": {
                "type": "string",
                "enum": [
                    "prompt",
                    "thinking",
                    "assistant",
                    "tool_result",
                    "pending",
                    "asked",
                    "waiting",
                    "answer",
                    "resumed",
                    "stopped",
                    "finished",
                ],
            },
            "turn": {"type": ["integer", "null"]},
            "text": {"type": "string"},
            "call_id": {"type": ["string", "null"]},
            "tool": {"type": ["string", "null"]},
            "args": {"type": ["object", "null"]},
            "is_error": {"type": ["boolean", "null"]},
            "request": {
                "type": ["string", "null"],
                "description": "The request a pending/asked/waiting/answer entry is about.",
            },
            "data": {"type": ["object", "null"]},
            "at": {"type": "string", "format": "date-time"},
            "decision": {
                "oneOf": [_ref("Decision"), {"type": "null"}],
                "description": "An answer entry's request, decided: who, when, in words. Null for other entries.",
            },
        },
    }
    return {
        "Error": {
            "type": "object",
            "required": ["error", "message"],
            "properties": {
                "error": {
                    "type": "string",
                    "description": "unauthenticated | invalid_token | bad_json | bad_request | too_large | invalid | "
                    "not_found | not_open | conflict | forbidden | locked_out",
                },
                "message": {"type": "string", "description": "What went wrong, worded for a person."},
                "field": {"type": "string", "description": "The parameter or body field at fault, when one is."},
                "field_errors": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    "description": (
                        "With `error` `invalid`: what to fix, per field, each a list of messages. For an answer its "
                        "fields; for a new run its `args`, by argument name, as the tool's `input_schema` judges them. "
                        "`__all__` holds what concerns no one field."
                    ),
                },
            },
        },
        "Answer": {
            "type": "object",
            "description": "toolnexus §10 Answer in its wire keys; data and reason are left out when unset.",
            "required": ["id", "ok"],
            "properties": {
                "id": {"type": "string"},
                "ok": {"type": "boolean"},
                "data": ANY_OBJECT,
                "reason": answer_reason,
            },
            "additionalProperties": False,
        },
        "Decision": {
            "type": "object",
            "description": "What became of a resolved request, in words for a person: "
            '"Approved by alice", "Declined by bob: too large", "Cancelled by demo", "Expired at 18:31 UTC", '
            '"Approved by demo with amount 33 → 4". '
            "The tool's own result keeps the §10 wording (`declined/expired: <prompt>`).",
            "required": ["outcome", "by", "at", "comment", "changes", "text"],
            "properties": {
                "outcome": {"type": "string", "enum": list(outcomes.OUTCOMES)},
                "by": {
                    "type": ["string", "null"],
                    "description": "Who decided (for a request withdrawn with its run: who cancelled the run); "
                    "null for the console itself (an expiry, a stopping process).",
                },
                "at": {"type": ["string", "null"], "format": "date-time"},
                "comment": {"type": "string"},
                "changes": {
                    "type": "array",
                    "description": "What an approval changed before approving: each editable argument whose "
                    "approved value differs from what the tool asked, in the request's argument order, with "
                    "both raw values. Empty when nothing was edited, and for any other outcome.",
                    "items": {
                        "type": "object",
                        "required": ["field", "from", "to"],
                        "properties": {"field": {"type": "string"}, "from": {}, "to": {}},
                    },
                },
                "text": {"type": "string", "description": "The decision in one line, as the pages show it."},
            },
        },
        "NewRequest": {
            "type": "object",
            "description": (
                "toolnexus §10 Request in its wire keys, plus host, tool and args for display. "
                f"`data` and `args` may nest at most {intake.MAX_DATA_DEPTH} levels."
            ),
            "required": ["id", "kind", "prompt"],
            "properties": {
                "id": {"type": "string", "pattern": f"^{intake.ID_PATTERN.pattern}$"},
                "kind": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": intake.MAX_KIND_CHARS,
                    "pattern": intake.NOT_BLANK_PATTERN,
                },
                "prompt": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": intake.MAX_PROMPT_CHARS,
                    "pattern": intake.NOT_BLANK_PATTERN,
                },
                "url": {"type": ["string", "null"]},
                "data": {"type": ["object", "null"]},
                "expiresAt": {
                    "type": ["string", "null"],
                    "format": "date-time",
                    "maxLength": intake.MAX_EXPIRES_AT_CHARS,
                    "description": "RFC 3339 date-time with a time zone, e.g. 2030-01-01T12:00:00Z.",
                },
                "host": {"type": ["string", "null"], "maxLength": intake.MAX_LABEL_CHARS},
                "tool": {"type": ["string", "null"], "maxLength": intake.MAX_LABEL_CHARS},
                "args": {"type": ["object", "null"]},
            },
        },
        "RequestGroup": {
            "type": "object",
            "description": "One row of a grouped list: a run's requests, or requests with identical tool and args.",
            "required": ["key", "count", "request", "ids", "hosts", "host_count", "requesters", "requester_count"],
            "properties": {
                "key": {
                    "type": "string",
                    "description": "`run:<id>`, `run:none` (a host's requests) or `alike:<digest>`.",
                },
                "count": {"type": "integer", "minimum": 1, "description": "How many requests the group holds."},
                "request": _ref("RequestView"),
                "ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": inbox.GROUP_IDS,
                    "description": f"Its requests' ids in the list's order, the first {inbox.GROUP_IDS} at most.",
                },
                "hosts": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": inbox.GROUP_ORIGINS,
                    "description": f"The hosts its requests came from, sorted, the first {inbox.GROUP_ORIGINS} at most.",
                },
                "host_count": {"type": "integer", "minimum": 0, "description": "How many hosts it came from."},
                "requesters": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": inbox.GROUP_ORIGINS,
                    "description": "Who opened its requests that came from no host, sorted, as many at most.",
                },
                "requester_count": {"type": "integer", "minimum": 0, "description": "How many requesters."},
            },
        },
        "BulkBody": {
            "type": "object",
            "description": "Approve or decline the requests named by `ids`, by `filter`, or by both: those ids, "
            "each only while the filter still matches it.",
            "required": ["ok"],
            "anyOf": [{"required": ["ids"]}, {"required": ["filter"]}],
            "additionalProperties": False,
            "properties": {
                "ok": {"type": "boolean", "description": "true approves each request as it asked; false declines."},
                "comment": {"type": ["string", "null"], "description": "Sent with every answer."},
                "ids": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": bulk.MAX_REQUESTS,
                    "items": {"type": "string", "minLength": 1},
                    "description": "The requests to answer. After a dry run, its `answered` and `recorded`: "
                    "exactly what it named, never a request that arrived meanwhile.",
                },
                "filter": {
                    "type": "object",
                    "description": "The list's filters (and sort): every request they match at the time of the "
                    f"call, at most {bulk.MAX_REQUESTS}. `status` is `open` unless given.",
                    "additionalProperties": False,
                    "properties": {
                        **{name: schema for name, schema in FILTER_SCHEMAS.items() if name != "kind"},
                        "kind": {"oneOf": [FILTER_SCHEMAS["kind"]["items"], FILTER_SCHEMAS["kind"]]},
                        **{name: {"oneOf": [{"type": "boolean"}, FLAG]} for name in ("may_answer", "expiring")},
                        "sort": SORT,
                    },
                },
                "dry_run": {"type": "boolean", "description": "true: answer nothing, say what would happen."},
            },
        },
        "BulkOutcome": {
            "type": "object",
            "required": ["dry_run", "matched", "tools", "answered", "recorded", "skipped", "closed"],
            "properties": {
                "dry_run": {"type": "boolean"},
                "matched": {"type": "integer", "minimum": 0, "description": "How many requests the call named."},
                "tools": {
                    "type": "object",
                    "additionalProperties": {"type": "integer"},
                    "description": "How many of those answered or recorded (or that would be) per tool.",
                },
                "answered": {"type": "array", "items": {"type": "string"}, "description": "Answered (or would be)."},
                "recorded": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Approvals counted towards a quorum: these stay open for more reviewers.",
                },
                "skipped": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["id", "reason"],
                        "properties": {"id": {"type": "string"}, "reason": {"type": "string"}},
                    },
                    "description": "Not answered, each with why: not yours to answer, or (a yes to any kind but "
                    "an approval) it needs its own answer.",
                },
                "closed": {"type": "array", "items": {"type": "string"}, "description": "Already closed."},
            },
        },
        "AnswerBody": {
            "type": "object",
            "required": ["ok"],
            "properties": {
                "ok": {"type": "boolean", "description": "true approves or answers; false declines."},
                "data": {
                    "type": ["object", "null"],
                    "description": (
                        "Checked against the request's own schema. An approval's carries only `comment` and, "
                        "under `args`, the arguments the request marks editable."
                    ),
                },
                "reason": {
                    "type": ["string", "null"],
                    "enum": ["declined", "cancelled", None],
                    "description": "`expired` is the console's alone, given when a request's deadline passes.",
                },
                "comment": {"type": ["string", "null"]},
            },
        },
        "NewRun": {
            "type": "object",
            "description": "Either `tool` (one tool call with `args`) or `agent` (an agent loop), not both.",
            "oneOf": [
                {"required": ["tool"]},
                {"required": ["agent"], "properties": {"args": {"type": "null"}}},  # an agent's model picks args
            ],
            "properties": {
                "tool": {"type": "string", "description": "A tool this console serves.", **tool_choices},
                "args": {"type": ["object", "null"]},
                "agent": {
                    "type": "object",
                    "required": ["prompt"],
                    "properties": {
                        "prompt": {"type": "string", "minLength": 1},
                        "model": {
                            "type": "string",
                            "description": "A name in TOOLNEXUS['MODELS'], or `scripted` (the default).",
                        },
                    },
                },
                "timeout": {
                    "type": ["number", "null"],
                    "exclusiveMinimum": 0,
                    "maximum": services.MAX_RUN_TIMEOUT_SECONDS,
                    "description": "Seconds; at most 30 days.",
                },
            },
        },
        "TranscriptEntry": transcript_entry,
        "RequestView": request_view,
        "Run": run_view,
        "ApprovalRecorded": {
            "type": "object",
            "required": ["id", "status", "approvals", "quorum", "message"],
            "properties": {
                "id": {"type": "string"},
                "status": {"const": "open"},
                "approvals": {"type": "array", "items": {"type": "string"}, "description": "Who approved, in order."},
                "quorum": {"type": "integer", "description": "How many different reviewers must approve."},
                "message": {"type": "string"},
            },
        },
        "OpenStatus": {
            "type": "object",
            "required": ["id", "status"],
            "properties": {"id": {"type": "string"}, "status": {"const": "open"}},
            "additionalProperties": False,
        },
    }


def _paths() -> dict[str, Schema]:
    body_limit = settings.TOOLNEXUS["MAX_BODY_BYTES"]

    def body(schema_name: str) -> Schema:
        return {
            "required": True,
            "description": f"JSON, at most {body_limit} bytes.",
            "content": {"application/json": {"schema": _ref(schema_name)}},
        }

    return {
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document.",
                "security": [],
                "responses": {"200": _json("The OpenAPI 3.1 document.", ANY_OBJECT)},
            }
        },
        "/runs": {
            "post": {
                "operationId": "createRun",
                "summary": "Start a run: one server-side tool, or an agent loop over them.",
                "requestBody": body("NewRun"),
                "responses": {
                    "201": _json("The run, already running.", _ref("Run")),
                    "400": _error(
                        "Args that do not fit the tool's `input_schema` (required, types, enums, bounds): `error` "
                        "`invalid`, with `field_errors` naming each argument; nothing is stored. Otherwise "
                        "`bad_request`: an unknown tool or model, args that are not an object, a bad prompt or "
                        "timeout, a scripted prompt the model cannot follow, or a body that is not a JSON object."
                    ),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "413": TOO_LARGE,
                    "503": SHUTTING_DOWN,
                },
            }
        },
        "/runs/{run_id}": {
            "get": {
                "operationId": "getRun",
                "parameters": [RUN_ID],
                "responses": {
                    "200": _json("The run, with its latest request.", _ref("Run")),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "404": _error("There is no such run."),
                },
            }
        },
        "/runs/{run_id}/retry": {
            "post": {
                "operationId": "retryRun",
                "summary": "Start a finished run again: a new run with the same tool and args, or prompt and model.",
                "parameters": [RUN_ID],
                "responses": {
                    "201": _json("The new run (its `retry_of` is this run), already running.", _ref("Run")),
                    "400": _error(
                        "The run's input is no longer valid: its tool is gone, or its args no longer fit the tool's "
                        "`input_schema` (`invalid`, with `field_errors`)."
                    ),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "404": _error("There is no such run."),
                    "409": _error("The run is still active (`error`: `not_finished`)."),
                    "503": SHUTTING_DOWN,
                },
            }
        },
        "/runs/{run_id}/transcript": {
            "get": {
                "operationId": "getRunTranscript",
                "summary": "The run's transcript so far, oldest entry first.",
                "parameters": [RUN_ID],
                "responses": {
                    "200": _json(
                        "The entries.",
                        {
                            "type": "object",
                            "required": ["run", "entries"],
                            "properties": {
                                "run": {"type": "integer"},
                                "entries": {"type": "array", "items": _ref("TranscriptEntry")},
                            },
                        },
                    ),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "404": _error("There is no such run."),
                },
            }
        },
        "/runs/{run_id}/cancel": {
            "post": {
                "operationId": "cancelRun",
                "summary": "Trip the run's cancel token; the run ends `cancelled`.",
                "parameters": [RUN_ID],
                "responses": {
                    "202": _json(
                        "The cancel is recorded.",
                        {
                            "type": "object",
                            "required": ["id", "cancel_requested"],
                            "properties": {"id": {"type": "integer"}, "cancel_requested": {"const": True}},
                        },
                    ),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "403": _error(
                        "This user may not cancel the run (`error`: `forbidden`): only its starter, staff, or whoever "
                        "may answer the requests it waits on; with an API token, only runs the token's user started."
                    ),
                    "404": _error("There is no such run."),
                    "409": _error("The run has already finished."),
                },
            }
        },
        "/requests": {
            "get": {
                "operationId": "listRequests",
                "summary": "One page of the inbox: search, filter, sort or group the requests; follow 'next'.",
                "description": (
                    "Every filter given must hold. Without `status`, requests of every status are listed; the "
                    "dashboard asks for `status=open`. Pages follow each other by keyset: a request that "
                    "closes between two pages shifts no other into or out of view."
                ),
                "parameters": [
                    {"name": name, "in": "query", "schema": schema, "description": FILTER_WORDS[name]}
                    for name, schema in FILTER_SCHEMAS.items()
                ]
                + [
                    {
                        "name": "sort",
                        "in": "query",
                        "schema": SORT,
                        "description": "oldest (default), newest, or deadline (the nearest first, none last).",
                    },
                    {
                        "name": "group",
                        "in": "query",
                        "schema": {"type": "string", "enum": [*inbox.GROUPS, ""]},
                        "description": "One row per run, or per identical tool and args (`groups`).",
                    },
                    {
                        "name": "after",
                        "in": "query",
                        "description": "The 'next' of the page before (of the same sort and group); leave it out "
                        "for the first page.",
                        "schema": {"type": "string", "minLength": 1, "maxLength": 1000, "pattern": "^[A-Za-z0-9_-]+$"},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "description": f"Requests (or groups) per page (default {selectors.API_PAGE_ROWS}).",
                        "schema": {"type": "integer", "minimum": 1, "maximum": selectors.API_MAX_PAGE_ROWS},
                    },
                ],
                "responses": {
                    "200": _json(
                        "One page, with how many requests match in all and the next page's cursor.",
                        {
                            "type": "object",
                            "required": ["requests", "count", "next"],
                            "properties": {
                                "requests": {
                                    "type": "array",
                                    "items": _ref("RequestView"),
                                    "description": "The page's requests; grouped, each group's first.",
                                },
                                "count": {
                                    "type": "integer",
                                    "minimum": 0,
                                    "description": "How many requests match the filter, on every page.",
                                },
                                "next": {
                                    "type": ["string", "null"],
                                    "description": "Pass as 'after' for the next page; null on the last page.",
                                },
                                "groups": {
                                    "type": "array",
                                    "items": _ref("RequestGroup"),
                                    "description": "With `group` only: the page's groups.",
                                },
                            },
                        },
                    ),
                    "400": _error(
                        "A parameter it cannot take (`field` names it; `message` says what it takes), an unknown "
                        "policy, or an 'after' this console did not give out for this sort."
                    ),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                },
            },
            "post": {
                "operationId": "openRequest",
                "summary": "A remote host opens a §10 Request; it appears on the dashboard and in the audit trail.",
                "description": (
                    "Idempotent on `id`: sending the same request again returns it with 200 (in its current "
                    "state, possibly answered), so a host may retry freely. A different request under a used "
                    "`id` is 409."
                ),
                "requestBody": body("NewRequest"),
                "responses": {
                    "201": _json("Opened.", _ref("RequestView")),
                    "200": _json("This exact request was already opened; here it is.", _ref("RequestView")),
                    "400": _error(
                        "A limit or field is wrong: id (1–200 of A-Z a-z 0-9 . _ : -), kind, prompt (at most "
                        f"{intake.MAX_PROMPT_CHARS} characters), data nested deeper than {intake.MAX_DATA_DEPTH}, "
                        "or expiresAt not an RFC 3339 date-time."
                    ),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "409": _error(
                        "A different request already has this id (`error`: `conflict`); `message` names the fields."
                    ),
                    "413": TOO_LARGE,
                },
            },
        },
        "/requests/bulk": {
            "post": {
                "operationId": "answerInBulk",
                "summary": "Approve or decline many requests at once: each through the one door, each audited.",
                "description": (
                    "Name the requests by `ids` or by the inbox's `filter` (what it matches at the time of the "
                    "call). With `dry_run` nothing is answered: the reply says what would happen, for a "
                    "confirmation; send its `answered` and `recorded` as `ids` (with the same `filter`, if you "
                    "like) to answer exactly those. A request this user may not answer, or that needs more than a "
                    "yes (any kind but an approval: a form, a question, an authorization), is skipped with the "
                    "reason; one already closed is listed as closed. An approval never carries edited arguments."
                ),
                "requestBody": body("BulkBody"),
                "responses": {
                    "200": _json("What was answered, recorded, skipped and already closed.", _ref("BulkOutcome")),
                    "400": _error(
                        f"A field it cannot take (`field` names it), more than {bulk.MAX_REQUESTS} requests, or an "
                        "unknown policy in the filter."
                    ),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "413": TOO_LARGE,
                },
            }
        },
        "/requests/{request_id}": {
            "get": {
                "operationId": "getRequest",
                "summary": "The request as this user sees it now: its status, decision, claim and policy.",
                "parameters": [REQUEST_ID],
                "responses": {
                    "200": _json("The request.", _ref("RequestView")),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "404": _error("There is no such request."),
                },
            }
        },
        "/requests/{request_id}/answer": {
            "get": {
                "operationId": "awaitAnswer",
                "summary": "Long-poll for the request's Answer.",
                "description": (
                    "Returns as soon as the request is resolved (answered, declined, cancelled or expired), or "
                    "after `wait` seconds with 202 if it is still open. A request past its expiresAt is expired "
                    "on the way out."
                ),
                "parameters": [
                    REQUEST_ID,
                    {
                        "name": "wait",
                        "in": "query",
                        "description": "How long to hold the call open while the request is open.",
                        "schema": {"type": "number", "minimum": 0, "maximum": intake.MAX_WAIT_SECONDS, "default": 0},
                    },
                ],
                "responses": {
                    "200": _json("The stored Answer.", _ref("Answer")),
                    "202": _json("Still open after the wait; ask again.", _ref("OpenStatus")),
                    "400": _error(f"`wait` is not a number of seconds from 0 to {intake.MAX_WAIT_SECONDS}."),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "404": _error("There is no such request."),
                },
            },
            "post": {
                "operationId": "answerRequest",
                "summary": "A reviewer answers: approve / answer (ok true) or decline (ok false).",
                "parameters": [REQUEST_ID],
                "requestBody": body("AnswerBody"),
                "responses": {
                    "200": _json("The stored Answer.", _ref("Answer")),
                    "202": _json(
                        "An approval counted towards the policy's quorum; the request stays open.",
                        _ref("ApprovalRecorded"),
                    ),
                    "400": _error(
                        "No boolean `ok`, a bad reason, or data that does not fit the request (`field_errors`)."
                    ),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "403": _error("The request's policy does not let this user answer it (`error`: `forbidden`)."),
                    "404": _error("There is no such request."),
                    "409": _error("Already resolved; `message` names who and when."),
                    "413": TOO_LARGE,
                },
            },
        },
        "/requests/{request_id}/claim": _claim_path(
            "claimRequest",
            "Take an open request: others see who is on it.",
            None,
            "Someone else holds it (`message` names them), or it is already resolved.",
        ),
        "/requests/{request_id}/release": _claim_path(
            "releaseRequest",
            "Let go of a request you hold (staff: anyone's).",
            None,
            "Someone else changed who holds it, or it is already resolved.",
        ),
        "/requests/{request_id}/hand": _claim_path(
            "handRequest",
            "Hand an open request to a user or a group; it shows as assigned to them.",
            {
                "type": "object",
                "required": ["to"],
                "properties": {
                    "to": {
                        "type": "string",
                        "pattern": intake.NOT_BLANK_PATTERN,
                        "description": "A username, or group:<name>.",
                    }
                },
            },
            "Someone else holds it or changed it meanwhile, or it is already resolved.",
        ),
        "/requests/{request_id}/cancel": {
            "post": {
                "operationId": "withdrawRequest",
                "summary": "The host that opened a request withdraws it (ok false, reason cancelled).",
                "parameters": [REQUEST_ID],
                "responses": {
                    "200": _json("The stored Answer.", _ref("Answer")),
                    "401": UNAUTHORIZED,
                    "429": LOCKED_OUT,
                    "403": _error("Only the user whose token opened the request can withdraw it."),
                    "404": _error("There is no such request."),
                    "409": _error("Already resolved; `message` names who and when."),
                },
            }
        },
    }


def _claim_path(operation_id: str, summary: str, body_schema: Schema | None, conflict: str) -> Schema:
    post: Schema = {
        "operationId": operation_id,
        "summary": summary,
        "parameters": [REQUEST_ID],
        "responses": {
            "200": _json("The request as it is now.", _ref("RequestView")),
            "400": _error("`to` names no active user or existing group (`field_errors`)."),
            "401": UNAUTHORIZED,
            "429": LOCKED_OUT,
            "403": _error("Its policy does not let this user decide it, or someone else holds it."),
            "404": _error("There is no such request."),
            "409": _error(conflict),
        },
    }
    if body_schema is not None:
        post["requestBody"] = {"required": True, "content": {"application/json": {"schema": body_schema}}}
        post["responses"]["413"] = TOO_LARGE
    return {"post": post}


def document(tool_names: Collection[str] = ()) -> Schema:
    """The OpenAPI document as a dict, with ``tool_names`` (the served tools) as the runs' choices.

    Built on each call: the tools and the body limit come from this console's settings.
    """
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "toolnexus console API",
            "version": "1",
            "description": (
                "Runs of server-side tools, and toolnexus §10 requests from any host: open one, long-poll its "
                "Answer, withdraw it. Authenticate with `Authorization: Bearer <token>` (issue one at /tokens/ or "
                "with `manage.py issue_token`), or with the console's session cookie plus `X-CSRFToken`. Answers "
                "to a host's requests are also pushed on the WebSocket /ws/host/ (same token). Bodies are JSON "
                "without NaN or Infinity, and no string in them may hold U+0000 or a lone surrogate (neither can be "
                "stored): such a body is refused with `error` `bad_json`."
            ),
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearerAuth": []}, {"sessionAuth": []}],
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API token. Bearer calls need no CSRF token.",
                },
                "sessionAuth": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": settings.SESSION_COOKIE_NAME,
                    "description": "The console's login session; unsafe methods also need the X-CSRFToken header.",
                },
            },
            "schemas": _schemas(tool_names),
        },
        "paths": _paths(),
    }
