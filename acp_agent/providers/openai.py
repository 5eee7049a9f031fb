"""OpenAI, and any OpenAI-compatible server by base URL (``--model openai:<model>``).

Two wire APIs: the Responses API for OpenAI's reasoning models (o-series, GPT-5 except its
``-chat`` variants, codex) on OpenAI's own endpoint, so their reasoning survives tool calls;
Chat Completions for every other model and every compatible server (vLLM, Ollama, llama.cpp,
LM Studio, OpenRouter). ``[<family>] api = "responses" | "chat-completions"`` overrides the
automatic choice (``"auto"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .models import ModelInfo, is_reasoning_model, model_info
from .registry import Endpoint, ProviderSpec

if TYPE_CHECKING:
    from ..config import Config
    from .base import ModelProvider

def is_official(base_url: str | None) -> bool:
    return base_url is None or "api.openai.com" in base_url


def wire_api(model: str, endpoint: Endpoint, config: Config) -> str:
    """``"responses"`` or ``"chat-completions"``: the configured one, else by model and
    endpoint (the Responses API for OpenAI's reasoning models at OpenAI)."""
    api = config.provider_settings(endpoint.family).api
    if api != "auto":
        return api
    official = is_official(endpoint.base_url)
    return "responses" if official and is_reasoning_model(model) else "chat-completions"


def build_compatible(
    model: str,
    endpoint: Endpoint,
    config: Config,
    *,
    discover: bool = True,
    connect_path: str | None = None,
) -> ModelProvider:
    """A provider at ``endpoint`` speaking the API :func:`wire_api` picks (presets reuse
    this). ``discover``: ask a compatible server for the model's limits (not OpenRouter:
    its list of every model is large, and its models are in the table). ``connect_path``:
    what a connection made ahead of a prompt asks (default: the model's description)."""
    # the implementation (and its SDK), loaded when a provider is built
    from ._openai import OpenAIProvider
    from ._responses import ResponsesProvider

    kind = ResponsesProvider if wire_api(model, endpoint, config) == "responses" else OpenAIProvider
    return kind(
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
        connect_path=connect_path,
    )


def _info(model: str) -> ModelInfo:
    return model_info("openai", model)


SPEC = ProviderSpec(
    name="openai",
    example="gpt-4.1",
    title="OpenAI",
    build=build_compatible,
    model_info=_info,
    key_envs=("OPENAI_API_KEY",),
    base_url_env="OPENAI_BASE_URL",
    keyless_with_base_url=True,
    apis=("responses", "chat-completions"),
    warm=("openai", "acp_agent.providers._openai", "acp_agent.providers._responses"),
    sdk_base_url="https://api.openai.com/v1",
)
