"""Slash commands a session offers: the built-ins, user-defined prompt commands, MCP
prompts and skills, and the list ``available_commands_update`` carries (what
``session/new`` needs; :mod:`.builtins` runs them).

Agent Skills (``engine.skills``) are commands too: ``/name arguments`` loads the skill
into the turn (a built-in or a prompt command of the same name wins).

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
from collections.abc import Mapping, Sequence

from ..engine.projectfiles import Refused, read_project_text
from ..engine.skills import discover
from ..escaping import escaped
from ..protocol import UNSET
from ..protocol import types as t
from ..sessions.offers import PromptCommand
from ..sessions.session import Session

MAX_COMMAND_BYTES = 256 * 1024
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")

#: (name, description, input hint or None)
BUILTINS: list[tuple[str, str, str | None]] = [
    ("help", "List the available commands", None),
    ("plan", "Switch to plan mode (read-only); with text, plan that task", "task to plan"),
    ("model", "Show or switch the model", "model id"),
    ("mode", "Show or switch the permission mode", "ask | accept-edits | auto | plan | bypass"),
    ("compact", "Summarise older history to free context", "what to keep"),
    ("permissions", "List the remembered \"always\" answers; `forget N|all` takes them back",
     "forget N | forget all"),
    ("undo", "Put back what the last turn changed in the workspace", None),
    ("rewind", "Go back to before an earlier turn: workspace, conversation or both",
     "N [both | code | conversation]"),
]
#: The commands that take back what turns did: refused while a turn runs (``prompting``).
TAKING_BACK = ("undo", "rewind")


class CommandFile:
    """A prompt command from a markdown file (a ``sessions.session.PromptCommand``)."""

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


def load_prompt_commands(
    cwd: str,
    env: Mapping[str, str] = os.environ,
    roots: Sequence[str] | None = None,
    refused: list[Refused] | None = None,
) -> dict[str, CommandFile]:
    """The prompt commands found. Each file is read only where it may be
    (``projectfiles``): the user's inside their configuration directory, the project's
    inside the session's ``roots`` (default: ``cwd``); the others are added to
    ``refused``."""
    builtin = {name for name, _, _ in BUILTINS}
    found: dict[str, CommandFile] = {}
    user, project = command_dirs(cwd, env)
    for directory, allowed in ((user, [os.path.dirname(user)]), (project, roots or [cwd])):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for filename in names:
            stem, ext = os.path.splitext(filename)
            if ext != ".md" or not _NAME.match(stem) or stem in builtin:
                continue
            path = os.path.join(directory, filename)
            got = read_project_text(path, allowed, max_bytes=MAX_COMMAND_BYTES)
            if isinstance(got, Refused):
                if refused is not None:
                    refused.append(got)
                continue
            meta, body = _front_matter(got.text)
            first_line = next((ln.strip() for ln in body.splitlines() if ln.strip()), stem)
            description = escaped(meta.get("description") or first_line[:80])  # shown
            hint = meta.get("argument-hint") or ("arguments" if "$ARGUMENTS" in body else None)
            hint = escaped(hint) if hint else None
            found[stem] = CommandFile(stem, description, hint, body.strip(), path)
    return found


def available_commands(
    prompt_commands: Mapping[str, PromptCommand],
    extra: list[tuple[str, str, str | None]] | None = None,
    skills: Mapping[str, PromptCommand] | None = None,
) -> list[t.AvailableCommand]:
    """The list for ``available_commands_update``: built-ins, then user, then skills (a
    name taken before is not offered twice), then extra (MCP)."""
    taken = {name for name, _, _ in BUILTINS} | set(prompt_commands)
    entries = [
        *BUILTINS,
        *((c.name, c.description, c.hint) for c in prompt_commands.values()),
        *((c.name, c.description, c.hint) for c in (skills or {}).values() if c.name not in taken),
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


def session_commands(session: Session) -> list[t.AvailableCommand]:
    """What ``available_commands_update`` offers this session."""
    mcp = session.mcp
    extra = [(c.name, c.description, c.hint) for c in mcp.prompts()] if mcp else []
    return available_commands(session.prompt_commands, extra, session.skills)


def help_text(session: Session) -> str:
    lines = [f"- `/{c.name}` — {c.description}" for c in session_commands(session)]
    return "Commands:\n" + "\n".join(lines)


# --------------------------------------------------------------------------- skills


def find_skills(session: Session, env: Mapping[str, str] = os.environ) -> list[Refused]:
    """Look the session's skills up again (a worker thread); the broken ones not told
    yet are returned (each told once a session, while it stays broken)."""
    found = discover(session.cwd, session.roots, env)
    session.skills = found.skills
    problems = frozenset((p.path, p.reason) for p in found.problems)
    new = [p for p in found.problems if (p.path, p.reason) not in session.skill_problems]
    session.skill_problems = problems
    return new


def skill_notice(refusal: Refused) -> tuple[str, str, str]:
    """The notice telling the user a skill file was skipped."""
    return "warning", "Skill skipped", escaped(f"{refusal.path}: {refusal.reason}.")
