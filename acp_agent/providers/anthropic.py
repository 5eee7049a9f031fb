"""Anthropic's Messages API (``--model anthropic:<model>``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .models import ModelInfo, model_info
from .registry import Endpoint, ProviderSpec

if TYPE_CHECKING:
    from ..config import Config
    from .base import ModelProvider


def _build(model: str, endpoint: Endpoint, config: Config) -> ModelProvider:
    # the implementation (and its SDK), loaded when a provider is built
    from ._anthropic import AnthropicProvider

    custom_key = config.provider_settings("anthropic").api_key_env
    # A bearer token (gateways, proxies) stands in for a key when no key is set (and the
    # endpoint's own headers carry no credentials).
    token = (
        None
        if endpoint.api_key or custom_key or endpoint.auth_in_headers
        else os.environ.get("ANTHROPIC_AUTH_TOKEN")
    )
    key_env = "ANTHROPIC_AUTH_TOKEN" if token and not endpoint.api_key else endpoint.key_env
    return AnthropicProvider(
        model,
        api_key=endpoint.api_key,
        auth_token=token or None,
        base_url=endpoint.base_url,
        timeout=endpoint.timeout,
        connect_timeout=endpoint.connect_timeout,
        default_headers=endpoint.headers or None,
        key_env=key_env,
    )


def _info(model: str) -> ModelInfo:
    return model_info("anthropic", model)


SPEC = ProviderSpec(
    name="anthropic",
    example="claude-sonnet-4-5",
    title="Anthropic",
    build=_build,
    model_info=_info,
    key_envs=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    base_url_env="ANTHROPIC_BASE_URL",
    warm=("anthropic", "acp_agent.providers._anthropic"),
    protocol="anthropic",
    sdk_base_url="https://api.anthropic.com",
)
