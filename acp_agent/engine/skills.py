"""Agent Skills (the open format of agentskills.io): discovery, validation, the catalogue
the model sees, and the ``skill`` tool that loads one.

A skill is a folder holding a ``SKILL.md``: YAML front matter (``name``, ``description``;
optionally ``license``, ``compatibility``, ``metadata``, ``allowed-tools``) between ``---``
lines, then Markdown instructions; ``scripts/``, ``references/`` and ``assets/`` may sit
beside it. Skills are looked up, nearest first (the first one of a name wins):

1. ``<dir>/.agents/skills/<name>/SKILL.md`` then ``<dir>/.claude/skills/<name>/SKILL.md``
   for every directory from the session's directory up to the repository root (the
   session's directory alone outside a repository);
2. the user's ``$XDG_CONFIG_HOME/acp-agent/skills/<name>/`` (``~/.config/...``), then
   ``~/.agents/skills/<name>/``.

Each ``SKILL.md`` is read through ``projectfiles.read_project_text``: a project's only
inside the session's roots (or, for one found above them, inside the directory it was
found in, between the roots and the repository root), the user's only inside the user's
skills directory; a link leading elsewhere is refused. A file that is refused, or whose
front matter breaks the format's rules (the name's characters and length, the name equal
to its folder's, a description of 1 to 1,024 characters, ...), is skipped and reported
(:attr:`Found.problems`, told to the user by the handlers), never a crash.

The front matter is parsed by PyYAML (``safe_load``; the C loader where built), imported
on first use: 17-40 ms, never on the way to ``initialize``. Parsed front matter is cached
by its text, so discovering again each turn (changes on disk are picked up for the next
turn) costs a few ``stat``/``read`` calls per skill.

The model sees a catalogue (:func:`catalogue`: name, description, location) in the
system prompt, within :data:`CATALOGUE_TOKENS` (the skills past it are named as left out,
and still load by name); it loads one with the ``skill`` tool (:class:`SkillTool`), which
returns the instructions, the folder and the files in it (not read). A dedicated tool,
not ``read_file`` of the ``SKILL.md``: the instructions come back whole (``read_file``
numbers and cuts lines), without a permission question for the user's own skills
(outside the roots, ``read_file`` asks), from the file as checked at discovery, and the
skill's folder and files come with them. Its other files and scripts go through the
ordinary tools and permissions.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from msgspec import Meta

from ..conversation import estimate_tokens
from ..errors import ToolError
from ..sessions.offers import SkillEntry
from ..sessions.session import Session
from ..tools.base import Arguments, BuiltinTool, CallInfo, ToolContext, ToolKind, ToolOutput
from .gitstate import repo_root
from .projectfiles import Refused, config_dir, read_project_text

SKILL_FILE = "SKILL.md"
PROJECT_DIRS = (".agents/skills", ".claude/skills")
MAX_SKILL_BYTES = 128 * 1024
MAX_SKILLS_PER_DIR = 200
"""Folders looked at in one skills directory (a runaway directory costs no more)."""
CATALOGUE_TOKENS = 3_000
"""The catalogue's budget in the system prompt (~50-100 tokens a skill)."""
MAX_LISTED_FILES = 50
"""Files of a skill's folder the ``skill`` tool names."""

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_parsed: dict[str, Any] = {}  # front matter text -> safe_load's value (or an error string)


@dataclass(frozen=True, slots=True)
class Skill:
    """One valid skill (a ``sessions.session.PromptCommand`` too: ``/name args``)."""

    name: str
    description: str
    path: str
    """Its ``SKILL.md``."""
    body: str
    """The instructions: the file after its front matter."""
    scope: str = "project"
    hint: str | None = None
    """``argument-hint`` from the front matter (a field other agents use), if any."""

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path)

    def content(self, listing: Sequence[str] = ()) -> str:
        """The skill as the model receives it: instructions, folder, files."""
        files = "".join(f"  {f}\n" for f in listing)
        return (
            f'<skill name="{self.name}" location="{self.path}">\n{self.body.strip()}\n\n'
            f"Skill folder: {self.directory} (relative paths in these instructions are "
            "relative to it)\n" + (f"Files in it:\n{files}" if files else "") + "</skill>"
        )

    def expand(self, arguments: str) -> str:
        """What ``/name arguments`` sends the model: the skill, then the arguments."""
        text = f"Use the skill `{self.name}` for this request.\n\n{self.content()}"
        return f"{text}\n\n{arguments}" if arguments else text


@dataclass(frozen=True, slots=True)
class Found:
    skills: dict[str, Skill]
    """By name, nearest first."""
    problems: tuple[Refused, ...] = ()
    """Skill files skipped, and why."""


def skill_places(
    cwd: str, roots: Sequence[str], env: Mapping[str, str]
) -> list[tuple[str, list[str], str]]:
    """``(skills directory, allowed places, scope)``, nearest first."""
    here = os.path.abspath(cwd)
    top = repo_root(here) or here
    inside_roots = [os.path.abspath(r) for r in roots]
    out: list[tuple[str, list[str], str]] = []
    while True:
        in_roots = any(_under(here, r) for r in inside_roots)
        allowed = list(roots) if in_roots else [*roots, here]
        for sub in PROJECT_DIRS:
            out.append((os.path.join(here, sub), allowed, "project"))
        parent = os.path.dirname(here)
        if here == top or parent == here:
            break
        here = parent
    user = os.path.join(config_dir(env), "skills")
    home = env.get("HOME") or os.path.expanduser("~")
    shared = os.path.join(home, ".agents", "skills")
    out.append((user, [user], "user"))
    out.append((shared, [shared], "user"))
    return out


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def discover(cwd: str, roots: Sequence[str], env: Mapping[str, str] = os.environ) -> Found:
    """The skills of a session in ``cwd`` with ``roots`` (a worker thread)."""
    skills: dict[str, Skill] = {}
    problems: list[Refused] = []
    for directory, allowed, scope in skill_places(cwd, roots, env):
        try:
            with os.scandir(directory) as entries:
                names = sorted(e.name for e in entries if not e.name.startswith("."))
        except OSError:
            continue
        for folder in names[:MAX_SKILLS_PER_DIR]:
            path = os.path.join(directory, folder, SKILL_FILE)
            if not os.path.lexists(path):
                continue
            got = load(path, allowed, scope)
            if isinstance(got, Refused):
                problems.append(got)
            elif got.name not in skills:
                skills[got.name] = got
    return Found(skills, tuple(problems))


def load(path: str, allowed: Sequence[str], scope: str = "project") -> Skill | Refused:
    """One ``SKILL.md``, read where it may be and checked against the format."""
    got = read_project_text(path, allowed, max_bytes=MAX_SKILL_BYTES)
    if isinstance(got, Refused):
        return got
    if got.cut:
        return Refused(path, f"it is larger than {MAX_SKILL_BYTES // 1024} KiB")
    folder = os.path.basename(os.path.dirname(path))
    checked = parse(got.text, folder)
    if isinstance(checked, str):
        return Refused(path, checked)
    meta, body = checked
    hint = meta.get("argument-hint")
    return Skill(
        name=meta["name"],
        description=" ".join(meta["description"].split()),
        path=path,
        body=body,
        scope=scope,
        hint=hint if isinstance(hint, str) and hint.strip() else None,
    )


def parse(text: str, folder: str) -> tuple[dict[str, Any], str] | str:
    """``(front matter, body)`` of a ``SKILL.md`` in ``folder``, or what is wrong with it."""
    text = text.removeprefix("\ufeff")
    match = _FRONT.match(text)
    if match is None:
        return "it has no front matter (a YAML block between '---' lines at the top)"
    meta = _yaml(match.group(1))
    if isinstance(meta, str):
        return meta
    problem = _check(meta, folder)
    if problem is not None:
        return problem
    return meta, text[match.end() :].strip()


def _yaml(block: str) -> dict[str, Any] | str:
    value = _parsed.get(block)
    if value is None:
        import yaml  # PyYAML: 17-40 ms to import, so only once a skill is found

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            value = yaml.load(block, Loader=loader)  # a safe loader
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            value = f"its front matter is not valid YAML{where}: {problem}"
        if len(_parsed) > 512:
            _parsed.clear()
        _parsed[block] = value
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return "its front matter is not a mapping of fields"
    return value


def _check(meta: dict[str, Any], folder: str) -> str | None:
    """The format's rules (agentskills.io specification), the first broken one."""
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return "its front matter has no `name`"
    if len(name) > 64:
        return f"its name is {len(name)} characters long (at most 64)"
    if not _NAME.match(name):
        return (f"its name `{name}` may hold only lowercase letters, digits and single "
                "hyphens, not at either end")  # fmt: skip
    if name != folder:
        return f"its name `{name}` is not its folder's (`{folder}`)"
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        return "its front matter has no `description`"
    if len(description) > 1024:
        return f"its description is {len(description)} characters long (at most 1,024)"
    compatibility = meta.get("compatibility")
    if compatibility is not None and (
        not isinstance(compatibility, str) or not 1 <= len(compatibility) <= 500
    ):
        return "its `compatibility` must be text of 1 to 500 characters"
    metadata = meta.get("metadata")
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(k, str) for k in metadata)
    ):
        return "its `metadata` must be a mapping from names to values"
    tools = meta.get("allowed-tools")
    texts = isinstance(tools, list) and all(isinstance(x, str) for x in tools)
    if tools is not None and not (isinstance(tools, str) or texts):
        return "its `allowed-tools` must be text or a list of texts"
    if meta.get("license") is not None and not isinstance(meta["license"], str):
        return "its `license` must be text"
    return None


# ---------------------------------------------------------------------- what the model sees

CATALOGUE_INTRO = (
    "# Skills\n\n"
    "Skills are instructions for particular tasks, each in a folder with a SKILL.md. When "
    "a task matches a skill's description, load the skill with the `skill` tool before "
    "you start; then follow it. Read its other files and run its scripts with the "
    "ordinary tools, resolving relative paths against the skill's folder."
)


def catalogue(
    skills: Mapping[str, SkillEntry], budget: int = CATALOGUE_TOKENS
) -> tuple[str, list[str]]:
    """The system prompt's section (empty without skills) and the names left out of it
    (past ``budget`` tokens; they still load by name)."""
    if not skills:
        return "", []
    lines: list[str] = []
    dropped: list[str] = []
    used = _tokens(CATALOGUE_INTRO) + 60  # the note on what was left out
    for skill in skills.values():
        line = entry(skill)
        cost = _tokens(line)
        if dropped or used + cost > budget:
            dropped.append(skill.name)
            continue
        used += cost
        lines.append(line)
    text = CATALOGUE_INTRO + "\n\n" + "\n".join(lines)
    if dropped:
        names = ", ".join(dropped[:40]) + (", ..." if len(dropped) > 40 else "")
        text += (f"\n\n[{len(dropped)} more skill(s) are not listed (the list is limited to "
                 f"{budget:,} tokens): {names}. They load by name all the same.]")  # fmt: skip
    return text, dropped


def entry(skill: SkillEntry) -> str:
    return f"- {skill.name}: {skill.description} ({skill.path})"


def _tokens(text: str) -> int:
    return estimate_tokens([], text)


def changes(told: Mapping[str, str], now: Mapping[str, SkillEntry]) -> str | None:
    """A note for the model on what changed since it was told ``told`` (name -> its
    catalogue entry), or ``None``."""
    added = [entry(s) for name, s in now.items() if name not in told]
    changed = [entry(s) for name, s in now.items() if name in told and told[name] != entry(s)]
    removed = [name for name in told if name not in now]
    if not (added or changed or removed):
        return None
    parts = ["[The skills changed since the list in your instructions:"]
    if added:
        parts.append("added:\n" + "\n".join(added))
    if changed:
        parts.append("changed:\n" + "\n".join(changed))
    if removed:
        parts.append("removed: " + ", ".join(removed))
    return "\n".join(parts) + "]"


def entries(skills: Mapping[str, SkillEntry]) -> dict[str, str]:
    """What the model is told of each skill (to compare with later)."""
    return {name: entry(skill) for name, skill in skills.items()}


def skills_note(session: Session) -> str | None:
    """A note for the model when the session's skills changed since it was last told
    (``None`` when it knows, or was never told: its system prompt is not built yet);
    marks it told. The system prompt is not rebuilt: its cached prefix stays valid."""
    told = session.skills_told
    if told is None:
        return None
    note = changes(told, session.skills)
    if note is not None:
        session.skills_told = entries(session.skills)
    return note


# ---------------------------------------------------------------------- the tool


class SkillArgs(Arguments):
    name: Annotated[str, Meta(min_length=1, description="The skill's name, from the list.")]


class SkillTool(BuiltinTool[SkillArgs]):
    """``skill``: load a skill's instructions (the skills found now, in the session's
    directory and the user's)."""

    name = "skill"
    kind: ToolKind = "read"
    arguments = SkillArgs
    description = (
        "Load a skill by name (see Skills in your instructions): returns its instructions, "
        "its folder and the files in it. Load a skill before a task it describes."
    )

    def describe(self, args: SkillArgs, ctx: ToolContext) -> CallInfo:
        return CallInfo(f"Skill: {args.name.strip()}")

    async def run(self, args: SkillArgs, ctx: ToolContext) -> ToolOutput:
        env = ctx.env if ctx.env is not None else os.environ
        found = await asyncio.to_thread(discover, ctx.cwd, ctx.roots, env)
        name = args.name.strip().lstrip("/")
        skill = found.skills.get(name)
        if skill is None:
            known = ", ".join(found.skills) or "none"
            raise ToolError(f"no skill named {name!r}; the skills: {known}")
        listing = await asyncio.to_thread(_listing, skill.directory)
        return ToolOutput(
            text=skill.content(listing),
            raw_output={"name": skill.name, "path": skill.path, "files": listing},
        )


def _listing(directory: str) -> list[str]:
    """The files of a skill's folder besides ``SKILL.md`` (relative, at most
    :data:`MAX_LISTED_FILES`; links are not followed)."""
    out: list[str] = []
    for here, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(here, name), directory)
            if rel != SKILL_FILE:
                out.append(rel)
            if len(out) >= MAX_LISTED_FILES:
                return [*out, "..."]
    return out
