"""Session modes and the permission policy.

=============  ===================  ==========================  ==============================
mode           reads                edits                       commands (``run_command``)
=============  ===================  ==========================  ==============================
ask            run (inside roots)   ask                         ask; run at ``approved``
accept-edits   run (inside roots)   run inside roots, else ask  ask; run at ``approved``
auto           run (inside roots)   run inside roots, else ask  run sandboxed at the session's
                                                                ``sandbox`` level, unasked
plan           run (inside roots)   refused                     ask, every time, as a
                                                                read-only command; run
                                                                ``read-only`` when sandboxed
bypass         run                  run                         run (``off``)
=============  ===================  ==========================  ==============================

Reads outside the session's roots ask in every mode but ``bypass``. Every mode offers the
model the same tools (a stable prefix caches; :func:`decide` refuses at the call): plan
mode refuses edits and every other tool that may change something (an MCP tool not
marked read-only), and asks before each command, the question saying that only a
command that changes nothing should be allowed (no "always" there); with a sandbox the
command runs ``read-only``, so the fence holds whatever was approved. ``approved`` is
``[sandbox] approved`` (default ``off``). Without a working sandbox ``auto`` is not
offered. A command the model asks to run outside the sandbox (``run_command``'s
``outside_sandbox``) always asks (plan: refused), and runs ``off``; so does one whose
level is ``off`` in ``auto`` (nothing runs unsandboxed unasked).

"Always" answers are remembered per project (:class:`Rules`), and each covers exactly
what its option's name says (:class:`Scope`), nothing wider:

* a command: that program with exactly those arguments (as ``shlex`` splits them), run
  in that directory (and, when it runs sandboxed, at that sandbox level only); a command
  line with shell syntax (``;``, ``&&``, pipes, substitutions, redirections) only as that
  exact line. Nothing is generalised: not to
  other arguments, and never through wrappers (``env``, ``sh -c``, ``sudo``, ``xargs``,
  ``timeout``, ``nice``, ``nohup``, ``command``, ``exec``, ``eval``...);
* file edits inside the session's roots: the directory of the file(s) and below;
* a web fetch: that host (its scheme, port and path aside);
* a tool without paths (an MCP tool): that tool.

A call touching a path outside the roots is never offered "always" and never matched by
a remembered answer: it asks every time (``bypass`` excepted).

Remembered answers can be seen and taken back (``acp-agent permissions``, ``/permissions``):
each project's file names its project, :func:`rule_label` says a rule in the words its
option used, :func:`forget_rules` removes rules under the project's lock. An agent that
has the rules loaded reads the file again (:meth:`Rules.refresh`) before a remembered
answer decides a call, so what was forgotten elsewhere no longer counts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shlex
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Literal, TypeAlias

import msgspec

from .. import log
from ..escaping import escaped
from ..protocol import types as t

if TYPE_CHECKING:
    from ..tools.base import Access, CallInfo
    from ..tools.sandbox import Level

Decision: TypeAlias = Literal["allow", "ask", "deny"]


ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"
REJECT_ALWAYS = "reject_always"


def command_level(mode: str, session_level: Level, approved: Level) -> Level:
    """The sandbox level a command runs at in ``mode`` (``session_level``: the session's
    ``sandbox`` option, ``auto``'s; ``approved``: ``[sandbox] approved``)."""
    if mode == "auto":
        return session_level
    if mode == "plan":
        return "read-only"
    return "off" if mode == "bypass" else approved


def decide(
    mode: str,
    access: Access,
    inside: bool,
    kind: str = "other",
    *,
    sandboxed: bool = False,
    leaving: bool = False,
) -> Decision:
    """What the policy says of a call of ``access`` (``kind``: the tool's; plan mode asks
    before a command, ``execute`` kind, and refuses every other change). ``sandboxed``:
    a command that will run in the sandbox; ``leaving``: one the model asks to run
    outside it."""
    if access == "none" or mode == "bypass":
        return "allow"
    if access == "read":
        return "allow" if inside else "ask"
    if mode == "plan":
        return "ask" if access == "execute" and kind == "execute" and not leaving else "deny"
    if leaving:
        return "ask"
    if access == "write" and mode in ("accept-edits", "auto") and inside:
        return "allow"
    if access == "execute" and mode == "auto" and sandboxed and inside:
        return "allow"
    return "ask"


#: How a command is asked for in plan mode (the question's title ends with it).
PLAN_COMMAND = " (plan mode: allow it only if it changes nothing)"


_SHELL_SYNTAX = frozenset(";&|$`()<>\n\\*?[]{}~#")


class Scope(msgspec.Struct, frozen=True):
    """What an "always" answer to one call covers."""

    kind: Literal["files", "command", "tool", "host"]
    target: str
    """files: ``"<access>:<real directory>"``; command: ``"<cwd>\0<command>"`` (then
    ``"\0<level>"`` when it runs sandboxed); tool: its name; host: the host name (lower
    case)."""
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
    """The scope of a call whose paths are all inside the roots, or of a web fetch
    (``None``: nothing an "always" answer could safely cover)."""
    if info.host is not None:
        host = info.host.lower()
        return Scope("host", host, f"fetches from {host}")
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
        if info.sandbox is not None:  # approved fenced: covers it fenced so, never unfenced
            return Scope("command", f"{where}\0{text}\0{info.sandbox}",
                         f"{label} (sandboxed: {info.sandbox})")  # fmt: skip
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
    label = escaped(scope.label)  # a command or a path the model chose: shown escaped
    return [
        once,
        t.PermissionOption(
            option_id=ALLOW_ALWAYS, name=f"Always allow {label}", kind="allow_always"
        ),
        reject,
        t.PermissionOption(
            option_id=REJECT_ALWAYS, name=f"Always reject {label}", kind="reject_always"
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
        self.project = ""
        self.allowed: set[str] = set()
        self.rejected: set[str] = set()
        self._save_with = save_with
        self._unsaved: dict[str, bool] = {}  # remembered here, not yet in the file
        self._seen: tuple[int, int, int] | None = None  # the file as last read
        if path is not None:
            self.refresh()

    def refresh(self) -> None:
        """Read the file again if it changed since it was read (another process, or
        ``acp-agent permissions forget``); answers not yet written stay. Blocking: a
        worker thread's."""
        if self.path is None:
            return
        try:
            st = os.stat(self.path)
            seen: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            seen = None
        if seen == self._seen and seen is not None:
            return
        self._seen = seen
        data = _read(self.path)
        self.allowed, self.rejected = set(data.allow), set(data.reject)
        for key, allow in list(self._unsaved.items()):
            (self.allowed if allow else self.rejected).add(key)
            (self.rejected if allow else self.allowed).discard(key)

    def forget(self, keys: list[str] | None) -> list[str]:
        """Take back the rules ``keys`` (``None``: all) here and in the file; the keys
        forgotten."""
        gone = sorted(self.allowed | self.rejected) if keys is None else keys
        for key in gone:
            self.allowed.discard(key)
            self.rejected.discard(key)
            self._unsaved.pop(key, None)
        if self.path is not None:
            forget_rules(self.path, gone)
        return gone

    @classmethod
    def for_project(
        cls, state_dir: str, cwd: str, save_with: Callable[[Callable[[], None]], None] | None = None
    ) -> Rules:
        rules = cls(rules_path(state_dir, cwd), save_with)
        rules.project = os.path.realpath(cwd)
        return rules

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
        path, allow, project = self.path, option_id == ALLOW_ALWAYS, self.project
        self._unsaved[key] = allow

        def save() -> None:
            _merge(path, key, allow, project)
            if self._unsaved.get(key) is allow:
                del self._unsaved[key]

        if self._save_with is not None:
            self._save_with(save)
        else:
            save()


def rules_path(state_dir: str, cwd: str) -> str:
    """The file of ``cwd``'s project (named by a hash of its real path)."""
    name = hashlib.sha256(os.path.realpath(cwd).encode()).hexdigest()[:32]
    return os.path.join(state_dir, "permissions", f"{name}.json")


class _RulesFile(msgspec.Struct, omit_defaults=True):
    version: int = 2
    allow: list[str] = []
    reject: list[str] = []
    project: str = ""
    """The project's real path (files written before it was kept do not say)."""


class ProjectRules(msgspec.Struct, frozen=True):
    """One project's file as ``acp-agent permissions`` shows it."""

    path: str
    project: str
    allow: list[str]
    reject: list[str]


def read_rules(path: str) -> ProjectRules:
    data = _read(path)
    return ProjectRules(path, data.project, sorted(data.allow), sorted(data.reject))


def all_rules(state_dir: str) -> list[ProjectRules]:
    """Every project's rules in the state directory (files without a rule left out)."""
    directory = os.path.join(state_dir, "permissions")
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    except OSError:
        return []
    found = [read_rules(os.path.join(directory, n)) for n in names]
    return [r for r in found if r.allow or r.reject]


def rule_label(key: str, project: str) -> str:
    """A rule in the words its option used: ``edits in src/``, ```npm test```, ..."""
    kind, _, target = key.partition(":")
    if kind == "files":
        access, _, directory = target.partition(":")
        verb = "edits" if access == "write" else "reads"
        if project and directory == project:
            return f"{verb} in the workspace"
        if project and directory.startswith(project.rstrip(os.sep) + os.sep):
            return f"{verb} in {os.path.relpath(directory, project)}/"
        return f"{verb} in {directory}/"
    if kind == "command":
        where, _, command = target.partition("\0")
        return f"`{command}`" + ("" if where == project else f" in {where}")
    return f"`{target}`"


def numbered(allow: list[str], reject: list[str]) -> list[tuple[int, str, str]]:
    """The rules as listed (``(number, "allow" | "reject", key)``): the allowed first,
    each kind sorted, so a number means the same rule wherever it is listed."""
    rows = [("allow", k) for k in sorted(allow)] + [("reject", k) for k in sorted(reject)]
    return [(n, verdict, key) for n, (verdict, key) in enumerate(rows, 1)]


def chosen(rows: list[tuple[int, str, str]], words: list[str], project: str) -> list[str]:
    """The keys of the rules ``words`` name: numbers, ``all``, or a rule as it is listed
    (``edits in src/``, ```npm test```); raises ``ValueError`` saying what matched none."""
    if [w.lower() for w in words] == ["all"]:
        return [key for _, _, key in rows]
    keys: list[str] = []
    labels = {rule_label(key, project).strip("`"): key for _, _, key in rows}
    text = " ".join(words).strip("`")
    if text in labels:
        return [labels[text]]
    for word in words:
        match = next((key for n, _, key in rows if word == str(n)), None)
        if match is None:
            raise ValueError(f"no rule {word!r} (the list numbers them; `all` forgets every one)")
        keys.append(match)
    return keys


def listing(rows: list[tuple[int, str, str]], project: str) -> list[str]:
    """One line a rule: ``  1  allow   edits in the workspace``."""
    return [f"{n:>3}  {verdict:<6}  {rule_label(key, project)}" for n, verdict, key in rows]


def forget_rules(path: str, keys: list[str]) -> None:
    """Remove rules from a project's file, under its lock (raises ``OSError``)."""
    with _locked(path):
        data = _read(path)
        allowed, rejected = set(data.allow) - set(keys), set(data.reject) - set(keys)
        _write(path, _RulesFile(2, sorted(allowed), sorted(rejected), data.project))


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
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write(path: str, data: _RulesFile) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(msgspec.json.encode(data))
    os.replace(tmp, path)


def _merge(path: str, key: str, allow: bool, project: str = "") -> None:
    """Add one answer to the file under the project's lock (read, merge, replace)."""
    try:
        with _locked(path):
            data = _read(path)
            allowed, rejected = set(data.allow), set(data.reject)
            (allowed if allow else rejected).add(key)
            (rejected if allow else allowed).discard(key)
            _write(path, _RulesFile(2, sorted(allowed), sorted(rejected), project or data.project))
    except OSError as exc:
        log.warning("cannot save a permission answer; it holds for this process", error=str(exc))
