"""What the agent knows about a model: context size, output limit, prices, capabilities.

A compact built-in table matched by name prefix (most specific first). Prices are USD per
million tokens and ``None`` when unknown; cached input is a prompt-cache read, and
Anthropic's cache writes are the 5-minute ones (1.25x input; reads 0.1x), as on the vendors'
price pages. What an OpenAI-compatible server says about the model it serves
(:class:`ServerLimits`, e.g. vLLM's ``max_model_len``) refines the table
(:func:`with_server_limits`); the caller applies user overrides from the config last
(``msgspec.structs.replace``), so they always win. Nothing here reads configuration.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, runtime_checkable

import msgspec

if TYPE_CHECKING:  # (the model table is read at start: it loads no provider machinery)
    from .base import UsageReport

ToolStyle: TypeAlias = Literal["standard", "codex"]


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    context_window: int
    max_output_tokens: int
    input_price: float | None = None
    output_price: float | None = None
    cached_input_price: float | None = None
    cache_write_price: float | None = None  # Anthropic prompt-cache writes
    supports_images: bool = False
    supports_thinking: bool = False
    tool_style: ToolStyle = "standard"
    """The tools the model was trained on: ``codex`` (OpenAI's GPT-5 family and codex
    models: ``apply_patch`` in place of edit_file/write_file/move_file, and codex's
    ``update_plan`` schema) or ``standard`` (every other model)."""


class ServerLimits(msgspec.Struct, frozen=True, kw_only=True):
    """A model's limits as the server running it reports them."""

    context_window: int
    exact: bool = True
    """``True``: the server enforces this window (vLLM's ``max_model_len``, an Ollama
    model's ``num_ctx``). ``False``: an upper bound only (the length the model was trained
    for; the server may run it with less)."""
    source: str = ""
    """Where it was read, for the log (``"GET /v1/models max_model_len"``)."""


@runtime_checkable
class ReportsLimits(Protocol):
    """A provider that can ask its server for the model's limits (once; ``None`` when the
    server does not say, cannot be reached in time, or is the vendor's own API)."""

    async def server_limits(self) -> ServerLimits | None: ...


def with_server_limits(info: ModelInfo, limits: ServerLimits) -> ModelInfo:
    """``info`` within what the server said: its window (exactly, or as an upper bound), and
    never an output limit beyond the window."""
    window = limits.context_window
    if not limits.exact:
        window = min(window, info.context_window)
    output = min(info.max_output_tokens, window)
    return msgspec.structs.replace(info, context_window=window, max_output_tokens=output)


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
_GPT54 = 1_050_000
_OPUS_4_0 = _m(200_000, 32_000, (15.0, 75.0, 1.5, 18.75), thinking=True)
def _no_cache_discount(info: ModelInfo) -> ModelInfo:
    """A model whose cached input costs the full price (no cached price: input applies)."""
    return msgspec.structs.replace(info, cached_input_price=None)


_OPUS_4_5 = (5.0, 25.0, 0.5, 6.25)
_SONNET = _m(200_000, 64_000, (3.0, 15.0, 0.3, 3.75), thinking=True)
_SONNET_4_6 = (3.0, 15.0, 0.3, 3.75)


def _unpriced(context: int, output: int, *, thinking: bool) -> ModelInfo:
    return ModelInfo(
        context_window=context,
        max_output_tokens=output,
        supports_images=True,
        supports_thinking=thinking,
    )


# (prefix, info); the first matching prefix wins, so longer prefixes come first. Checked
# against the vendors' model pages (developers.openai.com/api/docs/models/<id>,
# platform.claude.com/docs/models/<id>/overview). ``thinking`` means what the providers send:
# OpenAI's reasoning effort (not for the -pro models: they reason at their own effort, which
# is all gpt-5-pro takes), Anthropic's manual extended thinking (``budget_tokens``), which
# Claude 4.7 and later reject (they think adaptively, by default).
_TABLE: list[tuple[str, ModelInfo]] = [
    ("gpt-4.1-nano", _m(_GPT41, 32_768, (0.10, 0.40, 0.025))),
    ("gpt-4.1-mini", _m(_GPT41, 32_768, (0.40, 1.60, 0.10))),
    ("gpt-4.1", _m(_GPT41, 32_768, (2.0, 8.0, 0.50))),
    ("gpt-4o-mini", _m(128_000, 16_384, (0.15, 0.60, 0.075))),
    ("gpt-4o", _m(128_000, 16_384, (2.50, 10.0, 1.25))),
    # chat variants: no reasoning effort, a 128k window (see model_info for the rest)
    ("gpt-5.2-chat", _m(128_000, 16_384, (1.75, 14.0, 0.175))),
    ("gpt-5.1-chat", _m(128_000, 16_384, (1.25, 10.0, 0.125))),
    ("gpt-5-chat", _m(128_000, 16_384, (1.25, 10.0, 0.125))),
    ("gpt-5.5-pro", _no_cache_discount(_m(_GPT54, 128_000, (30.0, 180.0, 30.0)))),
    ("gpt-5.5", _m(_GPT54, 128_000, (5.0, 30.0, 0.50), thinking=True)),
    ("gpt-5.4-pro", _unpriced(_GPT54, 128_000, thinking=False)),
    ("gpt-5.4-mini", _m(400_000, 128_000, (0.75, 4.50, 0.075), thinking=True)),
    ("gpt-5.4-nano", _m(400_000, 128_000, (0.20, 1.25, 0.02), thinking=True)),
    # over 272K input tokens GPT-5.4 costs twice the input and 1.5 times the output price
    ("gpt-5.4", _m(_GPT54, 128_000, (2.50, 15.0, 0.25), thinking=True)),
    ("gpt-5.2-pro", _unpriced(400_000, 128_000, thinking=False)),
    ("gpt-5.2", _m(400_000, 128_000, (1.75, 14.0, 0.175), thinking=True)),  # -codex too
    ("gpt-5.1-codex-mini", _unpriced(400_000, 128_000, thinking=True)),
    ("gpt-5.1", _m(400_000, 128_000, (1.25, 10.0, 0.125), thinking=True)),  # -codex(-max)
    ("gpt-5.", _unpriced(400_000, 128_000, thinking=True)),  # a newer GPT-5.x
    (
        "gpt-5-pro",
        ModelInfo(
            context_window=400_000,
            max_output_tokens=272_000,
            input_price=15.0,
            output_price=120.0,
            supports_images=True,
        ),
    ),
    ("gpt-5-nano", _m(400_000, 128_000, (0.05, 0.40, 0.005), thinking=True)),
    ("gpt-5-mini", _m(400_000, 128_000, (0.25, 2.0, 0.025), thinking=True)),
    ("gpt-5", _m(400_000, 128_000, (1.25, 10.0, 0.125), thinking=True)),  # and gpt-5-codex
    ("o4-mini", _m(200_000, 100_000, (1.10, 4.40, 0.275), thinking=True)),
    ("o3-mini", _m(200_000, 100_000, (1.10, 4.40, 0.55), images=False, thinking=True)),
    ("o3-pro", _no_cache_discount(_m(200_000, 100_000, (20.0, 80.0, 20.0)))),
    ("o3", _m(200_000, 100_000, (2.0, 8.0, 0.50), thinking=True)),
    ("o1", _m(200_000, 100_000, (15.0, 60.0, 7.50), thinking=True)),
    ("claude-opus-4-0", _OPUS_4_0),
    ("claude-opus-4-1", _OPUS_4_0),
    ("claude-opus-4-2025", _OPUS_4_0),  # claude-opus-4-20250514
    ("claude-opus-4-5", _m(200_000, 64_000, _OPUS_4_5, thinking=True)),
    ("claude-opus-4-6", _m(1_000_000, 128_000, _OPUS_4_5, thinking=True)),
    ("claude-opus-4", _m(1_000_000, 128_000, _OPUS_4_5)),  # 4.7, 4.8: adaptive thinking only
    ("claude-sonnet-4-6", _m(1_000_000, 128_000, _SONNET_4_6, thinking=True)),
    ("claude-sonnet-4-5", _SONNET),
    ("claude-sonnet-4-0", _SONNET),
    ("claude-sonnet-4-2025", _SONNET),  # claude-sonnet-4-20250514
    ("claude-sonnet-4", _m(200_000, 64_000, _SONNET_4_6)),  # a later 4.x: no manual thinking
    ("claude-haiku-4-5", _m(200_000, 64_000, (1.0, 5.0, 0.1, 1.25), thinking=True)),
    ("claude-sonnet-5", _m(1_000_000, 128_000, (2.0, 10.0, 0.2, 2.5))),  # 5, 5.5: adaptive
    ("claude-opus-5-5", _m(1_000_000, 128_000, (4.0, 20.0, 0.4, 5.0))),  # cache: 0.1x / 1.25x
    ("claude-opus-5", _m(1_000_000, 128_000, _OPUS_4_5)),
    ("claude-haiku-5", _unpriced(1_000_000, 128_000, thinking=False)),
    ("claude-fable-5", _unpriced(1_000_000, 128_000, thinking=False)),
    ("claude-3-7-sonnet", _SONNET),
    ("claude-3-5-sonnet", _m(200_000, 8_192, (3.0, 15.0, 0.3, 3.75))),
    ("claude-3-5-haiku", _m(200_000, 8_192, (0.80, 4.0, 0.08, 1.0))),
    ("claude-3-haiku", _m(200_000, 4_096, (0.25, 1.25, 0.03, 0.30))),
    ("claude-3-opus", _m(200_000, 4_096, (15.0, 75.0, 1.5, 18.75))),
]

# An unknown Claude: the smallest current window, an output every Claude since 3.5 allows,
# and no manual thinking (the newest models reject it; the oldest never had it).
_DEFAULT_ANTHROPIC = ModelInfo(
    context_window=200_000, max_output_tokens=8_192, supports_images=True
)
_DEFAULT_COMPATIBLE = ModelInfo(context_window=128_000, max_output_tokens=4_096)
_GPT5_CHAT = _unpriced(128_000, 16_384, thinking=False)  # a newer gpt-5.x-chat


# o1, o3, o4-mini..., gpt-5, gpt-5.1-codex... but not gpt-5-chat-latest; codex-mini-latest
# (patterns as text, compiled by ``re`` on first use: start-up loads the table)
_REASONING = r"^(o\d|gpt-5(?!.*-chat)|codex-)"


def is_reasoning_model(model: str) -> bool:
    """An OpenAI reasoning model (it has reasoning items and takes a reasoning effort)."""
    return re.match(_REASONING, model.lower().rsplit("/", 1)[-1]) is not None


# gpt-5, gpt-5.1-codex, gpt-5-mini... (not the -chat variants) and codex-mini-latest
_CODEX_TOOLS = r"^(gpt-5(?!.*-chat)|codex-)"


def takes_custom_tools(model: str) -> bool:
    """An OpenAI model that takes custom (free-text, grammar-bound) tools on the Responses
    API: the GPT-5 family and codex models."""
    return re.match(_CODEX_TOOLS, model.lower().rsplit("/", 1)[-1]) is not None


def model_info(provider: str, model: str) -> ModelInfo:
    """Known facts for ``model``, or a conservative default for the provider family.

    Names routed through aggregators match too: ``openai/gpt-4o``, ``anthropic/claude-3.5-haiku``.
    """
    info = _table_info(provider, model)
    if re.match(_CODEX_TOOLS, model.lower().rsplit("/", 1)[-1]):
        info = msgspec.structs.replace(info, tool_style="codex")
    return info


def _table_info(provider: str, model: str) -> ModelInfo:
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith("claude"):
        name = name.replace(".", "-")
    for prefix, info in _TABLE:
        if name.startswith(prefix):
            if info.supports_thinking and name.startswith("gpt-5") and "-chat" in name:
                return _GPT5_CHAT  # gpt-5.3-chat-latest: the family's window, no reasoning
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
