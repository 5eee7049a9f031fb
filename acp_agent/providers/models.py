"""What the agent knows about a model: context size, output limit, prices, capabilities.

A compact built-in table matched by name prefix (most specific first). Prices are USD per
million tokens and ``None`` when unknown; cached input is a prompt-cache read, and Anthropic's
cache writes are the 5-minute ones (1.25x input; reads 0.1x), as on the vendors' price pages.
The caller applies user overrides from the config (``msgspec.structs.replace``); nothing here
reads configuration.
"""

from __future__ import annotations

import msgspec

from .base import UsageReport


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    context_window: int
    max_output_tokens: int
    input_price: float | None = None
    output_price: float | None = None
    cached_input_price: float | None = None
    cache_write_price: float | None = None  # Anthropic prompt-cache writes
    supports_images: bool = False
    supports_thinking: bool = False


def _m(
    context: int,
    output: int,
    prices: tuple[float, float, float] | tuple[float, float, float, float],
    *,
    images: bool = True,
    thinking: bool = False,
) -> ModelInfo:
    """``prices`` = (input, output, cached input[, cache write])."""
    write = prices[3] if len(prices) == 4 else None
    return ModelInfo(
        context_window=context,
        max_output_tokens=output,
        input_price=prices[0],
        output_price=prices[1],
        cached_input_price=prices[2],
        cache_write_price=write,
        supports_images=images,
        supports_thinking=thinking,
    )


_GPT41 = 1_047_576
_OPUS_4_0 = _m(200_000, 32_000, (15.0, 75.0, 1.5, 18.75), thinking=True)
_SONNET = _m(200_000, 64_000, (3.0, 15.0, 0.3, 3.75), thinking=True)

# (prefix, info); the first matching prefix wins, so longer prefixes come first.
_TABLE: list[tuple[str, ModelInfo]] = [
    ("gpt-4.1-nano", _m(_GPT41, 32_768, (0.10, 0.40, 0.025))),
    ("gpt-4.1-mini", _m(_GPT41, 32_768, (0.40, 1.60, 0.10))),
    ("gpt-4.1", _m(_GPT41, 32_768, (2.0, 8.0, 0.50))),
    ("gpt-4o-mini", _m(128_000, 16_384, (0.15, 0.60, 0.075))),
    ("gpt-4o", _m(128_000, 16_384, (2.50, 10.0, 1.25))),
    ("gpt-5-chat", _m(128_000, 16_384, (1.25, 10.0, 0.125))),
    (
        "gpt-5-pro",
        ModelInfo(
            context_window=400_000,
            max_output_tokens=272_000,
            input_price=15.0,
            output_price=120.0,
            supports_images=True,
            supports_thinking=True,
        ),
    ),
    ("gpt-5-nano", _m(400_000, 128_000, (0.05, 0.40, 0.005), thinking=True)),
    ("gpt-5-mini", _m(400_000, 128_000, (0.25, 2.0, 0.025), thinking=True)),
    ("gpt-5", _m(400_000, 128_000, (1.25, 10.0, 0.125), thinking=True)),
    ("o4-mini", _m(200_000, 100_000, (1.10, 4.40, 0.275), thinking=True)),
    ("o3-mini", _m(200_000, 100_000, (1.10, 4.40, 0.55), images=False, thinking=True)),
    ("o3", _m(200_000, 100_000, (2.0, 8.0, 0.50), thinking=True)),
    ("claude-opus-4-0", _OPUS_4_0),
    ("claude-opus-4-1", _OPUS_4_0),
    ("claude-opus-4-2025", _OPUS_4_0),  # claude-opus-4-20250514
    ("claude-opus-4", _m(200_000, 64_000, (5.0, 25.0, 0.5, 6.25), thinking=True)),  # 4.5+
    ("claude-sonnet-4", _SONNET),
    ("claude-haiku-4", _m(200_000, 64_000, (1.0, 5.0, 0.1, 1.25), thinking=True)),
    ("claude-3-7-sonnet", _SONNET),
    ("claude-3-5-sonnet", _m(200_000, 8_192, (3.0, 15.0, 0.3, 3.75))),
    ("claude-3-5-haiku", _m(200_000, 8_192, (0.80, 4.0, 0.08, 1.0))),
    ("claude-3-haiku", _m(200_000, 4_096, (0.25, 1.25, 0.03, 0.30))),
]

_DEFAULT_ANTHROPIC = ModelInfo(
    context_window=200_000, max_output_tokens=8_192, supports_images=True
)
_DEFAULT_COMPATIBLE = ModelInfo(context_window=128_000, max_output_tokens=4_096)


def model_info(provider: str, model: str) -> ModelInfo:
    """Known facts for ``model``, or a conservative default for the provider family.

    Names routed through aggregators match too: ``openai/gpt-4o``, ``anthropic/claude-3.5-haiku``.
    """
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith("claude"):
        name = name.replace(".", "-")
    for prefix, info in _TABLE:
        if name.startswith(prefix):
            return info
    return _DEFAULT_ANTHROPIC if provider == "anthropic" else _DEFAULT_COMPATIBLE


def cost(info: ModelInfo, usage: UsageReport) -> float | None:
    """USD for one request, or ``None`` when the model's prices are unknown.

    ``usage.input_tokens`` includes cached reads and writes; each is priced at its own rate
    (falling back to the input price). Thought tokens are already part of ``output_tokens``.
    """
    if info.input_price is None or info.output_price is None:
        return None
    read = usage.cached_read_tokens
    write = usage.cached_write_tokens
    fresh = max(0, usage.input_tokens - read - write)
    read_price = info.input_price if info.cached_input_price is None else info.cached_input_price
    write_price = info.input_price if info.cache_write_price is None else info.cache_write_price
    total = (
        fresh * info.input_price
        + read * read_price
        + write * write_price
        + usage.output_tokens * info.output_price
    )
    return total / 1_000_000
