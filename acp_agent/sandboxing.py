"""The command sandbox as the agent configures it (``[sandbox]``, ``--sandbox``, the
``sandbox`` session option); the mechanism is ``tools.sandbox``.

The backend is found once per process, by running it (``tools.sandbox.detect``): at
start when the configuration needs one (``default-mode = "auto"``, a named backend, an
``approved`` level), so that a missing one is a one-line error there, never a silent
downgrade; else in a worker thread after ``initialize``, which the first session
request waits for (its modes say whether ``auto`` is offered). Without a working
backend, ``auto`` and the ``sandbox`` option are not offered, plan mode runs no command,
and, when the configuration asked for a sandboxed level, the user is told once why.

Which level a command runs at is the permission policy's (``permissions.command_level``);
what the sandbox fences is the same for every route: the session's roots writable
(``workspace-write``) with their ``.git`` read-only, ``[sandbox] writable`` too, the
agent's state directory, its stored credentials and ``[sandbox] hide`` hidden, the
network off unless ``[sandbox] network``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .config import Config, ConfigError, SandboxSettings, default_state_dir

if TYPE_CHECKING:  # the tools load after the first session opens, not with the runtime
    from .tools.sandbox import Detected, Level, Sandbox

_detected: dict[str, Detected] = {}
_lock = threading.Lock()


def detected(choice: str) -> Detected:
    """The backend ``choice`` gives here (found once per process; runs a program)."""
    from .tools.sandbox import detect

    with _lock:
        found = _detected.get(choice)
        if found is None:
            found = _detected[choice] = detect(choice)
        return found


def start_check(config: Config) -> None:
    """At start: raise ``ConfigError`` (one line: what is wrong, what to install) when
    the configuration needs a sandbox that does not work here."""
    settings = config.sandbox
    needed = []
    if config.default_mode == "auto":
        needed.append("`--mode auto` (default-mode) runs commands in a sandbox")
    if settings.backend != "auto":
        needed.append(f"`sandbox.backend` is {settings.backend!r}")
    if settings.approved != "off":
        needed.append(f"`sandbox.approved` is {settings.approved!r}")
    if needed and detected(settings.backend).backend is None:
        why = detected(settings.backend).why_not
        raise ConfigError(f"{'; '.join(needed)}, but no sandbox works here: {why}")


def explicit(settings: SandboxSettings) -> bool:
    """Whether the configuration (or ``--sandbox``) asked for anything of the sandbox."""
    return settings != SandboxSettings()


class Sandboxing:
    """The process's sandbox: its backend (once found) and the fixed part of the policy."""

    def __init__(self, config: Config) -> None:
        self.settings = config.sandbox
        self.state_dir = config.state_dir or default_state_dir()
        self._found: asyncio.Future[Detected] | None = None
        self.told = False
        """The user was told why commands are not sandboxed (once per process)."""

    @property
    def found(self) -> Detected | None:
        """The backend found, or why none works; ``None`` until :meth:`ready`."""
        return self._found.result() if self._found is not None and self._found.done() else None

    @property
    def available(self) -> bool:
        """A backend works (``False`` until found)."""
        found = self.found
        return found is not None and found.backend is not None

    def start(self) -> asyncio.Future[Detected]:
        """Start finding the backend (once, in a worker thread)."""
        if self._found is None:
            choice = self.settings.backend
            self._found = asyncio.ensure_future(asyncio.to_thread(detected, choice))
        return self._found

    async def ready(self) -> Detected:
        """The backend, once found."""
        return await asyncio.shield(self.start())

    def close(self) -> None:
        """At exit: the private temporary directory's mount point goes."""
        if self.available:
            from .tools.sandbox import remove_private_temp

            remove_private_temp()

    def why_not(self) -> str | None:
        """Why commands cannot be sandboxed (``None``: they can, or it is not known yet)."""
        found = self.found
        return found.why_not if found is not None and found.backend is None else None

    def hidden(self) -> tuple[str, ...]:
        """Hidden from sandboxed commands: the state directory, the stored credentials,
        ``[sandbox] hide``."""
        from .providers.credentials import directory

        places = [self.state_dir, directory() or "", *self.settings.hide]
        return tuple(os.path.abspath(os.path.expanduser(p)) for p in places if p)

    def sandbox(self, level: Level, roots: Sequence[str]) -> Sandbox:
        """The fence of a command run at ``level`` in a session with these ``roots``."""
        from .tools.sandbox import Policy, Sandbox

        found = self.found
        policy = Policy(
            level=level,
            roots=tuple(os.path.realpath(r) for r in roots),
            writable=tuple(os.path.realpath(os.path.expanduser(p)) for p in self.settings.writable),
            hidden=self.hidden(),
            network=self.settings.network,
            git_writable=self.settings.git_writable,
        )
        return Sandbox(policy, found.backend if found is not None else None)
