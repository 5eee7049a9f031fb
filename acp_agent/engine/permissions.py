"""Session modes and the permission policy.

=============  ===========================  =========================  ==========
mode           reads                        edits                      commands
=============  ===========================  =========================  ==========
ask            run (inside roots)           ask                        ask
accept-edits   run (inside roots)           run inside roots, else ask ask
plan           run (inside roots)           refused                    refused
bypass         run                          run                        run
=============  ===========================  =========================  ==========

Reads outside the session's roots ask in every mode but ``bypass``.

"Always" answers are remembered per project (:class:`Rules`), and each covers exactly
what its option's name says (:class:`Scope`), nothing wider:

* a command: that program with exactly those arguments (as ``shlex`` splits them), run
  in that directory; a command line with shell syntax (``;``, ``&&``, pipes,
  substitutions, redirections) only as that exact line. Nothing is generalised: not to
  other arguments, and never through wrappers (``env``, ``sh -c``, ``sudo``, ``xargs``,
  ``timeout``, ``nice``, ``nohup``, ``command``, ``exec``, ``eval``...);
* file edits inside the session's roots: the directory of the file(s) and below;
* a tool without paths (an MCP tool): that tool.

A call touching a path outside the roots is never offered "always" and never matched by
a remembered answer: it asks every time (``bypass`` excepted).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Literal, TypeAlias

import msgspec

from ..protocol import types as t

if TYPE_CHECKING:
    from ..tools.base import Access, CallInfo

Decision: TypeAlias = Literal["allow", "ask", "deny"]

MODES: list[tuple[str, str, str]] = [
    ("ask", "Ask", "Reads run freely; edits and commands ask for permission."),
    ("accept-edits", "Accept edits", "Edits inside the workspace run; commands ask."),
    ("plan", "Plan", "Read-only: the agent explores and plans; edits and commands are refused."),
    ("bypass", "Bypass permissions", "Nothing asks for permission."),
]
MODE_IDS = [m[0] for m in MODES]

ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"
REJECT_ALWAYS = "reject_always"


#: Tool kinds plan mode offers the model (``think``: the plans); subagents too, since
#: they follow their parent's mode.
PLAN_KINDS = frozenset({"read", "search", "think", "fetch"})


def offered(mode: str, kind: str, name: str) -> bool:
    """Whether a tool is offered to the model in ``mode`` (plan mode: only reading)."""
    return mode != "plan" or kind in PLAN_KINDS or name == "spawn_agent"


def decide(mode: str, access: Access, inside: bool) -> Decision:
    if access == "none" or mode == "bypass":
        return "allow"
    if access == "read":
        return "allow" if inside else "ask"
    if mode == "plan":
        return "deny"
    if access == "write" and mode == "accept-edits" and inside:
        return "allow"
    return "ask"


_SHELL_SYNTAX = frozenset(";&|$`()<>\n\\*?[]{}~#")


class Scope(msgspec.Struct, frozen=True):
    """What an "always" answer to one call covers."""

    kind: Literal["files", "command", "tool"]
    target: str
    """files: ``"<access>:<real directory>"``; command: ``"<cwd>\0<command>"``; tool: its name."""
    label: str
    """How the option names it: ``edits in src/``, ```npm test```, ```mcp__x__y```."""

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.target}"

    def covers(self, key: str) -> bool:
        """Whether the remembered ``key`` applies to a call of this scope."""
        if key == self.key:
            return True
        if self.kind != "files" or not key.startswith("files:"):
            return False
        access, _, directory = key[len("files:") :].partition(":")
        mine, _, here = self.target.partition(":")
        return access == mine and here.startswith(directory.rstrip(os.sep) + os.sep)


def scope_of(
    tool: str, info: CallInfo, real_paths: list[str], cwd: str, display: Callable[[str], str]
) -> Scope | None:
    """The scope of a call whose paths are all inside the roots (``None``: nothing an
    "always" answer could safely cover)."""
    if info.command is not None:
        command = info.command.strip()
        where = real_paths[0] if real_paths else cwd
        text = command
        if not any(ch in _SHELL_SYNTAX for ch in command):
            try:
                text = shlex.join(shlex.split(command))
            except ValueError:
                text = command
        label = f"`{text}`" + ("" if where == os.path.realpath(cwd) else f" in {display(where)}")
        return Scope("command", f"{where}\0{text}", label)
    if real_paths:
        if info.access not in ("read", "write"):
            return None
        directory = os.path.commonpath([os.path.dirname(p) for p in real_paths])
        shown = display(directory)
        shown = "the workspace" if shown == "." else f"{shown}/"
        verb = "edits" if info.access == "write" else "reads"
        return Scope("files", f"{info.access}:{directory}", f"{verb} in {shown}")
    return Scope("tool", tool, f"`{tool}`")


def permission_options(scope: Scope | None) -> list[t.PermissionOption]:
    """The options offered; the "always" ones name exactly what they cover, and are not
    offered at all without a scope."""
    once = t.PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once")
    reject = t.PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once")
    if scope is None:
        return [once, reject]
    return [
        once,
        t.PermissionOption(
            option_id=ALLOW_ALWAYS, name=f"Always allow {scope.label}", kind="allow_always"
        ),
        reject,
        t.PermissionOption(
            option_id=REJECT_ALWAYS, name=f"Always reject {scope.label}", kind="reject_always"
        ),
    ]


class Rules:
    """Remembered "always" answers of one project, by :class:`Scope` key.

    With a ``path`` they persist in a small JSON file in the state directory (0600 in a
    0700 directory): each change is merged into the file under an exclusive lock, so
    agent processes sharing a project never lose each other's answers. Build them with
    :meth:`for_project` in a worker thread (it reads the file); ``save_with`` runs the
    merge on the store's disk writer, so the event loop never touches the disk.
    """

    def __init__(
        self, path: str | None = None, save_with: Callable[[Callable[[], None]], None] | None = None
    ) -> None:
        self.path = path
        self.allowed: set[str] = set()
        self.rejected: set[str] = set()
        self._save_with = save_with
        if path is not None:
            data = _read(path)
            self.allowed, self.rejected = set(data.allow), set(data.reject)

    @classmethod
    def for_project(
        cls, state_dir: str, cwd: str, save_with: Callable[[Callable[[], None]], None] | None = None
    ) -> Rules:
        import hashlib

        name = hashlib.sha256(os.path.realpath(cwd).encode()).hexdigest()[:32]
        return cls(os.path.join(state_dir, "permissions", f"{name}.json"), save_with)

    def lookup(self, scope: Scope) -> Decision | None:
        if any(scope.covers(key) for key in self.rejected):
            return "deny"
        if any(scope.covers(key) for key in self.allowed):
            return "allow"
        return None

    def remember(self, scope: Scope, option_id: str) -> None:
        key = scope.key
        if option_id == ALLOW_ALWAYS:
            self.allowed.add(key)
            self.rejected.discard(key)
        elif option_id == REJECT_ALWAYS:
            self.rejected.add(key)
            self.allowed.discard(key)
        else:
            return
        if self.path is None:
            return
        path, allow = self.path, option_id == ALLOW_ALWAYS

        def save() -> None:
            _merge(path, key, allow)

        if self._save_with is not None:
            self._save_with(save)
        else:
            save()


class _RulesFile(msgspec.Struct):
    version: int = 2
    allow: list[str] = []
    reject: list[str] = []


def _read(path: str) -> _RulesFile:
    """The file's rules; none when missing, unreadable, or of the old format (whose
    answers covered whole tools: they are dropped rather than trusted)."""
    try:
        with open(path, "rb") as fh:
            data = msgspec.json.decode(fh.read(), type=_RulesFile)
    except (OSError, msgspec.DecodeError):
        return _RulesFile()
    return data if data.version == 2 else _RulesFile()


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    import fcntl

    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _merge(path: str, key: str, allow: bool) -> None:
    """Add one answer to the file under the project's lock (read, merge, replace)."""
    from .. import log

    try:
        with _locked(path):
            data = _read(path)
            allowed, rejected = set(data.allow), set(data.reject)
            (allowed if allow else rejected).add(key)
            (rejected if allow else allowed).discard(key)
            tmp = f"{path}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(msgspec.json.encode(_RulesFile(2, sorted(allowed), sorted(rejected))))
            os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot save a permission answer; it holds for this process", error=str(exc))
