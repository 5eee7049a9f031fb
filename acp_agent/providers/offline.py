"""The offline built-in model: no key, no network (``--model offline``, the default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .models import ModelInfo
from .registry import Endpoint, ProviderSpec

if TYPE_CHECKING:
    from ..config import Config
    from .base import ModelProvider


def _build(model: str, endpoint: Endpoint, config: Config) -> ModelProvider:
    # the implementation, loaded when a provider is built
    from ._offline import OfflineProvider

    if config.offline_script:
        return OfflineProvider.from_file(config.offline_script)
    return OfflineProvider(delay=0.012)


def _info(model: str) -> ModelInfo:
    return ModelInfo(
        context_window=128_000,
        max_output_tokens=8_192,
        input_price=0.0,
        output_price=0.0,
        supports_images=True,
    )


SPEC = ProviderSpec(
    name="offline",
    title="Offline built-in model",
    build=_build,
    model_info=_info,
    remote=False,
    needs_model=False,
    warm=("acp_agent.providers._offline",),
)
