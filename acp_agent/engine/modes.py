"""The session modes offered, as data: their ids, names and descriptions (the policy
each stands for is ``engine.permissions``). Light on purpose: ``session/new`` answers
from it before the rest of the engine is loaded (``handlers.opening``)."""

from __future__ import annotations

MODES: list[tuple[str, str, str]] = [
    ("ask", "Ask", "Reads run freely; edits and commands ask for permission."),
    ("accept-edits", "Accept edits", "Edits inside the workspace run; commands ask."),
    ("auto", "Auto", "Edits inside the workspace and commands in the sandbox run; the rest asks."),
    ("plan", "Plan", "Read-only: the agent explores and plans; edits are refused, commands ask "
     "and run read-only in the sandbox (when there is one)."),
    ("bypass", "Bypass permissions", "Nothing asks for permission; nothing is sandboxed."),
]
MODE_IDS = [m[0] for m in MODES]
