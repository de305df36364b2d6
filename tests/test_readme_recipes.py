"""The README's API recipe, run exactly as written (with only the port changed) against a live console.

The block after the marker comment in "The JSON API" is handed to bash as it stands: its
``manage.py`` calls reach the live console's database through the environment, its curl
calls reach the live daphne.
"""

import json
import re
import subprocess

from tests.support.live_console import REPO, manage

MARKER = "<!-- tests/test_readme_recipes.py runs the next block as written, against a live console. -->"
README_URL = "http://127.0.0.1:8000"
CREATE_DEMO_USER = (
    "from django.contrib.auth import get_user_model; "
    "get_user_model().objects.filter(username='demo').exists() or "
    "get_user_model().objects.create_superuser('demo', '', 'demo-Pass-for-recipes-9981')"
)


def readme_recipe():
    readme = (REPO / "README.md").read_text()
    assert readme.count(MARKER) == 1, "the README's tested recipe lost its marker"
    block = re.match(r"\s*```sh\n(.*?)\n```", readme.split(MARKER, 1)[1], re.S)
    assert block, "the marker must be followed by a ```sh block"
    return block.group(1)


def test_the_readmes_api_recipe_works_as_written(live):
    recipe = readme_recipe()
    assert README_URL in recipe
    manage(live.env, "shell", "--no-imports", "-c", CREATE_DEMO_USER)  # the user `make run` prints

    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", recipe.replace(README_URL, live.base_url)],
        cwd=REPO,
        env=live.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"the recipe failed:\n{done.stdout}\n{done.stderr}"
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert (run["tool"], run["started_by"]) == ("deploy", "demo"), run

    status, stored = live.call("GET", f"/api/v1/runs/{run['id']}")
    assert status == 200 and stored["tool"] == "deploy"
    demos_token = manage(live.env, "issue_token", "demo").strip()  # a token cancels only its own user's runs
    assert live.call("POST", f"/api/v1/runs/{run['id']}/cancel", token=demos_token)[0] == 202  # nothing left open
