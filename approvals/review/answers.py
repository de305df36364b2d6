"""What a reviewer's answer must look like, per kind of request (§10's open ``kind`` vocabulary).

The browser and the API reach the same rules here: the dashboard sends raw form
values (``form``) that are converted and validated against the request's own
schema; programs send typed ``data`` validated the same way.
"""

from collections.abc import Mapping
from typing import Any, TypedDict

from channels.db import database_sync_to_async
from toolnexus.types import JSONSchema

from approvals.models import Request, RequestApproval
from approvals.review import forms
from approvals.review.forms.values import FieldErrors


class AnswerInvalid(ValueError):
    def __init__(self, message: str, field_errors: FieldErrors | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field_errors = field_errors or {}


def credential_refusal(request: Request) -> str | None:
    """Why this request may not be answered with data (it asks for a secret), or None."""
    return forms.credential_refusal(request.kind, request.data)


def asked_inside_a_call(request: Request) -> bool:
    """Whether ``request`` was asked from inside a running call (an MCP server's elicitation, console_wait_for,
    a hook's ask): tied to a run, but not a suspension its tool returned (``resumable``). Its tool is already
    running, so there is no call to answer instead of or to change: the answer goes back to what asked."""
    return request.run_id is not None and not request.resumable


def responses_for(request: Request) -> list[str]:
    """What a reviewer may answer instead of running the tool (decisions.RESPONSES), besides approving or
    declining: "respond" to an approval, an input or a question, "request_changes" to an approval. Never to an
    authorization or a request that asks for a secret, nor to one asked from inside a running call."""
    if asked_inside_a_call(request) or credential_refusal(request):
        return []
    if request.kind == "approval":
        return ["respond", "request_changes"]
    return ["respond"] if request.kind in ("input", "question") else []


def approval_edit_schema(request: Request) -> JSONSchema | None:
    """The flat schema of an approval's editable args, or None when nothing is editable."""
    if request.kind != "approval" or not isinstance(request.data, dict):
        return None
    return forms.editable_schema(request.data, request.tool_input_schema, request.args or {})


def form_for(request: Request, *, none_approved: bool = False) -> dict[str, Any] | None:
    """The form description the dashboard renders for this request, or None.

    ``none_approved``: the caller knows nobody approved it yet (a request just opened), so the form's
    defaults are the tool's own without reading the first approval."""
    if credential_refusal(request):
        return None
    if request.kind == "input":
        schema = forms.request_schema(request.data)
        if schema is None:
            return {"renderable": False, "reason": "This input request has no data.schema to build a form from."}
        return forms.describe_form(schema)
    edit_schema = approval_edit_schema(request)
    if edit_schema is not None:
        return forms.describe_form(edit_schema if none_approved else _showing_first_approval(edit_schema, request))
    return None


def approved_values(data: dict[str, Any] | None) -> dict[str, Any]:
    """What an approval approves, comments aside: later approvers must approve the same values."""
    return {key: value for key, value in (data or {}).items() if key != "comment"}


# One argument a reviewer changed before approving (the decision's "changes"): its name, what the tool
# asked and what was approved, both raw JSON. Declared this way because "from" is a Python keyword.
Change = TypedDict("Change", {"field": str, "from": Any, "to": Any})


def same_value(asked: object, approved: object) -> bool:
    """Whether two typed JSON values are the same: 33 and 33.0 are; "33" and 33, or 1 and true, are not."""
    if isinstance(asked, bool) or isinstance(approved, bool):
        return type(asked) is type(approved) and asked == approved
    if isinstance(asked, int | float) and isinstance(approved, int | float):
        return asked == approved
    if isinstance(asked, list) and isinstance(approved, list):
        return len(asked) == len(approved) and all(map(same_value, asked, approved))
    if isinstance(asked, dict) and isinstance(approved, dict):
        return asked.keys() == approved.keys() and all(same_value(asked[key], approved[key]) for key in asked)
    return type(asked) is type(approved) and asked == approved


def edited_args(request: Request, data: object) -> list[Change]:
    """What an approval's answer ``data`` changed in what the tool asked: the editable args whose approved
    value differs from the asked one, in the request's argument order (``arg_order``, else the args' own).

    The asked value is ``Request.args``' own, or, for an argument the tool did not pass, the default the
    reviewer's form showed (the tool's schema default, or ``data.args.values``). Empty when nothing changed.
    """
    approved = data.get("args") if isinstance(data, dict) else None
    if request.kind != "approval" or not isinstance(approved, dict) or not approved:
        return []
    asked = request.args if isinstance(request.args, dict) else {}
    order = [name for name in (request.arg_order or asked) if isinstance(name, str)]
    order += [name for name in approved if name not in order]
    shown_defaults: dict[str, Any] = {}
    if any(name not in asked for name in approved):
        schema = approval_edit_schema(request) or {}
        properties = schema.get("properties")
        for name, prop in (properties if isinstance(properties, dict) else {}).items():
            if isinstance(prop, dict) and "default" in prop:
                shown_defaults[name] = prop["default"]
    changes: list[Change] = []
    for name in dict.fromkeys(order):
        if name not in approved:
            continue
        before = asked[name] if name in asked else shown_defaults.get(name)
        if not same_value(before, approved[name]):
            changes.append({"field": name, "from": before, "to": approved[name]})
    return changes


def mergeable_edits(args: Mapping[str, Any], data: object, input_schema: object) -> dict[str, Any]:
    """The approved edits (``data["args"]``) the retry may pass to the tool as its own arguments: those whose
    name is a property of the tool's ``input_schema`` or an argument the call already had. An approval may
    declare editable fields of its own (``data.args = {schema, values}``) that the tool does not take: they
    stay in ``answer.data["args"]`` only, or the tool would be called with a keyword it does not know."""
    edits = data.get("args") if isinstance(data, dict) else None
    if not isinstance(edits, dict):
        return {}
    properties = input_schema.get("properties") if isinstance(input_schema, dict) else None
    params = properties if isinstance(properties, dict) else {}
    return {name: value for name, value in edits.items() if name in params or name in args}


def retry_args(kind: str, args: Mapping[str, Any], data: object, input_schema: object) -> dict[str, Any]:
    """The arguments a call is re-executed with after an ok answer (§10's retry): for an approval, the request's
    own with the approved edits the tool takes (``mergeable_edits``: ``data["args"]``, editable arguments only,
    checked when it was answered) over them, shallowly; for any other kind, or an approval without edits, the
    request's own. ``data`` itself is not changed: a tool that reads ``answer.data["args"]`` keeps working."""
    if kind != "approval":
        return dict(args)
    return {**args, **mergeable_edits(args, data, input_schema)}


def approved_changes(request_id: str, data: object) -> list[Change]:
    """What an ok answer's ``data`` changed in the arguments the retry passes the tool (``edited_args`` limited to
    ``mergeable_edits``: the decision's "changes" also hold an approval's own fields, which the tool reads from
    ``answer.data`` and the model is not told of). Reads the request only when the answer carries edits."""
    edits = data.get("args") if isinstance(data, dict) else None
    if not isinstance(edits, dict) or not edits:
        return []
    request = (
        Request.objects.filter(pk=request_id).only("kind", "args", "arg_order", "data", "tool_input_schema").first()
    )
    if request is None:
        return []
    merged = mergeable_edits(request.args if isinstance(request.args, dict) else {}, data, request.tool_input_schema)
    return [change for change in edited_args(request, data) if change["field"] in merged]


aapproved_changes = database_sync_to_async(approved_changes)


def _first_approval(request: Request) -> RequestApproval | None:
    if "approvals" in getattr(request, "_prefetched_objects_cache", {}):
        rows = sorted(request.approvals.all(), key=lambda a: a.pk)
        return rows[0] if rows else None
    return request.approvals.order_by("id").first()


def _showing_first_approval(schema: JSONSchema, request: Request) -> JSONSchema:
    """Under a quorum the next reviewer must approve what the first one approved: the form opens showing it."""
    first = _first_approval(request)
    properties = schema.get("properties")
    if first is None or not isinstance(properties, dict):
        return schema
    edited = approved_values(first.data).get("args")
    for name, value in (edited if isinstance(edited, dict) else {}).items():
        if isinstance(properties.get(name), dict):
            properties[name]["default"] = value
    return schema


def _typed(schema: JSONSchema, data: Any, form: object) -> Any:
    if form is not None:
        if not isinstance(form, dict):
            raise AnswerInvalid("form must be a JSON object of field values.")
        value, errors = forms.answer_errors(schema, form)
    else:
        value = data if data is not None else {}
        errors = forms.field_errors(schema, value)
    if errors:
        raise AnswerInvalid("Some fields need attention.", errors)
    return value


def validated_answer_data(
    request: Request, *, data: object = None, form: object = None, comment: str | None = ""
) -> dict[str, Any] | None:
    """The ``Answer.data`` to store for an ok answer; raises AnswerInvalid with per-field errors."""
    if data is not None and not isinstance(data, dict):
        raise AnswerInvalid("data must be a JSON object.")
    refusal = credential_refusal(request)
    if refusal:
        raise AnswerInvalid(refusal)
    if request.kind == "input":
        schema = forms.request_schema(request.data)
        if schema is None:
            return data
        return _typed(schema, data, form)
    if request.kind == "question":
        errors = forms.question_answer_errors(request.data or {}, data)
        if errors:
            raise AnswerInvalid("Answer each question.", errors)
        return data
    if request.kind == "approval":
        return _approval_data(request, data or {}, form, comment)
    if request.kind == "authorization":
        return _authorization_data(data or {}, comment)
    return data


def _authorization_data(data: dict[str, Any], comment: str | None) -> dict[str, Any] | None:
    """An authorization's answer says "done" and hands nothing over: at most a comment."""
    errors = {
        key: ["An authorization's answer carries only 'comment': the sign-in happened at its link."]
        for key in data
        if key != "comment"
    }
    if "comment" in data and not isinstance(data["comment"], str):
        errors["comment"] = ["Enter the comment as text."]
    if errors:
        raise AnswerInvalid("Some fields need attention.", errors)
    comment = comment or data.get("comment") or ""
    return {"comment": comment} if comment else None


APPROVAL_KEYS = ("comment", "args")


def _approval_data(request: Request, data: dict[str, Any], form: object, comment: str | None) -> dict[str, Any] | None:
    """An approval approves what the tool asked: its answer carries a comment and, where the
    request marks arguments editable, those arguments (typed and bounded by their declared schema)."""
    errors = {
        key: ["An approval's answer carries only 'comment' and the editable 'args'."]
        for key in data
        if key not in APPROVAL_KEYS
    }
    if "comment" in data and not isinstance(data["comment"], str):
        errors["comment"] = ["Enter the comment as text."]
    result = {key: value for key, value in data.items() if key in APPROVAL_KEYS}
    edit_schema = approval_edit_schema(request)
    if edit_schema is None:
        if "args" in result:
            errors["args"] = ["Nothing in this request is editable: approve it as asked, without 'args'."]
    elif form is not None or "args" in result:
        properties = edit_schema.get("properties")
        editable = list(properties) if isinstance(properties, dict) else []
        which = f"only {', '.join(editable)} may be changed" if editable else "none may be changed"
        sent = form if form is not None else result.get("args")
        for name in sent if isinstance(sent, dict) else ():
            if name not in editable:
                errors[name] = [f"{name} is not editable in this request; {which}."]
        if not errors:
            result["args"] = _typed(edit_schema, result.get("args"), form)
    if errors:
        raise AnswerInvalid("Some fields need attention.", errors)
    if comment:
        result["comment"] = comment
    return result or None
