"""What the model is told: the system prompt of a session's requests.

It is built once per session (and process), so that it stays the same from request to
request (a stable prefix is what prompt caching pays off on), from:

1. the built-in instructions (``prompts/system.md``), or the configuration's
   ``system-prompt``, or the client's ``systemPrompt`` in ``override`` mode;
2. the client's ``systemPrompt`` in ``append`` mode;
3. the environment: OS and shell, date, the workspace roots, git (branch, clean or
   not, at the start of the session), the model, the permission mode;
4. project instructions: the nearest ``AGENTS.md`` from the session's directory up to
   the repository root (``CLAUDE.md`` where there is none), the user's own
   ``AGENTS.md`` in the config directory, and ``.acp-agent/instructions.md``; each cut at
   :data:`MAX_INSTRUCTIONS_CHARS` with a note.

A later change of mode reaches the model as a short note with the next prompt
(:func:`mode_note`), and plan mode offers only tools that read (see ``runtime``).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..sessions.session import Session

MAX_INSTRUCTIONS_CHARS = 16_000
INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")

#: What each mode lets the agent do, in the words the model reads.
MODE_RULES = {
    "ask": "reads run; every edit and command asks the user first",
    "accept-edits": "reads and edits inside the workspace run; commands ask the user first",
    "plan": (
        "read-only: explore and plan, and deliver the plan with write_plan; edits and "
        "commands are not available"
    ),
    "bypass": "everything runs without asking",
}


@dataclass(frozen=True, slots=True)
class ClientPrompt:
    """A client's ``systemPrompt``: ``append`` or ``override``, and its text."""

    mode: str
    text: str


@cache
def builtin() -> str:
    return resources.files("acp_agent.prompts").joinpath("system.md").read_text("utf-8").strip()


async def system_prompt(
    session: Session, *, configured: str | None = None, env: Mapping[str, str] = os.environ
) -> str:
    """The session's system prompt (built on first use, then kept)."""
    if session.system_text is None:
        facts = await asyncio.to_thread(_gather, session.cwd, env)
        session.system_text = compose(session, facts, configured)
        session.told_mode = session.mode
    return session.system_text


@dataclass(frozen=True, slots=True)
class Facts:
    """What the environment says, read in a worker thread."""

    shell: str
    git: str
    files: tuple[tuple[str, str], ...]  # (path, text) of the instruction files found


def compose(session: Session, facts: Facts, configured: str | None = None) -> str:
    client = session.client_prompt
    if client is not None and client.mode == "override":
        base = client.text
    else:
        base = (configured or builtin()).replace("{cwd}", session.cwd)
    parts = [base]
    if client is not None and client.mode == "append":
        parts.append(f"# Instructions from the editor\n\n{client.text}")
    roots = "\n".join(f"- Also: {d}" for d in session.additional_directories)
    parts.append(
        "# Environment\n\n"
        f"- Operating system: {platform.system()} {platform.release()} ({platform.machine()});"
        f" shell: {facts.shell}\n"
        f"- Today's date: {datetime.date.today().isoformat()}\n"
        f"- Workspace root: {session.cwd} (relative paths resolve against it)\n"
        + (roots + "\n" if roots else "")
        + f"- Git: {facts.git}\n"
        f"- Model: {session.model}\n"
        f"- Permission mode: {session.mode} ({MODE_RULES.get(session.mode, session.mode)})"
    )
    for path, text in facts.files:
        parts.append(f"# Instructions from {path}\n\n{text}")
    return "\n\n".join(parts)


def mode_note(session: Session) -> str | None:
    """A note for the model when the mode changed since it was last told (``None``
    when it knows); marks it told."""
    if session.told_mode is None or session.told_mode == session.mode:
        return None
    session.told_mode = session.mode
    rules = MODE_RULES.get(session.mode, session.mode)
    return f"[The permission mode is now {session.mode}: {rules}.]"


# ---------------------------------------------------------------------- the environment


def _gather(cwd: str, env: Mapping[str, str]) -> Facts:
    root = _repo_root(cwd)
    return Facts(
        shell=env.get("SHELL") or "/bin/sh",
        git=_git(cwd) if root else "not a git repository",
        files=tuple(_instruction_files(cwd, root, env)),
    )


def _repo_root(cwd: str) -> str | None:
    here = os.path.abspath(cwd)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _git(cwd: str) -> str:
    import subprocess

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                             timeout=5, stdin=subprocess.DEVNULL, check=True)  # fmt: skip
        return out.stdout.strip()

    try:
        try:
            branch = git("symbolic-ref", "--short", "-q", "HEAD")  # an unborn branch too
        except subprocess.CalledProcessError:
            branch = "a detached HEAD at " + git("rev-parse", "--short", "HEAD")
        changes = len(git("status", "--porcelain").splitlines())
    except (OSError, subprocess.SubprocessError):
        return "a git repository (its state could not be read)"
    state = "clean" if not changes else f"{changes} uncommitted change(s)"
    return f"a repository on branch {branch}, {state} at the start of the session"


def _instruction_files(cwd: str, root: str | None, env: Mapping[str, str]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    config_home = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    user = os.path.join(config_home, "acp-agent", "AGENTS.md")
    if os.path.isfile(user):
        found.append(_read(user))
    nearest = _nearest(cwd, root or cwd)
    if nearest is not None:
        found.append(_read(nearest))
    local = os.path.join(root or cwd, ".acp-agent", "instructions.md")
    if os.path.isfile(local):
        found.append(_read(local))
    return found


def _nearest(cwd: str, top: str) -> str | None:
    """The nearest AGENTS.md from ``cwd`` up to ``top``; else the nearest CLAUDE.md."""
    for name in INSTRUCTION_FILES:
        here = os.path.abspath(cwd)
        while True:
            path = os.path.join(here, name)
            if os.path.isfile(path):
                return path
            if here == os.path.abspath(top) or os.path.dirname(here) == here:
                break
            here = os.path.dirname(here)
    return None


def _read(path: str) -> tuple[str, str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_INSTRUCTIONS_CHARS + 1)
    except OSError as exc:
        return path, f"(could not be read: {exc.strerror or exc})"
    if len(text) > MAX_INSTRUCTIONS_CHARS:
        text = (
            text[:MAX_INSTRUCTIONS_CHARS].rstrip()
            + f"\n\n[Cut at {MAX_INSTRUCTIONS_CHARS:,} characters; read {path} for the rest.]"
        )
    return path, text.strip()
