"""§10's trust boundary: ``input`` and ``question`` requests never collect credentials. This spots a
request whose schema or questions ask for a password, token, key or secret."""

import re

from approvals.review.forms.values import request_schema

# A name is split into words (snake_case, kebab-case, camelCase, digits: "apiKey2" ->
# api, key, 2). It asks for a credential when a word is one of these...
_SECRET_WORDS = {
    "password",
    "passwords",
    "passwd",
    "passphrase",
    "passcode",
    "secret",
    "secrets",
    "token",
    "credential",
    "credentials",
    "apikey",
    "privatekey",
    "accesskey",
}
# ...or ends in one of these (lower-case compounds such as "authtoken", "clientsecret")...
_SECRET_SUFFIXES = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "privatekey",
    "accesskey",
    "credential",
    "credentials",
)
# ...or two neighbouring words make one of these.
_SECRET_PAIRS = {("api", "key"), ("private", "key"), ("access", "key"), ("ssh", "key")}
# "token" next to a word about quantity is the LLM kind ("token_count", "max_token").
_QUANTITY_WORDS = {
    "count",
    "counts",
    "limit",
    "limits",
    "budget",
    "usage",
    "used",
    "total",
    "number",
    "num",
    "max",
    "min",
}
_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_NEVER = "The console never collects credentials; the reviewer can only decline this request."


def looks_like_credential(text: object) -> bool:
    """Whether a field name, title or question asks for a password, token, key or secret.

    Word-wise, so "auth_token", "apiKey", "client_secret", "password2" and "What is
    your password?" match while "tokenizer", "max_tokens", "token_count" and
    "secretary" do not.
    """
    if not isinstance(text, str):
        return False
    words = [w.lower() for w in _WORD_RE.findall(text)]
    for i, word in enumerate(words):
        neighbours = set(words[max(i - 1, 0) : i] + words[i + 1 : i + 2])
        if word == "token" and neighbours & _QUANTITY_WORDS:
            continue
        if word in _SECRET_WORDS or word.endswith(_SECRET_SUFFIXES):
            return True
        if i + 1 < len(words) and (word, words[i + 1]) in _SECRET_PAIRS:
            return True
    return False


def credential_refusal(kind: str, data: object) -> str | None:
    """Why this request must not be answered with a form (§10), or None when it may.

    ``input``: a property anywhere in ``data.schema`` with ``format: "password"``,
    ``writeOnly: true``, or a name or title that :func:`looks_like_credential`.
    ``question``: a question or header that looks like it asks for a credential.
    Other kinds collect no data from the reviewer and are never refused.
    """
    if kind == "input":
        schema = request_schema(data)
        return _schema_refusal(schema, "") if schema is not None else None
    if kind == "question":
        questions = data.get("questions") if isinstance(data, dict) else None
        for number, question in enumerate(questions if isinstance(questions, list) else [], start=1):
            if not isinstance(question, dict):
                continue
            for key in ("question", "header"):
                text = question.get(key)
                if looks_like_credential(text):
                    return f'Question {number} ("{text}") asks for a credential. {_NEVER}'
    return None


def _schema_refusal(schema: object, path: str) -> str | None:
    """Walk a schema and its subschemas for a property that collects a secret."""
    if isinstance(schema, list):
        for item in schema:
            refusal = _schema_refusal(item, path)
            if refusal:
                return refusal
        return None
    if not isinstance(schema, dict):
        return None
    where = f'Field "{path}"' if path else "The request's schema"
    if schema.get("format") == "password":
        return f'{where} is a password field (format "password"). {_NEVER}'
    if schema.get("writeOnly") is True:
        return f"{where} is write-only (writeOnly), which marks a secret. {_NEVER}"
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            full = f"{path}.{name}" if path else str(name)
            title = sub.get("title") if isinstance(sub, dict) else None
            if looks_like_credential(str(name)) or looks_like_credential(title):
                return f'Field "{full}" asks for a credential (its name or title looks like a password, token or key). {_NEVER}'
            refusal = _schema_refusal(sub, full)
            if refusal:
                return refusal
    for key in ("items", "prefixItems", "additionalProperties", "oneOf", "anyOf", "allOf", "not", "if", "then", "else"):
        refusal = _schema_refusal(schema.get(key), path)
        if refusal:
            return refusal
    for key in ("$defs", "definitions", "patternProperties"):
        group = schema.get(key)
        if isinstance(group, dict):
            refusal = _schema_refusal(list(group.values()), path)
            if refusal:
                return refusal
    return None
