"""What the model is told: the system prompt of a session's requests.

It is built once per session (and process), so that it stays the same from request to
request (a stable prefix is what prompt caching pays off on), from:

1. the built-in instructions (``prompts/system.md``), or the configuration's
   ``system-prompt``, or the client's ``systemPrompt`` in ``override`` mode;
2. the client's ``systemPrompt`` in ``append`` mode;
3. the environment: OS and shell, date, the workspace roots, git (branch, clean or
   not, at the start of the session: ``gitstate``, which runs nothing the repository
   configured), the model, the permission mode;
4. project instructions: the user's own ``AGENTS.md`` in the config directory, every
   ``AGENTS.md`` from the repository root down to the session's directory (``CLAUDE.md``
   where a directory has none; ``projectrules``: within a total budget, the outermost cut
   first), and ``.acp-agent/instructions.md``; each cut at
   ``MAX_INSTRUCTIONS_CHARS`` with a note. Each is read through
   ``projectfiles.read_project_text``: only inside the session's roots (the user's
   inside their configuration directory; one found above the roots exactly where it
   was found), never through a link leading elsewhere; a file refused is reported
   (``Facts.refused``), never read;
5. the catalogue of the session's Agent Skills (``skills``) as they were when the prompt
   was built; later changes reach the model as a note before its next request
   (``skills.skills_note``), so the cached prefix is never rewritten for them.

A later change of mode reaches the model as a short note before the text of the next
prompt (:func:`mode_note`, in a ``<system-reminder>``), never after it; the tools offered
are the same in every mode (``permissions.decide`` refuses at the call).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from ..escaping import escaped
from ..tools.usershell import choose
from .gitstate import repo_root, state
from .projectfiles import Refused, config_dir, read_project_text
from .projectrules import MAX_INSTRUCTIONS_BYTES, bounded, chain
from .skills import catalogue, entries

if TYPE_CHECKING:
    from ..sessions.session import Session


#: What each mode lets the agent do, in the words the model reads.
MODE_RULES = {
    "ask": "reads run; every edit and command asks the user first",
    "accept-edits": "reads and edits inside the workspace run; commands ask the user first",
    "auto": (
        "reads and edits inside the workspace run; commands run without asking, in a "
        "sandbox (run_command's result says when the sandbox refused something); anything "
        "else asks the user first"
    ),
    "plan": (
        "read-only: explore and plan, and deliver the plan with write_plan; edits are "
        "refused, and a command runs only when the user allows it as one that changes "
        "nothing (in a read-only sandbox when there is one)"
    ),
    "bypass": "everything runs without asking",
}


#: The built-in prompt's parts that depend on the model's tools and on who reads it.
VARIANTS: dict[str, dict[str, str]] = {
    "editing": {
        "standard": ("Make the smallest change that fully solves the task. Prefer `edit_file` "
                     "for changes to existing files; `write_file` for new files or complete "
                     "rewrites."),
        "codex": ("Make the smallest change that fully solves the task, with `apply_patch` "
                  "(files added, changed, moved and deleted, in one patch)."),
    },
    "edit_tool": {
        "standard": ("`edit_file` replaces `old_string` with `new_string`; `old_string` must "
                     "match the file exactly (copy it from `read_file` without the line "
                     "numbers) and be unique unless `replace_all` is set. Include a few lines "
                     "of context to make it unique."),
        "codex": ("`apply_patch` takes a patch in its own format (its description shows it): "
                  "copy each hunk's context and removed lines exactly from `read_file` "
                  "(without the line numbers). A hunk that does not match changes nothing, "
                  "and the error names it."),
    },
    "audience": {
        "user": ("the user sees every tool call, its arguments and its result, and must "
                 "approve edits and commands unless the permission mode says otherwise."),
        "subagent": ("you are a subagent: another agent gave you this task and reads your "
                     "final answer as its result. The user may not see your tool calls; edits "
                     "and commands still ask for their approval unless the permission mode "
                     "says otherwise."),
    },
}
DELEGATE = ("- For a large, self-contained piece of investigation, `spawn_agent` can delegate "
            "it to a subagent that starts with none of this conversation; give it a complete "
            "prompt.\n")  # fmt: skip


@cache
def builtin(style: str = "standard", subagent: bool = False, delegate: bool = True) -> str:
    """The built-in prompt for a model of ``style`` (``ModelInfo.tool_style``); a
    ``subagent``'s says whom it answers; ``delegate``: spawn_agent is offered."""
    text = resources.files("acp_agent.prompts").joinpath("system.md").read_text("utf-8").strip()
    return (text.replace("{editing}", VARIANTS["editing"][style])
            .replace("{edit_tool}", VARIANTS["edit_tool"][style])
            .replace("{audience}", VARIANTS["audience"]["subagent" if subagent else "user"])
            .replace("{delegate}", DELEGATE if delegate else ""))  # fmt: skip


async def system_prompt(
    session: Session,
    *,
    configured: str | None = None,
    env: Mapping[str, str] = os.environ,
    tell: Callable[[str, str], Awaitable[None]] | None = None,
    shell: str | None = None,
    style: str = "standard",
    delegate: bool = True,
) -> str:
    """The session's system prompt (built on first use, then kept). ``env``: the
    environment commands get (git runs with it); ``tell`` (a title, a description) hears
    once per session of each instruction file that was not read, and why; ``shell``: what
    the environment section says of the shell commands run in; ``style``: the model's
    tool style; ``delegate``: spawn_agent is offered."""
    if session.system_text is None:
        facts = await asyncio.to_thread(_gather, session.cwd, session.roots, env)
        if shell is not None:
            facts = replace(facts, shell=shell)
        if session.system_text is None:  # the first built wins (it may have been built ahead)
            session.system_text = compose(session, facts, configured, style, delegate)
            session.told_mode = session.mode
            session.skills_told = session.skills_in_prompt = entries(session.skills)
        told = _told.setdefault(session, set())
        for refusal in facts.refused:
            if tell is not None and refusal.path not in told:
                told.add(refusal.path)
                why = escaped(f"{refusal.path}: {refusal.reason}.")
                await tell("Instruction file skipped", why)
    return session.system_text


#: The instruction files each session's user was told were not read.
_told: weakref.WeakKeyDictionary[Session, set[str]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class Facts:
    """What the environment says, read in a worker thread."""

    shell: str
    git: str
    files: tuple[tuple[str, str], ...]  # (path, text) of the instruction files found
    refused: tuple[Refused, ...] = ()  # instruction files found but not read, and why


def compose(session: Session, facts: Facts, configured: str | None = None,
            style: str = "standard", delegate: bool = True) -> str:  # fmt: skip
    client = session.client_prompt
    if client is not None and client.mode == "override":
        base = client.text
    else:
        own = builtin(style, session.parent is not None, delegate)
        base = (configured or own).replace("{cwd}", session.cwd)
    parts = [base]
    if client is not None and client.mode == "append":
        parts.append(f"# Instructions from the editor\n\n{client.text}")
    roots = "\n".join(f"- Also: {d}" for d in session.additional_directories)
    parts.append(
        "# Environment\n\n"
        f"- Operating system: {platform.system()} {platform.release()} ({platform.machine()})\n"
        f"- Shell: {facts.shell}\n"
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


#: How the agent's own notes to the model are wrapped (they come before the user's text
#: in a user message; the offline model skips them).
REMINDER = "<system-reminder>{}</system-reminder>"


def reminder(note: str) -> str:
    """``note`` as the model is told what changed beside the user's text (once)."""
    return note if note.startswith("<system-reminder>") else REMINDER.format(note)


def mode_note(session: Session) -> str | None:
    """A note for the model when the mode changed since it was last told (``None``
    when it knows); marks it told."""
    if session.told_mode is None or session.told_mode == session.mode:
        return None
    session.told_mode = session.mode
    rules = MODE_RULES.get(session.mode, session.mode)
    return REMINDER.format(f"The permission mode is now {session.mode}: {rules}.")


# ---------------------------------------------------------------------- the environment


def _gather(cwd: str, roots: Sequence[str], env: Mapping[str, str]) -> Facts:
    """The environment's facts (a worker thread). Git runs with nothing the repository
    configured (``gitstate``) and ``env``: the environment commands get."""
    root = repo_root(cwd)
    files, refused = _instruction_files(cwd, root, roots, env)
    return Facts(
        shell=f"commands run as `{choose(env).path} -c <command>`",
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
            found.append((path, bounded(got)))

    user_dir = config_dir(env)
    user = os.path.join(user_dir, "AGENTS.md")
    if os.path.lexists(user):
        read(user, [user_dir])
    project, skipped = chain(cwd, root, roots)  # the repository root down to cwd
    found += project
    refused += skipped
    local = os.path.join(root or cwd, ".acp-agent", "instructions.md")
    if os.path.lexists(local):
        read(local, roots)
    return found, refused
