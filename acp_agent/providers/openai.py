"""OpenAI, and any OpenAI-compatible server by base URL (``--model openai:<model>``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import Endpoint, ProviderSpec

if TYPE_CHECKING:
    from ..config import Config
    from .base import ModelProvider
    from .models import ModelInfo


def build_compatible(
    model: str, endpoint: Endpoint, config: Config, *, discover: bool = True
) -> ModelProvider:
    """An OpenAI Chat Completions provider at ``endpoint`` (presets reuse this).
    ``discover``: ask a compatible server for the model's limits (not OpenRouter: its list
    of every model is large, and its models are in the table)."""
    from ._openai import OpenAIProvider

    return OpenAIProvider(
        model,
        api_key=endpoint.api_key,
        base_url=endpoint.base_url,
        timeout=endpoint.timeout,
        connect_timeout=endpoint.connect_timeout,
        default_headers=endpoint.headers or None,
        key_env=endpoint.key_env,
        vendor=endpoint.title,
        section=endpoint.family,
        discover_limits=discover,
    )


def _info(model: str) -> ModelInfo:
    from .models import model_info

    return model_info("openai", model)


SPEC = ProviderSpec(
    name="openai",
    title="OpenAI",
    build=build_compatible,
    model_info=_info,
    key_envs=("OPENAI_API_KEY",),
    base_url_env="OPENAI_BASE_URL",
    keyless_with_base_url=True,
    warm=("openai", "acp_agent.providers._openai"),
)
