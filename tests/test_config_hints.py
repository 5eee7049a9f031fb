"""Configuration mistakes named where they were made, with what fixes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_agent.config import ConfigError, from_mapping, load
from acp_agent.config.hints import suggest, toml_line, unknown_variable


@pytest.mark.parametrize(("name", "candidates", "meant"), [
    ("default_mode", ["default-mode", "model"], "default-mode"),  # _ for -
    ("ACP_AGENT_MODE", ["ACP_AGENT_MODEL", "ACP_AGENT_DEFAULT_MODE"], "ACP_AGENT_DEFAULT_MODE"),
    ("modle", ["model", "models", "thinking"], "model"),
    ("zzz", ["model", "thinking"], None),
])
def test_the_nearest_name(name: str, candidates: list[str], meant: str | None) -> None:
    assert suggest(name, candidates) == meant


TOML = """\
model = "offline"

[openai]
timeout = 30
"base_url" = "x"

[model-overrides."gpt-4.1"]
contxt-window = 3
limits.prune-at = 5.0
"""


@pytest.mark.parametrize(("path", "line"), [
    (("model",), 1), (("openai", "base_url"), 5),
    (("model-overrides", "gpt-4.1", "contxt-window"), 8), (("openai",), 3), (("nowhere",), None),
])
def test_the_line_a_key_is_written_on(path: tuple[str, ...], line: int | None) -> None:
    assert toml_line(TOML, path) == line


@pytest.mark.parametrize(("raw", "says"), [
    ({"default_mode": "ask"}, "`default_mode` is not a setting; did you mean `default-mode`?"),
    ({"default-mode": "planning"},
     '`default-mode` must be one of ask, accept-edits, auto, plan, bypass, got "planning"'),
    ({"openai": {"base_url": "x"}}, "[openai] `base_url` is not a setting; did you mean"
                                    " `base-url`?"),
    ({"model-overrides": {"m": {"contxt-window": 1}}},
     '[model-overrides."m"] `contxt-window` is not a setting; did you mean `context-window`?'),
    ({"limits": {"max-turn-requests": "many"}},
     '`limits.max-turn-requests` must be a whole number, got "many"'),
    ({"models": "openai:gpt-4.1"}, '`models` must be a list of strings, got "openai:gpt-4.1"'),
    ({"limits": 3}, "`limits` must be a table, e.g. [limits]"),
])
def test_a_mistake_says_what_is_allowed(raw: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping(raw, "F")
    assert str(caught.value) == f"F: {says}"


def test_a_file_mistake_names_its_line(tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text('model = "offline"\n[limits]\nprune-at = 5.0\n')
    with pytest.raises(ConfigError, match=rf"^{file}:3: `limits.prune-at` must be between"):
        load(str(file), env={})


def test_each_variable_is_named_and_an_unknown_one_refused() -> None:
    with pytest.raises(ConfigError, match=r"^ACP_AGENT_LOG_LEVEL: `log-level` must be one of"):
        load("/dev/null", env={"ACP_AGENT_LOG_LEVEL": "loud"})
    assert unknown_variable({"ACP_AGENT_MODE": "plan", "HOME": "/"}, ["ACP_AGENT_DEFAULT_MODE"]) \
        == "ACP_AGENT_MODE is not a setting of acp-agent; did you mean `ACP_AGENT_DEFAULT_MODE`?"
    assert unknown_variable({"ACP_AGENT_COALESCE_CHUNKS": "1"}, []) is None  # read elsewhere
