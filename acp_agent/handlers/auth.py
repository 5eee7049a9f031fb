"""Authentication: how the configured model gets its key, ``logout`` and ``auth/status``.

Methods offered by ``initialize``:

- ``api-key`` (agent type): names the key the configured model needs. Keys come from the
  endpoint's headers, the environment, or ``acp-agent login`` (``providers.registry``
  ``key_source``, in that order); until the model has one, ``authenticate`` and every
  session request answer ``-32000`` with the missing variable in ``data``.
- ``login`` (terminal type), only to a client with ``clientCapabilities.auth.terminal``:
  the client runs the agent's own command with ``login`` appended (``acp-agent [flags]
  login``), a prompt in a terminal that stores a key (``providers.credentials``) and exits
  0; the client then starts the agent again. It is never passed to ``authenticate``.

``logout`` forgets every stored key (file and keyring) and rebuilds those providers, so the
next session asks for authentication again; a key from the environment or from headers
stays (the agent did not store it, and ``auth/status`` still reports it). ``auth/status``
reports the configured model's state and one account per provider with a credential
(never the credential). ``auth/status_update`` goes to a client that asked ``auth/status``
on this connection (so it knows the method), each time what it would now be told differs
from what it was last told: after ``logout``, ``authenticate`` (a login may have stored a
key meanwhile), ``providers/set`` and ``providers/disable``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import TYPE_CHECKING

from .. import log
from ..config import Config
from ..errors import AuthRequired, InternalError, InvalidParams
from ..protocol import UNSET
from ..protocol import types as t

if TYPE_CHECKING:
    from .runtime import Runtime

AUTH_METHOD_ID = "api-key"
TERMINAL_METHOD_ID = "login"
LOGIN_ARGS = ["login"]
"""Appended by the client to the agent's command: ``acp-agent [flags] login``."""


def auth_methods(config: Config, capabilities: t.ClientCapabilities) -> list[t.AuthMethod]:
    """What ``initialize`` offers: the terminal method only to a client that runs them."""
    methods: list[t.AuthMethod] = [auth_method(config)]
    caps = capabilities.auth
    if isinstance(caps, t.AuthCapabilities) and caps.terminal is True:
        methods.append(terminal_method(config))
    return methods


def auth_method(config: Config) -> t.AuthMethodAgent:
    """The method, its description telling the client which key the model needs."""
    from ..providers import missing_key, spec

    family = spec(config.provider)
    if not family.key_envs:
        description = f"No key needed: {config.model} runs without one."
    else:
        name = missing_key(config) or config.provider_settings(family.name).api_key_env
        description = (
            f"{config.model} needs {name or family.key_envs[0]} in the agent's environment"
            " or a key stored with `acp-agent login`"
            + (
                " (or a base URL for a local OpenAI-compatible server)."
                if family.keyless_with_base_url
                else "."
            )
        )
    return t.AuthMethodAgent(id=AUTH_METHOD_ID, name="API key", description=description)


def terminal_method(config: Config) -> t.AuthMethodTerminal:
    from ..providers import spec

    family = spec(config.provider)
    whose = f"your {family.title}" if family.key_envs else "a provider's"
    return t.AuthMethodTerminal(
        id=TERMINAL_METHOD_ID,
        name="Sign in with an API key",
        description=f"Runs `acp-agent login` in a terminal: paste {whose} API key. It is kept"
        " in your configuration directory, readable only by you (or in the system keyring).",
        args=list(LOGIN_ARGS),
    )


def require_key(config: Config) -> None:
    from ..providers import missing_key

    needed = missing_key(config)
    if needed is not None:
        raise AuthRequired(
            f"Authentication required: set {needed} for {config.model}",
            {"authMethods": [AUTH_METHOD_ID], "missing": needed},
        )


def authenticate(config: Config, p: t.AuthenticateRequest) -> t.AuthenticateResponse:
    if p.method_id == TERMINAL_METHOD_ID:
        raise InvalidParams(
            f"Invalid params: {TERMINAL_METHOD_ID!r} is a terminal method: the client runs it"
            " in a terminal and never passes it to authenticate - at `$.methodId`"
        )
    if p.method_id != AUTH_METHOD_ID:
        raise InvalidParams(
            f"Invalid params: unknown auth method {p.method_id!r} - at `$.methodId`"
        )
    require_key(config)
    return t.AuthenticateResponse()


async def logout(rt: Runtime, p: t.LogoutRequest | None = None) -> t.LogoutResponse:
    from ..providers.credentials import CredentialsError, remove

    try:
        removed = await asyncio.to_thread(remove)
    except CredentialsError as exc:
        raise InternalError(f"Cannot forget the stored keys: {exc}") from None
    for family in removed:
        rt.reroute(family)
    log.info("logged out: stored keys forgotten", providers=removed)
    return t.LogoutResponse()


def status(config: Config, disabled: Collection[str] = ()) -> t.AuthStatusResponse:
    """The configured model's state; one account per usable provider with a credential."""
    from ..providers.registry import FAMILIES, key_source, missing_key

    sources = {f: key_source(config, f) for f in FAMILIES if f not in disabled}
    accounts = [
        t.AuthAccount(label=_label(family, source), active=family == config.provider)
        for family, source in sources.items()
        if source is not None
    ]
    if missing_key(config) is not None:
        state = "unauthenticated"
    elif sources.get(config.provider) is None:
        state = "not_required"  # the offline model, Ollama, a local server by base URL
    else:
        state = "authenticated"
    return t.AuthStatusResponse(state=state, accounts=accounts or UNSET)


def _label(family: str, source: str) -> str:
    """Where a provider's credential comes from, for people (never the credential)."""
    from ..providers.registry import HEADERS, STORED, spec

    title = spec(family).title
    if source == HEADERS:
        return f"{title}: credentials in its endpoint's headers"
    return f"{title} API key ({'stored by acp-agent login' if source == STORED else source})"


class StatusFeed:
    """``auth/status`` answers and the ``auth/status_update``s that follow them."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._told: t.AuthStatusResponse | None = None

    def answer(self) -> t.AuthStatusResponse:
        self._told = status(self._rt.config, self._rt.disabled)
        return self._told

    async def refresh(self) -> None:
        """Tell a client that asked what changed since (nothing to one that never did)."""
        if self._told is None:
            return
        now = status(self._rt.config, self._rt.disabled)
        if now != self._told:
            self._told = now
            await self._rt.client.notify(
                "auth/status_update",
                t.AuthStatusUpdateNotification(state=now.state, accounts=now.accounts),
            )
