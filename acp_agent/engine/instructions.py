"""What the model is told: the system prompt of a session's requests.

It is built once per session (and process), so that it stays the same from request to
request (a stable prefix is what prompt caching pays off on), from:

1. the built-in instructions (``prompts/system.md``), or the configuration's
   ``system-prompt``, or the client's ``systemPrompt`` in ``override`` mode;
2. the client's ``systemPrompt`` in ``append`` mode;
3. the environment: OS and shell, date, the workspace roots, git (branch, clean or
   not, at the start of the session: ``gitstate``, which runs nothing the repository
   configured), the model, the permission mode;
4. project instructions: the nearest ``AGENTS.md`` from the session's directory up to
   the repository root (``CLAUDE.md`` where there is none), the user's own
   ``AGENTS.md`` in the config directory, and ``.acp-agent/instructions.md``; each cut at
   :data:`MAX_INSTRUCTIONS_CHARS` with a note. Each is read through
   ``projectfiles.read_project_text``: only inside the session's roots (the user's
   inside their configuration directory; one found above the roots exactly where it
   was found), never through a link leading elsewhere; a file refused is reported
   (``Facts.refused``), never read;
5. the catalogue of the session's Agent Skills (``skills``) as they were when the prompt
   was built; later changes reach the model as a note before its next request
   (``skills.skills_note``), so the cached prefix is never rewritten for them.

A later change of mode reaches the model as a short note with the next prompt
(:func:`mode_note`), and plan mode offers only tools that read (see ``permissions.offered``).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from .gitstate import repo_root, state
from .projectfiles import ProjectText, Refused, config_dir, read_project_text
from .skills import catalogue, entries

if TYPE_CHECKING:
    from ..sessions.session import Session

MAX_INSTRUCTIONS_CHARS = 16_000
MAX_INSTRUCTIONS_BYTES = 4 * MAX_INSTRUCTIONS_CHARS  # at most this much of a file is read
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


@cache
def builtin() -> str:
    return resources.files("acp_agent.prompts").joinpath("system.md").read_text("utf-8").strip()


async def system_prompt(
    session: Session,
    *,
    configured: str | None = None,
    env: Mapping[str, str] = os.environ,
    refused: Callable[[Refused], Awaitable[None]] | None = None,
) -> str:
    """The session's system prompt (built on first use, then kept). ``env``: the
    environment commands get (git runs with it); ``refused`` hears of each instruction
    file that was not read (a link out of the roots, not text...)."""
    if session.system_text is None:
        facts = await asyncio.to_thread(_gather, session.cwd, session.roots, env)
        session.system_text = compose(session, facts, configured)
        session.told_mode = session.mode
        session.skills_told = session.skills_in_prompt = entries(session.skills)
        if refused is not None:
            for refusal in facts.refused:
                await refused(refusal)
    return session.system_text


@dataclass(frozen=True, slots=True)
class Facts:
    """What the environment says, read in a worker thread."""

    shell: str
    git: str
    files: tuple[tuple[str, str], ...]  # (path, text) of the instruction files found
    refused: tuple[Refused, ...] = ()  # instruction files found but not read, and why


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
    skills, _ = catalogue(session.skills)
    if skills:
        parts.append(skills)
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


def _gather(cwd: str, roots: Sequence[str], env: Mapping[str, str]) -> Facts:
    """The environment's facts (a worker thread). Git runs with nothing the repository
    configured (``gitstate``) and ``env``: the environment commands get."""
    root = repo_root(cwd)
    files, refused = _instruction_files(cwd, root, roots, env)
    return Facts(
        shell=env.get("SHELL") or "/bin/sh",
        git=state(root, cwd, env) if root else "not a git repository",
        files=tuple(files),
        refused=tuple(refused),
    )


def _instruction_files(
    cwd: str, root: str | None, roots: Sequence[str], env: Mapping[str, str]
) -> tuple[list[tuple[str, str]], list[Refused]]:
    """The instruction files found, read only where they may be (``projectfiles``): the
    user's inside their configuration directory, the project's inside the session's
    roots, or, for one found above the roots (up to the repository root), exactly
    where it was found."""
    found: list[tuple[str, str]] = []
    refused: list[Refused] = []

    def read(path: str, allowed: Sequence[str]) -> None:
        got = read_project_text(path, allowed, max_bytes=MAX_INSTRUCTIONS_BYTES)
        if isinstance(got, Refused):
            refused.append(got)
        else:
            found.append((path, _bounded(got)))

    user_dir = config_dir(env)
    user = os.path.join(user_dir, "AGENTS.md")
    if os.path.lexists(user):
        read(user, [user_dir])
    nearest = _nearest(cwd, root or cwd)
    if nearest is not None:
        read(nearest, [*roots, nearest])  # a file as a place: exactly that one
    local = os.path.join(root or cwd, ".acp-agent", "instructions.md")
    if os.path.lexists(local):
        read(local, roots)
    return found, refused


def _nearest(cwd: str, top: str) -> str | None:
    """The nearest AGENTS.md from ``cwd`` up to ``top``; else the nearest CLAUDE.md."""
    for name in INSTRUCTION_FILES:
        here = os.path.abspath(cwd)
        while True:
            path = os.path.join(here, name)
            if os.path.lexists(path):
                return path
            if here == os.path.abspath(top) or os.path.dirname(here) == here:
                break
            here = os.path.dirname(here)
    return None


def _bounded(got: ProjectText) -> str:
    text = got.text
    if got.cut or len(text) > MAX_INSTRUCTIONS_CHARS:
        text = (
            text[:MAX_INSTRUCTIONS_CHARS].rstrip()
            + f"\n\n[Cut at {MAX_INSTRUCTIONS_CHARS:,} characters; read {got.path} for the rest.]"
        )
    return text.strip()
