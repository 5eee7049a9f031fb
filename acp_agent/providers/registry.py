"""Provider families: which ``--model`` prefixes exist and how each one is built.

A family is one module holding a :class:`ProviderSpec` named ``SPEC`` (its key and
base-URL variables, default endpoint, model table and factory) plus one line in
:data:`FAMILIES`. Nothing else in the agent names a provider: configuration sections
(``[openai]``, ``[ollama]`` ...), ``--base-url``, the key check behind ``authenticate``,
model facts and the warm-up all come from the spec. Spec modules stay tiny and import
their implementation (and its SDK) only in ``build``, so naming a family at start-up
costs nothing.

Where a key comes from, first found wins: credentials in the endpoint's headers (an
``Authorization``, ``x-api-key`` or ``api-key`` header, from ``[<family>] headers`` or the
editor's ``providers/set``: then no key of ours is sent), the environment (the family's
variables, or ``api-key-env``), the key ``acp-agent login`` stored (:mod:`.credentials`).

Adding an OpenAI-compatible preset is a module like :mod:`.ollama` and a line here.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import msgspec

from ..config import SETTINGS, Config, ConfigError
from ..config.hints import did_you_mean
from . import credentials

if TYPE_CHECKING:
    from .base import ModelProvider
    from .models import ModelInfo

#: ``--model <family>:<name>`` -> the module holding the family's ``SPEC``.
FAMILIES: dict[str, str] = {
    "offline": "acp_agent.providers.offline",
    "openai": "acp_agent.providers.openai",
    "anthropic": "acp_agent.providers.anthropic",
    "ollama": "acp_agent.providers.ollama",
    "openrouter": "acp_agent.providers.openrouter",
}


class Endpoint(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how to reach a provider, resolved from configuration and environment."""

    api_key: str | None = None
    base_url: str | None = None
    timeout: float = 600.0
    """The HTTP read/write timeout: a backstop, never shorter than the wrapper's
    ``limits.first-event-timeout`` and ``limits.idle-timeout`` (which end stalls, with
    keep-alives not counting, and name the limit)."""
    connect_timeout: float = 10.0
    headers: dict[str, str] = {}
    family: str = "openai"
    """The family's name, which is also its configuration section."""
    title: str = "OpenAI"
    """The family's name for people ("Ollama"), in error messages."""
    key_env: str | None = None
    """Where the key comes from (a variable, or the stored key's place), named when the
    server rejects it."""
    auth_in_headers: bool = False
    """``headers`` carry the credentials (``api_key`` is then ``None``)."""


class ProviderSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    """The ``--model`` prefix and the configuration section, e.g. ``"openai"``."""
    title: str
    build: Callable[[str, Endpoint, Config], ModelProvider]
    """``(model name, endpoint, configuration) -> provider``; imports the implementation."""
    model_info: Callable[[str], ModelInfo]
    """Facts about a model of this family (context window, prices...)."""
    key_envs: tuple[str, ...] = ()
    """Variables any of which carries a credential; the first is the one asked for.
    Empty: the family needs no key (local servers, the offline model)."""
    base_url_env: str | None = None
    """Variable overriding the endpoint (``OPENAI_BASE_URL``)."""
    default_base_url: str | None = None
    keyless_with_base_url: bool = False
    """A custom base URL alone is enough (a local OpenAI-compatible server)."""
    remote: bool = True
    """Reached over the network (takes ``--base-url``)."""
    needs_model: bool = True
    """``<family>:<model>``: a model name is required."""
    example: str | None = None
    """A model name of the family, for messages (``--model openai`` -> "e.g. openai:gpt-4.1")."""
    apis: tuple[str, ...] = ()
    """Wire APIs ``api`` in the family's section may pick (beside ``"auto"``)."""
    warm: tuple[str, ...] = ()
    """Modules to import ahead of the first prompt (the SDK and the implementation)."""
    protocol: str = "openai"
    """The wire protocol it speaks, as ACP names it (``providers/list``: ``LlmProtocol``)."""
    sdk_base_url: str | None = None
    """Where the SDK goes when no base URL is set (shown by ``providers/list``)."""
    unreachable_hint: str | None = None
    """The likely fix when nothing answers at the base URL (a local server not started)."""


def spec(family: str) -> ProviderSpec:
    """The spec of ``family``; raises ``KeyError`` for an unknown one."""
    module = importlib.import_module(FAMILIES[family])
    found: ProviderSpec = module.SPEC
    return found


def split_model(model: str) -> tuple[str, str]:
    """``"openai:gpt-4.1"`` -> ``("openai", "gpt-4.1")``; a bare name has no model."""
    family, _, name = model.partition(":")
    return family, name


AUTH_HEADERS = frozenset({"authorization", "x-api-key", "api-key"})
"""Headers that carry credentials (OpenAI and compatibles, Anthropic, Azure)."""

HEADERS = "headers"
STORED = "stored"


def has_auth_header(headers: Mapping[str, str] | None) -> bool:
    return any(name.lower() in AUTH_HEADERS for name in headers or ())


def key_names(family: ProviderSpec, config: Config) -> tuple[str, ...]:
    custom = config.provider_settings(family.name).api_key_env
    return (custom,) if custom else family.key_envs


def key_source(config: Config, family: str, env: Mapping[str, str] = os.environ) -> str | None:
    """Where ``family``'s credential comes from: :data:`HEADERS`, the variable's name,
    :data:`STORED`; ``None``: nowhere (or the family takes none)."""
    s = spec(family)
    names = key_names(s, config)
    if not names:
        return None
    if has_auth_header(config.provider_settings(family).headers):
        return HEADERS
    found = next((name for name in names if env.get(name)), None)
    if found is None and family in credentials.entries(env):
        return STORED
    return found


def base_url(config: Config, family: str, env: Mapping[str, str] = os.environ) -> str | None:
    """``family``'s base URL: configuration, then environment, then the family's default
    (``None``: the SDK's own)."""
    s = spec(family)
    env_url = env.get(s.base_url_env) if s.base_url_env else None
    return config.provider_settings(family).base_url or env_url or s.default_base_url


def http_timeout(config: Config, family: str) -> float:
    """``family``'s HTTP read/write timeout (:attr:`Endpoint.timeout`): its ``timeout``,
    or the limits on a model's silence where they are longer."""
    limits = config.limits
    timeout = config.provider_settings(family).timeout
    return max(timeout, limits.first_event_timeout, limits.idle_timeout)


def endpoint(config: Config, family: str, env: Mapping[str, str] = os.environ) -> Endpoint:
    """The endpoint of ``family`` (:func:`base_url`), with the key :func:`key_source`
    finds."""
    s = spec(family)
    settings = config.provider_settings(family)
    names = key_names(s, config)
    source = key_source(config, family, env)
    key_env: str | None
    if source == STORED:
        api_key = credentials.key(family, env)
        key_env = "acp-agent's credential store (`acp-agent login`)"
    else:
        api_key = (env.get(names[0]) or None) if names and source != HEADERS else None
        key_env = names[0] if names else None
    return Endpoint(
        api_key=api_key,
        base_url=base_url(config, family, env),
        timeout=http_timeout(config, family),
        connect_timeout=settings.connect_timeout,
        headers=dict(settings.headers),
        family=s.name,
        title=s.title,
        key_env=f"the {family} endpoint's headers" if source == HEADERS else key_env,
        auth_in_headers=source == HEADERS,
    )


def missing_key(
    config: Config, model: str | None = None, env: Mapping[str, str] = os.environ
) -> str | None:
    """The variable ``model`` (default: the configured one) still needs, or ``None`` when
    it can run (no key needed, a key found by :func:`key_source`, or a local server by
    base URL)."""
    family = spec(split_model(model or config.model)[0])
    names = key_names(family, config)
    if not names or key_source(config, family.name, env) is not None:
        return None
    if family.keyless_with_base_url:
        settings = config.provider_settings(family.name)
        if settings.base_url or (family.base_url_env and env.get(family.base_url_env)):
            return None
    return names[0]


def check(config: Config, source: str = "config") -> None:
    """What the configuration says of model families, checked against them: every model
    names a known family (and a model where the family needs one), every provider section
    is a family's, every ``api`` one the family speaks (``config.Check``). Each error
    carries the key's path, so that a file's error gives the line."""
    for where, model in [(("model",), config.model), *((("models",), m) for m in config.models)]:
        family, _, name = model.partition(":")
        if family not in FAMILIES:
            raise ConfigError(
                f"{source}: `{where[0]}` must be <family>:<model> with a family among "
                f"{', '.join(FAMILIES)} (e.g. 'openai:gpt-4.1'), got {model!r}",
                where,
            )
        if spec(family).needs_model and not name:
            raise ConfigError(
                f"{source}: `{where[0]}` {model!r} names no model; write {family}:<model>", where
            )
    for section in sorted(set(config.providers) - set(FAMILIES)):
        raise ConfigError(
            f"{source}: `{section}` is not a setting or a provider family"
            f"{did_you_mean(section, [*FAMILIES, *SETTINGS])}",
            (section,),
        )
    for family, settings in config.providers.items():
        apis = spec(family).apis
        if settings.api != "auto" and settings.api not in apis:
            choice = f"one of auto, {', '.join(apis)}" if apis else "auto (the only one)"
            raise ConfigError(
                f"{source}: `{family}.api` must be {choice}, got {settings.api!r}", (family, "api")
            )


def make_provider(config: Config, model: str | None = None) -> ModelProvider:
    """A provider for ``model`` (default: the configured one)."""
    family, name = split_model(model or config.model)
    return spec(family).build(name, endpoint(config, family), config)
