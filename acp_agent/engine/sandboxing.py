"""The command sandbox as the agent configures it (``[sandbox]``, ``--sandbox``, the
``sandbox`` session option); the mechanism is ``tools.sandbox``.

Whether bubblewrap works here is found once per process (``engine.probe``), the probe
started at the agent's start; waited for there when the configuration needs a sandbox
(``default-mode = "auto"``, a named backend, an ``approved`` level), so that a missing
one is a one-line error at start, never a silent downgrade; else by the first session
request (its modes say whether ``auto`` is offered). The agent imports this module past
``initialize`` (``handlers.services``). Without a working backend, ``auto`` and the
``sandbox`` option are not offered, a plan-mode command runs unfenced once the user
allows it as one that changes nothing, and, when the configuration asked for a sandbox,
the user is told once why.

Which level a command runs at is the permission policy's (``permissions.command_level``);
what the sandbox fences is the same for every route: the session's roots writable
(``workspace-write``) with their ``.git`` read-only, ``[sandbox] writable`` too, the
agent's state directory, its stored credentials and ``[sandbox] hide`` hidden, the
network off unless ``[sandbox] network``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..config import Config, ConfigError, SandboxSettings, default_state_dir, sandbox_needs
from ..providers.credentials import directory
from ..tools.sandbox import Bubblewrap, Level, Policy, Sandbox, remove_private_temp
from .probe import Found, answered, detected, known


def start_check(config: Config) -> None:
    """At start: raise ``ConfigError`` (one line: what is wrong, what to install) when
    the configuration needs a sandbox (``config.sandbox_needs``) that does not work here."""
    needed = sandbox_needs(config)
    if needed and detected().program is None:
        raise ConfigError(f"{'; '.join(needed)}, but no sandbox works here: {detected().why_not}")


def explicit(settings: SandboxSettings) -> bool:
    """Whether the configuration (or ``--sandbox``) asked for anything of the sandbox."""
    return settings != SandboxSettings()


class Sandboxing:
    """The process's sandbox: the backend (once found) and the fixed part of the policy."""

    def __init__(self, config: Config) -> None:
        self.settings = config.sandbox
        self.state_dir = config.state_dir or default_state_dir()
        self.found: Found | None = known()
        """Bubblewrap's program, or why none works; ``None`` until :meth:`ready`."""
        self.told = False
        """The user was told why commands are not sandboxed (once per process)."""

    @property
    def available(self) -> bool:
        """A backend works (``False`` until found)."""
        return self.found is not None and self.found.program is not None

    async def ready(self) -> Found:
        """The backend, once found (the probe started if it is not under way, and waited
        for: ``engine.probe.answered``)."""
        if self.found is None:
            self.found = await answered()
        return self.found

    def close(self) -> None:
        """At exit: the private temporary directory's mount point goes."""
        if self.available:
            remove_private_temp()

    def why_not(self) -> str | None:
        """Why commands cannot be sandboxed (``None``: they can, or it is not known yet)."""
        found = self.found
        return found.why_not if found is not None and found.program is None else None

    def hidden(self) -> tuple[str, ...]:
        """Hidden from sandboxed commands: the state directory, the stored credentials,
        ``[sandbox] hide``."""
        places = [self.state_dir, directory() or "", *self.settings.hide]
        return tuple(os.path.abspath(os.path.expanduser(p)) for p in places if p)

    def sandbox(self, level: Level, roots: Sequence[str]) -> Sandbox:
        """The fence of a command run at ``level`` in a session with these ``roots``."""
        program = self.found.program if self.found is not None else None
        writable = self.settings.writable
        policy = Policy(
            level=level,
            roots=tuple(os.path.realpath(r) for r in roots),
            writable=tuple(os.path.realpath(os.path.expanduser(p)) for p in writable),
            hidden=self.hidden(),
            network=self.settings.network,
            git_writable=self.settings.git_writable,
        )
        return Sandbox(policy, Bubblewrap(program) if program is not None else None)
