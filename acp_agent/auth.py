"""Authentication: one agent-type method that names the key the configured model needs.

Keys come from the environment (see ``providers.registry``); until the configured model
has one, ``authenticate`` and every session request answer ``-32000`` with the missing
variable in ``data``.
"""

from __future__ import annotations

from .config import Config
from .errors import AuthRequired, InvalidParams
from .protocol import types as t

AUTH_METHOD_ID = "api-key"


def auth_method(config: Config) -> t.AuthMethodAgent:
    """The method, its description telling the client which key the model needs."""
    from .providers import missing_key, spec

    family = spec(config.provider)
    if not family.key_envs:
        description = f"No key needed: {config.model} runs without one."
    else:
        name = missing_key(config) or config.provider_settings(family.name).api_key_env
        description = (
            f"{config.model} needs {name or family.key_envs[0]} in the agent's environment"
            + (
                " (or a base URL for a local OpenAI-compatible server)."
                if family.keyless_with_base_url
                else "."
            )
        )
    return t.AuthMethodAgent(id=AUTH_METHOD_ID, name="API key", description=description)


def require_key(config: Config) -> None:
    from .providers import missing_key

    needed = missing_key(config)
    if needed is not None:
        raise AuthRequired(
            f"Authentication required: set {needed} for {config.model}",
            {"authMethods": [AUTH_METHOD_ID], "missing": needed},
        )


def authenticate(config: Config, p: t.AuthenticateRequest) -> t.AuthenticateResponse:
    if p.method_id != AUTH_METHOD_ID:
        raise InvalidParams(
            f"Invalid params: unknown auth method {p.method_id!r} - at `$.methodId`"
        )
    require_key(config)
    return t.AuthenticateResponse()
