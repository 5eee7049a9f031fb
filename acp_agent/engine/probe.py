"""Whether bubblewrap works here: found once per process, by running it (:data:`PROBE`:
the namespaces and mounts every sandboxed command gets).

A module of its own, light (no tool, no policy), because the agent starts the probe at
its very start (``cli.main``, before the ``initialize`` reply): bubblewrap runs in a
process of its own beside the agent's start-up, and its answer is usually there by the
first ``session/new``, whose modes say whether ``auto`` is offered. ``engine.sandboxing``
is the sandbox as configured; ``acp-agent doctor`` runs :func:`probe` directly.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading

import msgspec

#: The probe: bubblewrap creating the namespaces and mounts of every sandboxed command.
PROBE = ("--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
         "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "/bin/true")  # fmt: skip
#: Seconds the probe may take.
PROBE_TIMEOUT = 10.0
MISSING = "bubblewrap is not installed (install the `bubblewrap` package: it provides `bwrap`)"


class Found(msgspec.Struct, frozen=True):
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
    runs beside what comes next): ``cli.main`` first thing; the warm-up too, for an
    agent started otherwise (``acp-agent serve``, in-process tests)."""
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


def known() -> Found | None:
    """The probe's answer if it is in: found before, or the probe has ended (never waits
    for it)."""
    pending = _pending
    if _found is None and pending is not None and pending[1].poll() is not None:
        return detected()  # (it has ended: judged at once)
    return _found


async def answered() -> Found:
    """:func:`detected` from the event loop: at once when the answer is in, else waited
    for in a worker thread."""
    found = known()
    return found if found is not None else await asyncio.to_thread(detected)
