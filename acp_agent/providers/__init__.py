"""Provider registry: builds the configured :class:`ModelProvider`, importing only what it needs.

The vendor modules (and their SDKs) load lazily: :func:`preload` warms them in a thread
after ``initialize`` so the first prompt does not pay for the import.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Config
    from .base import ModelProvider

_SDK_MODULE = {"openai": "openai", "anthropic": "anthropic"}


def missing_key(config: Config, env: Mapping[str, str] = os.environ) -> str | None:
    """The environment variable the configured model still needs, or ``None`` when it can
    run (the offline model, a key present, or an OpenAI-compatible server by base URL)."""
    kind = config.provider
    if kind == "offline":
        return None
    settings = config.openai if kind == "openai" else config.anthropic
    name = settings.api_key_env or ("OPENAI_API_KEY" if kind == "openai" else "ANTHROPIC_API_KEY")
    if env.get(name):
        return None
    if kind == "openai" and (settings.base_url or env.get("OPENAI_BASE_URL")):
        return None  # local servers take no key
    if kind == "anthropic" and not settings.api_key_env and env.get("ANTHROPIC_AUTH_TOKEN"):
        return None
    return name


def make_provider(config: Config) -> ModelProvider:
    kind = config.provider
    if kind == "offline":
        from .offline import OfflineProvider

        if config.offline_script:
            return OfflineProvider.from_file(config.offline_script)
        return OfflineProvider(delay=0.012)
    settings = config.openai if kind == "openai" else config.anthropic
    api_key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
    common = {
        "api_key": api_key,
        "base_url": settings.base_url,
        "timeout": settings.timeout,
        "connect_timeout": settings.connect_timeout,
        "default_headers": dict(settings.headers) or None,
    }
    if kind == "openai":
        from .openai import OpenAIProvider

        return OpenAIProvider(config.model_name, **common)  # type: ignore[arg-type]
    from .anthropic import AnthropicProvider

    return AnthropicProvider(config.model_name, **common)  # type: ignore[arg-type]


def preload(config: Config) -> None:
    """Import the turn engine, the tools and the configured provider's SDK (call from a
    worker thread)."""
    importlib.import_module("acp_agent.turn")
    importlib.import_module("acp_agent.tools")
    module = _SDK_MODULE.get(config.provider)
    if module is not None:
        importlib.import_module(module)
        importlib.import_module(f"{__name__}.{config.provider}")
