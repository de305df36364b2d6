"""Editable approvals: the flat schema of the arguments a reviewer may change before approving."""

import copy
from typing import Any

from toolnexus.types import JSONSchema


def editable_schema(request_data: object, tool_input_schema: object, args: object) -> JSONSchema | None:
    """A flat object schema for the arguments a reviewer may change, or None.

    ``request_data["args"] == {"schema": {...}, "values": {...}}`` gives the schema
    outright (its defaults become the values). Otherwise ``request_data["editable"]``
    lists argument names: each property's schema comes from the tool's input schema
    when it has one, else is inferred from the current value's JSON type, and its
    ``default`` is the current value so the form opens showing it.
    """
    request_data = request_data if isinstance(request_data, dict) else {}
    args = args if isinstance(args, dict) else {}
    given = request_data.get("args")
    if isinstance(given, dict) and isinstance(given.get("schema"), dict):
        schema = copy.deepcopy(given["schema"])
        values: Any = given.get("values") if isinstance(given.get("values"), dict) else {}
        properties = schema.get("properties")
        if isinstance(properties, dict):
            for name, value in values.items():
                if isinstance(properties.get(name), dict):
                    properties[name]["default"] = copy.deepcopy(value)
        return schema
    names = request_data.get("editable")
    if not isinstance(names, list):
        return None
    tool_schema = tool_input_schema if isinstance(tool_input_schema, dict) else {}
    tool_properties: Any = tool_schema.get("properties") if isinstance(tool_schema.get("properties"), dict) else {}
    tool_required: Any = tool_schema.get("required") if isinstance(tool_schema.get("required"), list) else []
    properties, required = {}, []
    for name in names:
        if not isinstance(name, str) or name in properties:
            continue
        if isinstance(tool_properties.get(name), dict):
            prop = copy.deepcopy(tool_properties[name])
        elif name in args:
            prop = _inferred(args[name])
        else:
            continue  # neither declared nor given: nothing to show
        if name in args:
            prop["default"] = copy.deepcopy(args[name])
        properties[name] = prop
        if name in tool_required:
            required.append(name)
    if not properties:
        return None
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _inferred(value: object) -> JSONSchema:
    """The JSON type of a current argument value, as a schema (no guess for null)."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object"}
    return {}
