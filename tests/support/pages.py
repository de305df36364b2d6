"""Reading the console's server-rendered pages as their scripts do."""

import json
import re


def json_script(content, element_id):
    """The value of a ``json_script`` element, parsed, as the page's script would read it."""
    match = re.search(
        rf'<script id="{re.escape(element_id)}" type="application/json">(.*?)</script>', content, re.DOTALL
    )
    assert match, f"no json_script #{element_id} in the page"
    return json.loads(match.group(1))
