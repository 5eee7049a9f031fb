"""What the user types while a turn runs, in ``chat`` on a terminal.

The turn's output owns the screen, so the keys are not echoed by the terminal: the
keyboard hands them here as they come (cbreak mode, :meth:`.keyboard.Keyboard.compose`)
and the view draws the line being typed under the turn's progress (:meth:`View.draft`).

Keys: **Enter steers** the running turn (the message joins it at the model's next
request: ``_session/steering``); **Tab queues** it, to be sent as the next prompt when the
turn ends. Backspace deletes a character, Ctrl-W a word, Ctrl-U the line; escape
sequences (arrows, function keys, Alt-something) and other control keys are ignored.
Ctrl-C stays what it is during a turn (cancel): the terminal makes it a signal.
"""

from __future__ import annotations

from collections.abc import Callable

STEER_KEYS = ("\r", "\n")
QUEUE_KEY = "\t"
BACKSPACE = ("\x7f", "\x08")
KILL_LINE = "\x15"  # Ctrl-U
KILL_WORD = "\x17"  # Ctrl-W

#: What the chat's first line says of these keys.
HINT = "type during a turn: Enter steers it, Tab queues for after it"


class Composer:
    """A line typed key by key. ``send(text, steer)`` gets each line submitted (``steer``:
    Enter, else Tab); ``show(text)`` gets the line after each change."""

    def __init__(self, send: Callable[[str, bool], None], show: Callable[[str], None]) -> None:
        self.text = ""
        self._send = send
        self._show = show
        self._escape = ""  # "", "esc", "csi" or "ss3": inside an escape sequence

    def feed(self, data: str) -> None:
        """Keys as the terminal sent them (several at once when typed fast or pasted)."""
        before = self.text
        for ch in data:
            if self._escape:
                self._in_escape(ch)
            elif ch == "\x1b":
                self._escape = "esc"
            elif ch in STEER_KEYS or ch == QUEUE_KEY:
                self._submit(steer=ch != QUEUE_KEY)
            elif ch in BACKSPACE:
                self.text = self.text[:-1]
            elif ch == KILL_LINE:
                self.text = ""
            elif ch == KILL_WORD:
                self.text = self.text.rstrip(" ").rpartition(" ")[0] + (
                    " " if " " in self.text.rstrip(" ") else ""
                )
            elif ch >= " " and ch != "\x7f" and not 0x80 <= ord(ch) < 0xA0:
                self.text += ch
        if self.text != before:
            self._show(self.text)

    def _in_escape(self, ch: str) -> None:
        if self._escape == "esc":  # ESC [ (CSI), ESC O (SS3), or Alt and a key
            self._escape = {"[": "csi", "O": "ss3"}.get(ch, "")
        elif self._escape == "csi":
            if "\x40" <= ch <= "\x7e":  # the final byte
                self._escape = ""
        else:
            self._escape = ""

    def _submit(self, *, steer: bool) -> None:
        text, self.text = self.text.strip(), ""
        self._show("")
        if text:
            self._send(text, steer)

    def take(self) -> str:
        """The line not submitted (cleared here): the next prompt starts with it."""
        text, self.text = self.text, ""
        self._escape = ""
        self._show("")
        return text
