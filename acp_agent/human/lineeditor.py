"""The chat's prompt on a terminal: a line editor (``prompt_toolkit``), imported only here.

What it does: the arrows, Home/End and the usual Emacs keys edit the line; up and down
walk the history, Ctrl-R searches it; a line ending with a backslash, or Alt-Enter (Esc
then Enter), goes on to a new line (multi-line prompts); Ctrl-C clears a line that has
text and, on an empty line, asks for a second Ctrl-C to quit (:data:`QUIT_HINT`); Ctrl-D
quits on an empty line and does nothing on one with text. The history is kept per user
in the state directory (``chat-history``, 0600), multi-line prompts whole.

Why prompt_toolkit rather than the standard ``readline``: ``readline`` edits only inside
a blocking ``input()``, with no way to end that read from the event loop (a signal, the
agent going away) nor to run it beside the loop, and Python exposes none of its callback
interface; prompt_toolkit's ``prompt_async`` runs on the loop, and brings Ctrl-R, multi-
line input and key bindings of our own. Its cost, measured on the 2-core machine of the
benchmarks (``python -X importtime -c "import prompt_toolkit.shortcuts"``, 3 runs):
81-131 ms to import, against ~0.8 ms for ``readline``. ``chat`` does not wait for it:
the import starts in a worker thread when the chat starts (:func:`preload`) and overlaps
the agent's start (spawn, ``initialize``, ``session/new``). Time from spawn to the prompt
on a pseudo-terminal, median of 9 interleaved runs (load average ~16): 1,079 ms with the
line editor, 1,280 ms before it (the same machine, the revision before this module); the
difference is noise, the import is not on the way. ``run`` and the agent never import it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

QUIT_HINT = "(Ctrl-C again quits; Ctrl-D or `exit` too)"
HISTORY_FILE = "chat-history"


class Quit(Exception):
    """Ctrl-C on an empty line, the second time in a row."""


class Cleared(Exception):
    """Ctrl-C on an empty line, the first time: :data:`QUIT_HINT` is shown."""


_loaded = threading.Event()
_loading = threading.Lock()
_started: list[bool] = []


def preload() -> None:
    """Import prompt_toolkit in a worker thread (once); :func:`open_editor` waits for it."""

    def load() -> None:
        try:
            import prompt_toolkit.shortcuts  # noqa: F401
        finally:
            _loaded.set()

    with _loading:
        if not _started:
            _started.append(True)
            threading.Thread(target=load, name="preload-line-editor", daemon=True).start()


def history_path(state_dir: str) -> str:
    """The history file, private to the user (0600 in a 0700 directory)."""
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    path = os.path.join(state_dir, HISTORY_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return path


class LineEditor:
    """Prompts read with editing and history; :meth:`read` returns a prompt's text, or
    ``None`` for Ctrl-D, and raises :class:`Cleared` / :class:`Quit` for Ctrl-C."""

    def __init__(self, history: str | None) -> None:
        # prompt_toolkit (heavy): only for a chat on a terminal (`preload` starts it early)
        from prompt_toolkit import PromptSession
        from prompt_toolkit.filters import is_searching
        from prompt_toolkit.formatted_text import FormattedText
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        self.armed = False  # a Ctrl-C on an empty line was pressed: the next one quits
        keys = KeyBindings()
        editing = ~is_searching  # in a Ctrl-R search, the search's own keys

        @keys.add("c-c", filter=editing)
        def _interrupt(event: Any) -> None:
            buffer = event.current_buffer
            if buffer.text:
                buffer.reset()
                self.armed = False
            elif self.armed:
                event.app.exit(exception=Quit())
            else:
                event.app.exit(exception=Cleared())

        @keys.add("c-d", filter=editing)
        def _end(event: Any) -> None:
            if not event.current_buffer.text:
                event.app.exit(exception=EOFError())

        @keys.add("enter", filter=editing)
        def _enter(event: Any) -> None:
            buffer = event.current_buffer
            if buffer.document.text_before_cursor.endswith("\\"):
                buffer.delete_before_cursor(1)
                buffer.insert_text("\n")
            else:
                buffer.validate_and_handle()

        @keys.add("escape", "enter", filter=editing)
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        self.session: Any = PromptSession(
            message=FormattedText([("bold ansicyan", "> ")]),
            history=FileHistory(history) if history else InMemoryHistory(),
            key_bindings=keys,
            prompt_continuation="  ",
            enable_history_search=False,  # up/down walk the history; Ctrl-R searches it
            complete_while_typing=False,
        )

    async def read(self, default: str = "") -> str | None:
        """The next prompt, its line starting as ``default``."""
        try:
            text: str = await self.session.prompt_async(handle_sigint=False, default=default)
        except EOFError:
            return None
        except Cleared:
            self.armed = True
            raise
        self.armed = False
        return text


def open_editor(state_dir: str) -> LineEditor:
    """The line editor, its history in ``state_dir`` (kept in memory when that cannot be
    written)."""
    preload()
    _loaded.wait()
    try:
        history: str | None = history_path(state_dir)
    except OSError:
        history = None
    return LineEditor(history)
