"""OpenRouter, through its OpenAI-compatible API (``--model openrouter:<vendor>/<model>``,
e.g. ``openrouter:anthropic/claude-sonnet-4.5``); the key is ``OPENROUTER_API_KEY``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .openai import SPEC as OPENAI
from .openai import build_compatible
from .registry import Endpoint, ProviderSpec

if TYPE_CHECKING:
    from ..config import Config
    from .base import ModelProvider


def _build(model: str, endpoint: Endpoint, config: Config) -> ModelProvider:
    # ``GET /key`` (the key's own description) opens connections ahead: OpenRouter
    # describes no single model, and its list of every model is large.
    return build_compatible(model, endpoint, config, discover=False, connect_path="/key")


SPEC = ProviderSpec(
    name="openrouter",
    example="anthropic/claude-sonnet-4.5",
    title="OpenRouter",
    build=_build,
    model_info=OPENAI.model_info,
    key_envs=("OPENROUTER_API_KEY",),
    base_url_env="OPENROUTER_BASE_URL",
    default_base_url="https://openrouter.ai/api/v1",
    apis=OPENAI.apis,
    warm=OPENAI.warm,
)
