"""Slash commands: parsing invocations and loading user prompt commands."""

from __future__ import annotations

from pathlib import Path

import msgspec

from acp_agent.handlers.commands import available_commands, load_prompt_commands, parse_invocation

from .schema_check import validate_def


def test_parse_invocation() -> None:
    assert parse_invocation("/plan refactor the parser") == ("plan", "refactor the parser")
    assert parse_invocation("/help") == ("help", "")
    assert parse_invocation("not a command") is None
    assert parse_invocation("// comment") is None
    assert parse_invocation("/ space") is None


def test_project_commands_override_user_commands(tmp_path: Path) -> None:
    home = tmp_path / "cfg" / "acp-agent" / "commands"
    home.mkdir(parents=True)
    (home / "review.md").write_text("User review of $ARGUMENTS")
    (home / "standup.md").write_text("---\ndescription: Write my standup\n---\nSummarise today.")
    project = tmp_path / "proj" / ".acp-agent" / "commands"
    project.mkdir(parents=True)
    (project / "review.md").write_text(
        "---\ndescription: Review staged changes\nargument-hint: focus\n---\n"
        "Review with focus on $ARGUMENTS."
    )
    (project / "help.md").write_text("shadowing a built-in is ignored")
    (project / "bad name.md").write_text("ignored")
    commands = load_prompt_commands(
        str(tmp_path / "proj"), env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    )
    assert sorted(commands) == ["review", "standup"]
    review = commands["review"]
    assert review.description == "Review staged changes" and review.hint == "focus"
    assert review.expand("error handling") == "Review with focus on error handling."
    assert commands["standup"].expand("extra notes") == "Summarise today.\n\nextra notes"


def test_available_commands_validate_against_the_schema(tmp_path: Path) -> None:
    commands = load_prompt_commands(str(tmp_path), env={"XDG_CONFIG_HOME": str(tmp_path)})
    listed = available_commands(commands, extra=[("mcp:srv:greet", "Greet someone", "name")])
    names = [c.name for c in listed]
    assert (
        names[:5] == ["help", "plan", "model", "mode", "compact"] and names[-1] == "mcp:srv:greet"
    )
    update = {"sessionUpdate": "available_commands_update",
              "availableCommands": msgspec.to_builtins(listed)}
    assert validate_def("SessionUpdate", update) == []
