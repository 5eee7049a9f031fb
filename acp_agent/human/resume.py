"""Back into a conversation: ``chat --continue`` (this directory's latest session),
``chat --resume ID`` (an id, or the start of one) and ``chat --resume`` (a list to pick
from), through the agent's own ``session/list`` and ``session/load``; then the end of the
conversation is shown (:func:`show_end`), its last exchanges whole."""

from __future__ import annotations

import calendar
import time
from typing import TYPE_CHECKING

from ..protocol import types as t
from ._render import block_text
from .checks import UserError

if TYPE_CHECKING:
    from ._render import View
    from .client import HumanClient
    from .keyboard import Keyboard

CONTINUE = ":continue"
PICK = ":pick"
SHOWN_EXCHANGES = 3
PICK_LIMIT = 20


async def find(
    client: HumanClient, how: str, cwd: str, keyboard: Keyboard, view: View
) -> t.SessionInfo:
    """The session ``how`` names (:data:`CONTINUE`, :data:`PICK` or an id); raises
    :class:`UserError` when there is none."""
    if how in (CONTINUE, PICK):
        here = await client.list_sessions(cwd)
        if not here:
            raise UserError(f"no saved session in {cwd} (acp-agent sessions --all lists them all)")
        return here[0] if how == CONTINUE else await pick(here[:PICK_LIMIT], keyboard, view)
    every = await client.list_sessions(None)
    exact = [s for s in every if s.session_id == how]
    matches = exact or [s for s in every if s.session_id.startswith(how)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UserError(f"--resume {how}: no saved session has that id (acp-agent sessions"
                        " lists them)")  # fmt: skip
    raise UserError(f"--resume {how}: {len(matches)} sessions start so; give more of the id")


async def pick(sessions: list[t.SessionInfo], keyboard: Keyboard, view: View) -> t.SessionInfo:
    if not keyboard.isatty():
        raise UserError("--resume without an id needs a terminal to pick on; give the id"
                        " (acp-agent sessions lists them)")  # fmt: skip
    view.note("saved sessions of this directory, newest first:", "plain")
    for number, info in enumerate(sessions, 1):
        view.note(f"  {number:>2}  {ago(info.updated_at):>9}  {title_of(info)}", "plain")
    while True:
        keyboard.listen()
        view.note(f"resume which? [1-{len(sessions)}, Enter: 1]", "plain")
        line = await keyboard.readline()
        if line is None:
            raise UserError("no session chosen")
        answer = line.strip() or "1"
        if answer.isdigit() and 1 <= int(answer) <= len(sessions):
            return sessions[int(answer) - 1]


def title_of(info: t.SessionInfo) -> str:
    return info.title if isinstance(info.title, str) and info.title else "(untitled)"


def ago(stamp: str | object | None) -> str:
    """``2026-12-03T10:00:00.000Z`` as "5 min ago", "3 h ago", "2 days ago" or the date."""
    if not isinstance(stamp, str):
        return "?"
    try:
        then = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return stamp
    seconds = max(0, time.time() - then)
    if seconds < 60:
        return "just now"
    for size, unit in ((86400 * 7, None), (86400, "days"), (3600, "h"), (60, "min")):
        if seconds >= size:
            if unit is None:
                return stamp[:10]
            return f"{int(seconds // size)} {unit} ago"
    return stamp[:10]  # pragma: no cover (seconds >= 60 always matches a unit)


Exchange = tuple[str, list[t.SessionUpdate]]


def exchanges(updates: list[t.SessionUpdate]) -> tuple[list[t.SessionUpdate], list[Exchange]]:
    """A replay cut at each prompt: what came before the first, and each prompt's text
    with what followed it."""
    before: list[t.SessionUpdate] = []
    out: list[Exchange] = []
    prompt_id: object = None
    for u in updates:
        if isinstance(u, t.UserMessageChunk):
            text = block_text(u.content)
            if out and u.message_id == prompt_id and not out[-1][1]:
                out[-1] = (out[-1][0] + text, out[-1][1])
            else:
                out.append((text, []))
                prompt_id = u.message_id
        elif out:
            out[-1][1].append(u)
        else:
            before.append(u)
    return before, out


def show_end(view: View, updates: list[t.SessionUpdate], count: int = SHOWN_EXCHANGES) -> None:
    """The conversation's last ``count`` exchanges as they were shown (thoughts left
    out); the view learns the session's usage from all of it."""
    before, all_ = exchanges(updates)
    hidden, shown = all_[:-count] if count else all_, all_[-count:] if count else []
    for u in before + [u for _, us in hidden for u in us]:
        view.track(u)
    if hidden:
        view.note(f"… {len(hidden)} earlier exchange{'s' * (len(hidden) > 1)} (the model has"
                  " them all)", "plain")  # fmt: skip
    for text, after in shown:
        view.begin_replay()
        view.user(text.rstrip("\n"))
        for u in after:
            if not isinstance(u, t.AgentThoughtChunk):
                view.update(u)
        view.end_replay()
