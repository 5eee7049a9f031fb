"""Commands in a kernel sandbox: the policy, the backends, and :meth:`Sandbox.wrap`, the one
function every route that starts a command uses (the local ``run_command``, the
editor's terminal, subagents' commands alike: the editor's ``terminal/create`` is handed
the wrapped command line, so its terminal applies the same fence).

Levels: ``read-only`` (reads anywhere, writes only a private
temporary directory, no network), ``workspace-write`` (also the session's roots and
the configured ``writable`` paths; the ``.git`` of each root, and of every repository
found inside the roots, stays read-only unless configured), ``off`` (nothing: the
command runs as the user). Hidden paths (the agent's state directory, stored
credentials, the configured ``hide``) appear empty. The network is off at both
sandboxed levels unless the policy allows it.

Backend: **bubblewrap** (``bwrap``, Linux): the command runs in new mount, PID, network,
IPC and UTS namespaces (``--unshare-all``), with every capability dropped, in a session
of its own (``--new-session``: it cannot push keystrokes into a terminal), and dies
with its parent (``--die-with-parent``): killing ``bwrap`` (the process group the agent
starts, or the terminal the editor kills) kills everything inside, and so does the
agent's death. The file system is the host's, mounted read-only, with the writable
places bound read-write over it, then the protected and hidden ones over those, and a
fresh in-memory ``tmpfs`` as the private temporary directory (``TMPDIR``). Whether it
works is found by running it once (``sandboxing``: user namespaces may be disabled).
Other backends (Landlock, macOS ``sandbox-exec``) would implement :class:`Backend`;
none is implemented.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias

from .. import log

Level: TypeAlias = Literal["read-only", "workspace-write", "off"]


@dataclass(frozen=True, slots=True)
class Policy:
    """What a sandboxed command may do."""

    level: Level
    roots: tuple[str, ...] = ()
    """Writable at ``workspace-write`` (the session's roots)."""
    writable: tuple[str, ...] = ()
    """Also writable at ``workspace-write`` (the configuration's ``writable``)."""
    hidden: tuple[str, ...] = ()
    """Shown empty at both sandboxed levels (state, credentials, ``hide``)."""
    network: bool = False
    git_writable: bool = False
    """The ``.git`` of each root writable too (at ``workspace-write``)."""

    def words(self) -> str:
        """What it allows, in words (for the model and the user)."""
        if self.level == "off":
            return "not sandboxed"
        writes = "its temporary directory ($TMPDIR)"
        if self.level == "workspace-write":
            git = "" if self.git_writable else " (not .git)"
            writes = f"the workspace{git} and {writes}"
        net = "the network" if self.network else "no network"
        return f"{self.level}: it may write only {writes}, with {net}"

    def protected(self) -> list[str]:
        """What stays read-only inside the writable places: each root's ``.git``, and
        that of every repository found inside the roots (:func:`nested_git`)."""
        if self.level != "workspace-write" or self.git_writable:
            return []
        own = [g for r in self.roots if os.path.lexists(g := os.path.join(r, ".git"))]
        return own + [g for r in self.roots for g in nested_git(r) if os.path.lexists(g)]


#: Directories a search for nested repositories visits at most, per root.
NESTED_GIT_WALK = 100_000
_nested: dict[str, tuple[str, ...]] = {}
_nested_lock = threading.Lock()


def nested_git(root: str) -> tuple[str, ...]:
    """The ``.git`` (a directory, or a worktree's or submodule's file) of every repository
    below ``root``, not its own: found once per root and process, by a walk that follows
    no links and visits at most :data:`NESTED_GIT_WALK` directories (a repository a
    command creates later is that command's own)."""
    with _nested_lock:
        found = _nested.get(root)
        if found is None:
            found = _nested[root] = tuple(_walk_for_git(root))
        return found


def _walk_for_git(root: str) -> list[str]:
    out: list[str] = []
    stack, visited = [root], 0
    while stack:
        directory = stack.pop()
        visited += 1
        if visited > NESTED_GIT_WALK:
            log.warning("nested repositories searched in part only", root=root,
                        directories=NESTED_GIT_WALK)  # fmt: skip
            break
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name == ".git":
                        if directory != root:
                            out.append(entry.path)
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return out


class Backend(Protocol):
    """A way to fence a command: ``argv`` is the command line that runs ``command``
    (an argv) under ``policy`` in ``cwd``."""

    name: str

    def argv(self, command: Sequence[str], policy: Policy, cwd: str) -> list[str]: ...


class Bubblewrap:
    """The bubblewrap backend (see the module's docstring)."""

    name = "bubblewrap"

    def __init__(self, program: str) -> None:
        self.program = program

    def argv(self, command: Sequence[str], policy: Policy, cwd: str) -> list[str]:
        out = [self.program, "--die-with-parent", "--new-session", "--unshare-all"]
        if policy.network:
            out.append("--share-net")
        out += ["--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        if policy.level == "workspace-write":
            for place in (*policy.roots, *policy.writable):
                out += ["--bind", place, place]
        for place in policy.protected():
            out += ["--ro-bind", place, place]
        for place in policy.hidden:
            if os.path.isdir(place):
                out += ["--tmpfs", place, "--remount-ro", place]
            elif os.path.lexists(place):
                out += ["--ro-bind", "/dev/null", place]
        temp = private_temp()
        out += ["--tmpfs", temp, "--setenv", "TMPDIR", temp, "--chdir", cwd, "--", *command]
        return out


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A command's fence: a policy and the backend that applies it (none at ``off``)."""

    policy: Policy
    backend: Backend | None = None

    @property
    def level(self) -> Level:
        return self.policy.level if self.backend is not None else "off"

    def wrap(self, command: Sequence[str], cwd: str) -> list[str]:
        """The command line that runs ``command`` (an argv) in ``cwd`` under this
        sandbox; ``command`` itself at ``off``. Every route uses this one."""
        if self.backend is None or self.policy.level == "off":
            return list(command)
        return self.backend.argv(command, self.policy, cwd)


_temp: str | None = None
_temp_lock = threading.Lock()


def private_temp() -> str:
    """The mount point of each sandboxed command's private temporary directory: an
    empty directory of this process (``tmpfs`` is mounted over it inside the sandbox, so
    nothing is ever written to it on the host)."""
    global _temp
    with _temp_lock:
        if _temp is None or not os.path.isdir(_temp):
            _temp = tempfile.mkdtemp(prefix="acp-agent-sandbox-")
        return _temp


def remove_private_temp() -> None:
    """Remove the (empty) mount point, at exit."""
    global _temp
    with _temp_lock:
        if _temp is not None:
            with contextlib.suppress(OSError):
                os.rmdir(_temp)
            _temp = None
