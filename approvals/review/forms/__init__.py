"""Turn a request's flat JSON Schema into a form, and the form's values back into JSON.

An ``input`` request carries a JSON Schema in ``data.schema`` (MCP elicitation's
flat subset). The browser draws a form from :func:`describe_form` (``schema.py``),
sends back raw form values (strings, bools, choice keys), and the server converts
them with :func:`values_from_form` (``convert.py``) and judges them with the
``jsonschema`` library (:func:`field_errors` in ``errors.py``, Draft 2020-12 with a
``FormatChecker``), so errors come back per field and land next to the right input.
The server is always the judge: the form's hints (``min``, ``pattern``...) only help
the reviewer. ``editable.py`` gives the form of an approval's editable arguments.

§10's trust boundary says ``input`` and ``question`` must never collect
credentials; :func:`credential_refusal` (``credentials.py``) spots requests that try.

Plain functions, no Django: this package is pure and tested on its own. Callers import
from the package, which re-exports what they use.
"""

from approvals.review.forms.convert import answer_errors, values_from_form
from approvals.review.forms.credentials import credential_refusal, looks_like_credential
from approvals.review.forms.editable import editable_schema
from approvals.review.forms.errors import SOME_TEXT, field_errors, question_answer_errors
from approvals.review.forms.schema import describe_form
from approvals.review.forms.values import NON_FIELD, request_schema

__all__ = [
    "NON_FIELD",
    "SOME_TEXT",
    "answer_errors",
    "credential_refusal",
    "describe_form",
    "editable_schema",
    "field_errors",
    "looks_like_credential",
    "question_answer_errors",
    "request_schema",
    "values_from_form",
]
