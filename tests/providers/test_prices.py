"""What a request costs (``models.cost``): each kind of input token at its own price, and a
price table that keeps the vendors' cache multipliers."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from acp_agent.config import from_mapping
from acp_agent.handlers.runtime import Runtime
from acp_agent.providers.base import UsageReport
from acp_agent.providers.models import _TABLE, cost, model_info


def test_reads_writes_fresh_input_and_output_each_at_their_price() -> None:
    sonnet = model_info("anthropic", "claude-sonnet-4-5-20250929")
    usage = UsageReport(input_tokens=10_000, output_tokens=500, cached_read_tokens=6_000,
                        cached_write_tokens=3_000)
    expected = (1_000 * 3.0 + 6_000 * 0.30 + 3_000 * 3.75 + 500 * 15.0) / 1e6
    assert cost(sonnet, usage) == pytest.approx(expected)
    gpt = model_info("openai", "gpt-4.1")
    cached = UsageReport(input_tokens=4_096, output_tokens=100, cached_read_tokens=3_968)
    assert cost(gpt, cached) == pytest.approx((128 * 2.0 + 3_968 * 0.5 + 100 * 8.0) / 1e6)


def test_unknown_cache_prices_fall_back_to_the_input_price() -> None:
    pro = model_info("openai", "gpt-5-pro")  # no cached price in the table
    usage = UsageReport(input_tokens=1_000, output_tokens=0, cached_read_tokens=1_000)
    assert cost(pro, usage) == pytest.approx(1_000 * 15.0 / 1e6)
    local = model_info("openai", "llama3.2")  # no prices at all
    assert cost(local, usage) is None


ROUNDED = {"claude-3-haiku"}  # its price page rounds them: $0.30 writes, $0.03 reads


@pytest.mark.parametrize(
    "prefix, info",
    [(p, i) for p, i in _TABLE
     if p.startswith("claude") and p not in ROUNDED and i.input_price is not None],
)
def test_claude_prices_keep_the_cache_multipliers(prefix: str, info: Any) -> None:
    """5-minute cache writes cost 1.25x the input price, reads 0.1x."""
    assert info.cache_write_price == pytest.approx(1.25 * info.input_price), prefix
    assert info.cached_input_price == pytest.approx(0.1 * info.input_price), prefix


@pytest.mark.parametrize("prefix, info", [(p, i) for p, i in _TABLE if not p.startswith("claude")])
def test_openai_cached_input_is_cheaper_and_never_written(prefix: str, info: Any) -> None:
    assert info.cache_write_price is None, prefix
    if info.cached_input_price is not None:
        assert info.cached_input_price < info.input_price, prefix


def test_the_cache_prices_can_be_overridden() -> None:
    config = from_mapping({"model-overrides": {"anthropic:claude-sonnet-4-5": {
        "cached-input-price": 0.5, "cache-write-price": 5.0}}})
    runtime = Runtime(config, client=None)  # type: ignore[arg-type]
    info = runtime.model_info_for("anthropic:claude-sonnet-4-5")
    base = model_info("anthropic", "claude-sonnet-4-5")
    assert info == msgspec.structs.replace(base, cached_input_price=0.5, cache_write_price=5.0)
