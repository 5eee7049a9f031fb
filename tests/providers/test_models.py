"""The model table (windows, output limits, prices, thinking as the providers send it) and
the choice of OpenAI wire API: automatic by model and endpoint, overridable in config."""

from __future__ import annotations

import pytest

from acp_agent.config import ConfigError, from_mapping
from acp_agent.conversation import (
    AssistantMessage,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from acp_agent.providers import check, make_provider
from acp_agent.providers._anthropic import to_anthropic_messages
from acp_agent.providers._openai import OpenAIProvider, to_openai_messages
from acp_agent.providers._responses import ResponsesProvider
from acp_agent.providers.base import ModelRequest
from acp_agent.providers.models import model_info


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("family", "model", "window", "output", "prices", "thinking"),
    [
        ("openai", "gpt-5", 400_000, 128_000, (1.25, 10.0, 0.125), True),
        ("openai", "gpt-5-mini-2025-08-07", 400_000, 128_000, (0.25, 2.0, 0.025), True),
        ("openai", "gpt-5-codex", 400_000, 128_000, (1.25, 10.0, 0.125), True),
        ("openai", "gpt-5.1", 400_000, 128_000, (1.25, 10.0, 0.125), True),
        ("openai", "gpt-5.2", 400_000, 128_000, (1.75, 14.0, 0.175), True),
        ("openai", "gpt-5.4", 1_050_000, 128_000, (2.50, 15.0, 0.25), True),
        ("openai", "gpt-5.4-mini", 400_000, 128_000, (0.75, 4.50, 0.075), True),
        ("openai", "gpt-5.5", 1_050_000, 128_000, (5.0, 30.0, 0.50), True),
        ("openai", "gpt-5.9", 400_000, 128_000, (None, None, None), True),  # a newer one
        ("openai", "gpt-5-chat-latest", 128_000, 16_384, (1.25, 10.0, 0.125), False),
        ("openai", "gpt-5.7-chat-latest", 128_000, 16_384, (None, None, None), False),
        ("openai", "o3", 200_000, 100_000, (2.0, 8.0, 0.50), True),
        # -pro: the model's own effort (gpt-5-pro takes "high" only)
        ("openai", "o3-pro", 200_000, 100_000, (20.0, 80.0, None), False),  # no cache discount
        ("openai", "gpt-5-pro", 400_000, 272_000, (15.0, 120.0, None), False),
        ("openai", "gpt-5.2-pro", 400_000, 128_000, (None, None, None), False),
        ("openai", "o4-mini", 200_000, 100_000, (1.10, 4.40, 0.275), True),
        ("openai", "gpt-4.1", 1_047_576, 32_768, (2.0, 8.0, 0.50), False),
        ("openai", "qwen3-coder", 128_000, 4_096, (None, None, None), False),
        ("anthropic", "claude-sonnet-4-5", 200_000, 64_000, (3.0, 15.0, 0.3), True),
        ("anthropic", "claude-sonnet-4-5-20250929", 200_000, 64_000, (3.0, 15.0, 0.3), True),
        ("anthropic", "claude-haiku-4-5", 200_000, 64_000, (1.0, 5.0, 0.1), True),
        ("anthropic", "claude-opus-4-1", 200_000, 32_000, (15.0, 75.0, 1.5), True),
        ("anthropic", "claude-opus-4-5", 200_000, 64_000, (5.0, 25.0, 0.5), True),
        ("anthropic", "claude-opus-4-6", 1_000_000, 128_000, (5.0, 25.0, 0.5), True),
        ("anthropic", "claude-sonnet-4-6", 1_000_000, 128_000, (3.0, 15.0, 0.3), True),
        # adaptive thinking only: manual thinking (budget_tokens) is a 400 there
        ("anthropic", "claude-opus-4-7", 1_000_000, 128_000, (5.0, 25.0, 0.5), False),
        ("anthropic", "claude-sonnet-5", 1_000_000, 128_000, (2.0, 10.0, 0.2), False),
        ("anthropic", "claude-3-haiku-20240307", 200_000, 4_096, (0.25, 1.25, 0.03), False),
        # an unknown Claude: the smallest window, a safe output limit, no manual thinking
        ("anthropic", "claude-nova-9", 200_000, 8_192, (None, None, None), False),
        # through an aggregator's name
        ("openai", "anthropic/claude-sonnet-4.5", 200_000, 64_000, (3.0, 15.0, 0.3), True),
        ("openai", "openai/gpt-5.2", 400_000, 128_000, (1.75, 14.0, 0.175), True),
    ],
)
def test_the_table(
    family: str,
    model: str,
    window: int,
    output: int,
    prices: tuple[float | None, float | None, float | None],
    thinking: bool,
) -> None:
    info = model_info(family, model)
    assert (info.context_window, info.max_output_tokens) == (window, output)
    assert (info.input_price, info.output_price, info.cached_input_price) == prices
    assert info.supports_thinking is thinking


@pytest.mark.parametrize(
    ("model", "settings", "kind"),
    [
        ("openai:gpt-5", {}, ResponsesProvider),
        ("openai:gpt-5.2-codex", {}, ResponsesProvider),
        ("openai:o4-mini", {}, ResponsesProvider),
        ("openai:o3", {"base-url": "https://api.openai.com/v1"}, ResponsesProvider),
        ("openai:gpt-5-chat-latest", {}, OpenAIProvider),
        ("openai:gpt-4.1", {}, OpenAIProvider),
        # a compatible server keeps Chat Completions, whatever the model is called
        ("openai:gpt-5", {"base-url": "http://127.0.0.1:8000/v1"}, OpenAIProvider),
        # and the configuration decides over the automatic choice
        ("openai:gpt-5", {"api": "chat-completions"}, OpenAIProvider),
        (
            "openai:gpt-oss-120b",
            {"base-url": "http://127.0.0.1:8000/v1", "api": "responses"},
            ResponsesProvider,
        ),
        ("ollama:gpt-oss:20b", {"api": "responses"}, ResponsesProvider),
    ],
)
def test_the_wire_api(model: str, settings: dict[str, str], kind: type) -> None:
    family = model.partition(":")[0]
    config = from_mapping({"model": model, family: settings})
    provider = make_provider(config)
    assert type(provider) is kind


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"anthropic": {"api": "responses"}}, "`anthropic.api` must be auto"),
        ({"openai": {"api": "completions"}}, "api"),
    ],
)
def test_the_api_setting_is_checked(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping(raw, check=check)


def test_other_apis_ignore_reasoning_items() -> None:
    """Chat Completions and Anthropic have no use for OpenAI's reasoning items: they are
    never sent to them (a session may switch models)."""
    history: list[Message] = [
        UserMessage([TextPart("q")]),
        AssistantMessage(
            [
                ReasoningPart("rs_1", "enc", ["s"], "openai:gpt-5"),
                TextPart("Let me."),
                ToolCallPart("c1", "read_file", {}),
            ]
        ),
        ToolResultMessage("c1", "read_file", [TextPart("r")]),
    ]
    request = ModelRequest(system="", messages=list(history))
    chat = to_openai_messages(request)
    assert "enc" not in repr(chat) and chat[1]["content"] == "Let me."
    claude = to_anthropic_messages(request)
    assert "enc" not in repr(claude)
    assert [b["type"] for b in claude[1]["content"]] == ["text", "tool_use"]
