"""The models an agent run can use: ``TOOLNEXUS["MODELS"]`` plus the built-in scripted model.

Each configured model is ``name -> {"style": "openai" | "anthropic", "base_url", "model",
"api_key_env"}``. The API key is read from the environment variable ``api_key_env``
names when a run starts; it is handed to toolnexus' client and nowhere else: never
stored, logged or shown (the catalog only says whether the variable is set).
"""

import os
from typing import Any, cast

from django.conf import settings
from toolnexus import Client, create_client, create_in_process_client
from toolnexus.client import ClientStyle

from approvals.runs.scripted_model import SCRIPTED_MODEL, scripted_generate

STYLES = ("openai", "anthropic")
REQUIRED_KEYS = ("style", "base_url", "model", "api_key_env")


class ModelConfigError(ValueError):
    """A model that cannot be used as configured or asked for; the message says what to change."""


def configured_models() -> dict[str, dict[str, str]]:
    """``TOOLNEXUS["MODELS"]``, checked: raises ModelConfigError naming the entry and the problem."""
    models = settings.TOOLNEXUS.get("MODELS") or {}
    if not isinstance(models, dict):
        raise ModelConfigError('TOOLNEXUS["MODELS"] must map model names to settings objects.')
    for name, config in models.items():
        if name == SCRIPTED_MODEL:
            raise ModelConfigError(f'TOOLNEXUS["MODELS"]: the name {SCRIPTED_MODEL!r} is the built-in scripted model.')
        if not isinstance(config, dict):
            raise ModelConfigError(f'TOOLNEXUS["MODELS"][{name!r}] must be an object with {", ".join(REQUIRED_KEYS)}.')
        missing = [key for key in REQUIRED_KEYS if not config.get(key)]
        if missing:
            raise ModelConfigError(f'TOOLNEXUS["MODELS"][{name!r}] is missing {", ".join(missing)}.')
        if config["style"] not in STYLES:
            raise ModelConfigError(
                f'TOOLNEXUS["MODELS"][{name!r}]["style"] is {config["style"]!r}; use "openai" or "anthropic".'
            )
    return models


def model_catalog() -> list[dict[str, Any]]:
    """What the Start-an-agent form lists: names, styles and whether each is ready. No key values."""
    catalog = [{"name": SCRIPTED_MODEL, "style": "in-process", "model": SCRIPTED_MODEL, "ready": True, "problem": None}]
    try:
        models = configured_models()
    except ModelConfigError as exc:
        return catalog + [{"name": "(settings)", "style": "", "model": "", "ready": False, "problem": str(exc)}]
    for name, config in models.items():
        ready = bool(os.environ.get(config["api_key_env"]))
        catalog.append(
            {
                "name": name,
                "style": config["style"],
                "model": config["model"],
                "ready": ready,
                "problem": None
                if ready
                else f"Set the environment variable {config['api_key_env']} to use this model.",
            }
        )
    return catalog


def check_model(name: object) -> str:
    """The model name, if a run can use it now; raises ModelConfigError saying why not."""
    if not isinstance(name, str) or not name:
        raise ModelConfigError(f"Choose a model: 'model' must be a model name such as {SCRIPTED_MODEL!r}.")
    if name == SCRIPTED_MODEL:
        return name
    models = configured_models()
    if name not in models:
        known = ", ".join([SCRIPTED_MODEL, *sorted(models)])
        raise ModelConfigError(f"Unknown model {name!r}. Known models: {known}.")
    if not os.environ.get(models[name]["api_key_env"]):
        raise ModelConfigError(
            f"Model {name!r} needs its API key in the environment variable {models[name]['api_key_env']}, which is not set."
        )
    return name


def build_client(name: str, **options: Any) -> Client:
    """A toolnexus client for this model; ``options`` go straight to create_client (hooks, wait_for, ...)."""
    options.setdefault("max_turns", settings.TOOLNEXUS.get("AGENT_MAX_TURNS", 10))
    if name == SCRIPTED_MODEL:
        return create_in_process_client(model=SCRIPTED_MODEL, generate=scripted_generate, **options)
    config = configured_models()[check_model(name)]
    return create_client(
        base_url=config["base_url"],
        style=cast(ClientStyle, config["style"]),  # one of STYLES (configured_models)
        model=config["model"],
        api_key=os.environ[config["api_key_env"]],
        **options,
    )


def style_of(name: str) -> str:
    """The wire style the model's messages use ("openai" for the in-process scripted model)."""
    if name == SCRIPTED_MODEL:
        return "openai"
    return configured_models()[check_model(name)]["style"]
