"""OpenRouter, through its OpenAI-compatible API (``--model openrouter:<vendor>/<model>``,
e.g. ``openrouter:anthropic/claude-sonnet-4.5``); the key is ``OPENROUTER_API_KEY``."""

from __future__ import annotations

from .openai import SPEC as OPENAI
from .registry import ProviderSpec

SPEC = ProviderSpec(
    name="openrouter",
    title="OpenRouter",
    build=OPENAI.build,
    model_info=OPENAI.model_info,
    key_envs=("OPENROUTER_API_KEY",),
    base_url_env="OPENROUTER_BASE_URL",
    default_base_url="https://openrouter.ai/api/v1",
    warm=OPENAI.warm,
)
