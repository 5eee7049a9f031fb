"""The command sandbox as the agent configures it (``[sandbox]``, ``--sandbox``, the
``sandbox`` session option); the mechanism is ``tools.sandbox``.

Whether bubblewrap works here is found once per process, by running it
(:data:`PROBE`: the namespaces and mounts every sandboxed command gets): at start when
the configuration needs it (``default-mode = "auto"``, a named backend, an ``approved``
level), so that a missing one is a one-line error there, never a silent downgrade;
else the probe starts once the ``initialize`` reply is out (a process of its own,
beside the warm-up's imports), and the first session request waits for its answer (its
modes say whether ``auto`` is offered). The agent imports this module past
``initialize`` (``handlers.services``); the warm-up thread starts the probe. Without
a working backend, ``auto`` and the ``sandbox`` option are not offered, a plan-mode
command runs unfenced once the user allows it as one that changes nothing, and, when the
configuration asked for a sandbox, the user is told once why.

Which level a command runs at is the permission policy's (``permissions.command_level``);
what the sandbox fences is the same for every route: the session's roots writable
(``workspace-write``) with their ``.git`` read-only, ``[sandbox] writable`` too, the
agent's state directory, its stored credentials and ``[sandbox] hide`` hidden, the
network off unless ``[sandbox] network``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import Config, ConfigError, SandboxSettings, default_state_dir, sandbox_needs
from ..providers.credentials import directory
from ..tools.sandbox import Bubblewrap, Level, Policy, Sandbox, remove_private_temp

#: The probe: bubblewrap creating the namespaces and mounts of every sandboxed command.
PROBE = ("--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
         "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "/bin/true")  # fmt: skip
#: Seconds the probe may take.
PROBE_TIMEOUT = 10.0
MISSING = "bubblewrap is not installed (install the `bubblewrap` package: it provides `bwrap`)"


@dataclass(frozen=True, slots=True)
class Found:
    """Bubblewrap's program when it works here, else why not (in words for the user)."""

    program: str | None
    why_not: str = ""


def _bwrap() -> str | None:
    """``bwrap`` on the absolute entries of ``PATH``."""
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(entry, "bwrap")
        if os.path.isabs(entry) and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _spawn() -> tuple[str, subprocess.Popen[bytes]] | Found:
    """The probe, started (it runs beside whatever comes next), or why it cannot be."""
    program = _bwrap()
    if program is None:
        return Found(None, MISSING)
    try:
        proc = subprocess.Popen([program, *PROBE], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    except OSError as exc:
        return Found(None, f"{program} cannot be run ({exc.strerror or exc})")
    return program, proc


def _judge(program: str, proc: subprocess.Popen[bytes]) -> Found:
    """The probe's answer (waits for it)."""
    try:
        _, err = proc.communicate(timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return Found(None, f"bubblewrap did not answer within {PROBE_TIMEOUT:g} s")
    if proc.returncode != 0:
        said = err.decode(errors="replace").strip().splitlines()
        return Found(None, f"bubblewrap does not work here ({(said or ['?'])[-1]})")
    return Found(program)


def probe() -> Found:
    """Whether bubblewrap works here, found now (runs it, and waits)."""
    started = _spawn()
    return started if isinstance(started, Found) else _judge(*started)


_found: Found | None = None
_pending: tuple[str, subprocess.Popen[bytes]] | None = None
_lock = threading.Lock()
_judging = threading.Lock()


def start_probe() -> None:
    """Start the process's probe now, once, from any thread (a process of its own that
    runs beside what comes next: the warm-up starts it before its imports)."""
    global _found, _pending
    with _lock:
        if _found is None and _pending is None:
            started = _spawn()
            if isinstance(started, Found):
                _found = started
            else:
                _pending = started


def detected() -> Found:
    """Whether bubblewrap works here, found once per process (waits for the probe)."""
    global _found, _pending
    start_probe()
    with _judging:
        if _found is None:
            assert _pending is not None
            _found, _pending = _judge(*_pending), None
        return _found


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
        self.found: Found | None = _found
        """Bubblewrap's program, or why none works; ``None`` until :meth:`ready`."""
        self._probe: asyncio.Future[Found] | None = None
        self.told = False
        """The user was told why commands are not sandboxed (once per process)."""

    @property
    def available(self) -> bool:
        """A backend works (``False`` until found)."""
        return self.found is not None and self.found.program is not None

    async def ready(self) -> Found:
        """The backend, once found (the probe started if it is not under way, and waited
        for in a worker thread: :func:`detected`)."""
        if self.found is None:
            if self._probe is None:
                self._probe = asyncio.ensure_future(asyncio.to_thread(detected))
            self.found = await asyncio.shield(self._probe)
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
