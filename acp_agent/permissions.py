"""Session modes and the permission policy.

=============  ===========================  =========================  ==========
mode           reads                        edits                      commands
=============  ===========================  =========================  ==========
ask            run (inside roots)           ask                        ask
accept-edits   run (inside roots)           run inside roots, else ask ask
plan           run (inside roots)           refused                    refused
bypass         run                          run                        run
=============  ===========================  =========================  ==========

Reads outside the session's roots ask in every mode but ``bypass``. "Always" answers
are remembered per session under the tool's permission key.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeAlias

import msgspec

from .protocol import types as t

if TYPE_CHECKING:
    from .tools.base import Access

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


def permission_options() -> list[t.PermissionOption]:
    return [
        t.PermissionOption(option_id=ALLOW_ONCE, name="Allow", kind="allow_once"),
        t.PermissionOption(option_id=ALLOW_ALWAYS, name="Always allow", kind="allow_always"),
        t.PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"),
        t.PermissionOption(option_id=REJECT_ALWAYS, name="Always reject", kind="reject_always"),
    ]


class Rules:
    """Remembered "always" answers, keyed by permission key.

    With a ``path`` they belong to a project and persist there (a small JSON file in the
    state directory, replaced atomically), so they survive restarts and apply to every
    session in that project. Build them with :meth:`for_project` in a worker thread (it
    reads the file); saving goes through ``save_with`` (the store's disk writer), so
    the event loop never touches the disk.
    """

    def __init__(
        self, path: str | None = None, save_with: Callable[[Callable[[], None]], None] | None = None
    ) -> None:
        self.path = path
        self.allowed: set[str] = set()
        self.rejected: set[str] = set()
        self._save_with = save_with
        if path is not None:
            self._load(path)

    @classmethod
    def for_project(
        cls, state_dir: str, cwd: str, save_with: Callable[[Callable[[], None]], None] | None = None
    ) -> Rules:
        import hashlib

        name = hashlib.sha256(os.path.realpath(cwd).encode()).hexdigest()[:32]
        return cls(os.path.join(state_dir, "permissions", f"{name}.json"), save_with)

    def _load(self, path: str) -> None:
        try:
            with open(path, "rb") as fh:
                data = msgspec.json.decode(fh.read(), type=_RulesFile)
        except (OSError, msgspec.DecodeError):
            return  # none yet, or unreadable: start empty (the next save rewrites it)
        self.allowed, self.rejected = set(data.allowed), set(data.rejected)

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as fh:
                fh.write(msgspec.json.encode(
                    _RulesFile(sorted(self.allowed), sorted(self.rejected))))
            os.replace(tmp, self.path)
        except OSError:
            pass  # remembered for this process only

    def lookup(self, key: str) -> Decision | None:
        if key in self.rejected:
            return "deny"
        if key in self.allowed:
            return "allow"
        return None

    def remember(self, key: str, option_id: str) -> None:
        if option_id == ALLOW_ALWAYS:
            self.allowed.add(key)
            self.rejected.discard(key)
        elif option_id == REJECT_ALWAYS:
            self.rejected.add(key)
            self.allowed.discard(key)
        else:
            return
        if self._save_with is not None:
            self._save_with(self._save)
        else:
            self._save()


class _RulesFile(msgspec.Struct):
    allowed: list[str] = []
    rejected: list[str] = []
