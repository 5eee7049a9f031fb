"""Slash commands: the built-ins, user-defined prompt commands, MCP prompts, and
:func:`dispatch`, which runs the one a prompt starts with.

User commands are markdown files: ``<project>/.acp-agent/commands/<name>.md`` and
``$XDG_CONFIG_HOME/acp-agent/commands/<name>.md`` (the project's win on a name clash).
An optional front matter gives the description and an input hint::

    ---
    description: Review the staged changes
    argument-hint: focus area
    ---
    Review `git diff --cached` with attention to $ARGUMENTS.

``$ARGUMENTS`` is replaced by the text after the command (appended when absent).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..protocol import UNSET
from ..protocol import types as t

if TYPE_CHECKING:
    from ..sessions.session import Session
    from .runtime import Runtime

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")

#: (name, description, input hint or None)
BUILTINS: list[tuple[str, str, str | None]] = [
    ("help", "List the available commands", None),
    ("plan", "Switch to plan mode (read-only); with text, plan that task", "task to plan"),
    ("model", "Show or switch the model", "model id"),
    ("mode", "Show or switch the permission mode", "ask | accept-edits | plan | bypass"),
    ("compact", "Summarise older history to free context", "what to keep"),
]


class PromptCommand:
    __slots__ = ("body", "description", "hint", "name", "source")

    def __init__(self, name: str, description: str, hint: str | None, body: str, source: str):
        self.name = name
        self.description = description
        self.hint = hint
        self.body = body
        self.source = source

    def expand(self, arguments: str) -> str:
        if "$ARGUMENTS" in self.body:
            return self.body.replace("$ARGUMENTS", arguments)
        return f"{self.body}\n\n{arguments}".rstrip() if arguments else self.body


def parse_invocation(text: str) -> tuple[str, str] | None:
    """``"/name rest"`` -> ``("name", "rest")``; ``None`` when ``text`` is not a command."""
    if not text.startswith("/") or text.startswith("//"):
        return None
    name, _, rest = text[1:].partition(" ")
    name = name.strip()
    if not _NAME.match(name):
        return None
    return name, rest.strip()


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    meta: dict[str, str] = {}
    for line in text[3:end].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip().lower()] = value.strip().strip("\"'")
    return meta, text[end + 4 :].lstrip("\n")


def command_dirs(cwd: str, env: Mapping[str, str] = os.environ) -> list[str]:
    """Where prompt commands are looked up, lowest precedence first."""
    config_home = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return [
        os.path.join(config_home, "acp-agent", "commands"),
        os.path.join(cwd, ".acp-agent", "commands"),
    ]


def load_prompt_commands(cwd: str, env: Mapping[str, str] = os.environ) -> dict[str, PromptCommand]:
    builtin = {name for name, _, _ in BUILTINS}
    found: dict[str, PromptCommand] = {}
    for directory in command_dirs(cwd, env):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for filename in names:
            stem, ext = os.path.splitext(filename)
            if ext != ".md" or not _NAME.match(stem) or stem in builtin:
                continue
            path = os.path.join(directory, filename)
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read(256 * 1024)
            except (OSError, UnicodeDecodeError):
                continue
            meta, body = _front_matter(text)
            first_line = next((ln.strip() for ln in body.splitlines() if ln.strip()), stem)
            description = meta.get("description") or first_line[:80]
            hint = meta.get("argument-hint") or ("arguments" if "$ARGUMENTS" in body else None)
            found[stem] = PromptCommand(stem, description, hint, body.strip(), path)
    return found


def available_commands(
    prompt_commands: Mapping[str, PromptCommand],
    extra: list[tuple[str, str, str | None]] | None = None,
) -> list[t.AvailableCommand]:
    """The list for ``available_commands_update``: built-ins, then user, then extra (MCP)."""
    entries = [
        *BUILTINS,
        *((c.name, c.description, c.hint) for c in prompt_commands.values()),
        *(extra or []),
    ]
    return [
        t.AvailableCommand(
            name=name,
            description=description,
            input=t.UnstructuredCommandInput(hint=hint) if hint else UNSET,
        )
        for name, description, hint in entries
    ]


# --------------------------------------------------------------------------- dispatch


async def dispatch(
    rt: Runtime, session: Session, blocks: list[t.ContentBlock]
) -> t.PromptResponse | list[t.ContentBlock]:
    """Handle a leading ``/command``: a built-in answers by itself (a response) or changes
    what the model sees; a prompt command expands. Other prompts pass as they are."""
    from ..engine.permissions import MODE_IDS
    from .options import switch_mode, switch_model

    first = blocks[0] if blocks else None
    invocation = parse_invocation(first.text.strip()) if isinstance(first, t.TextContent) else None
    if invocation is None:
        return blocks
    name, rest = invocation
    tail = blocks[1:]
    done = t.PromptResponse(stop_reason="end_turn")
    if name == "help":
        await session.say(help_text(session))
        return done
    if name in ("mode", "plan"):
        target = "plan" if name == "plan" else rest
        if target:
            if target not in MODE_IDS:
                await session.say(f"Unknown mode `{target}`: one of {', '.join(MODE_IDS)}.")
                return done
            await switch_mode(rt, session, target)
        if name == "plan" and rest:
            return [t.TextContent(text=f"Plan this task (plan mode: read-only): {rest}"), *tail]
        await session.say(f"Mode: **{session.mode}**.")
        return done
    if name == "model":
        if rest:
            if rest not in rt.models:
                await session.say(f"Unknown model `{rest}`: one of {', '.join(rt.models)}.")
                return done
            await switch_model(rt, session, rest)
        await session.say(f"Model: **{session.model}** (available: {', '.join(rt.models)}).")
        return done
    if name == "compact":
        from ..engine.compaction import compact_session

        await compact_session(rt, session, rest or None, keep_tokens=0)
        return done
    command = session.prompt_commands.get(name)
    if command is not None:
        return [t.TextContent(text=command.expand(rest)), *tail]
    if session.mcp is not None and any(p.name == name for p in session.mcp.prompts()):
        from ..mcp import PromptError

        try:
            return [*await session.mcp.get_prompt(name, rest), *tail]
        except PromptError as exc:
            await session.say(f"`/{name}` failed: {exc}")
            return done
    return blocks  # not ours: the model reads it as text


def session_commands(session: Session) -> list[t.AvailableCommand]:
    """What ``available_commands_update`` offers this session."""
    mcp = session.mcp
    extra = [(c.name, c.description, c.hint) for c in mcp.prompts()] if mcp else []
    return available_commands(session.prompt_commands, extra)


def help_text(session: Session) -> str:
    lines = [f"- `/{c.name}` — {c.description}" for c in session_commands(session)]
    return "Commands:\n" + "\n".join(lines)
