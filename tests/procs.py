"""What is running, read from ``/proc``: for tests that assert a process or a process
group is gone. A zombie counts as gone (it only awaits its reaper, which in a container
may be an init that reaps lazily)."""

from __future__ import annotations

import os
from pathlib import Path

from .limits import WAIT, eventually


def _stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def _live_where(field: int, value: int) -> list[int]:
    """The live (non-zombie) processes whose ``/proc/<pid>/stat`` field ``field`` (after
    the command name: 1 the parent, 2 the process group) is ``value``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fields = _stat(pid)
        if fields is not None and int(fields[field]) == value and fields[0] != "Z":
            found.append(int(pid))
    return found


def group_members(pgid: int) -> list[int]:
    """The live (non-zombie) processes of process group ``pgid``."""
    return _live_where(2, pgid)


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    return _live_where(1, pid)


def all_gone(pids: list[int], timeout: float = WAIT) -> bool:
    """Whether every one of ``pids`` is gone within ``timeout`` (polled: for tests
    without an event loop)."""
    import time

    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def gone(pid: int, timeout: float = WAIT) -> None:
    """Wait until process ``pid`` is no longer alive."""
    await eventually(lambda: not alive(pid), f"process {pid} is gone", timeout)


def describe(pid: int) -> str:
    """``pid``, its state and its command line (for failure messages)."""
    fields = _stat(pid)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        cmdline = "?"
    return f"{pid} [{fields[0] if fields else '?'}] {cmdline.strip()}"


async def group_gone(pgid: int, timeout: float = WAIT) -> None:
    """Wait until no live process is left in process group ``pgid``."""
    try:
        await eventually(lambda: not group_members(pgid), f"process group {pgid} is empty",
                         timeout)
    except AssertionError as exc:
        left = "; ".join(describe(pid) for pid in group_members(pgid))
        raise AssertionError(f"{exc} (left: {left})") from None
