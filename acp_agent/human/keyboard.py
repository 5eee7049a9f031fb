"""Lines typed at the keyboard, read without a blocked thread, and Ctrl-C as an event.

On a terminal the line discipline edits the line (canonical mode) and the event loop
reads it when Enter makes it readable (``add_reader``): nothing blocks, so Ctrl-C (a
SIGINT the front end handles) can end a read at once (:meth:`Keyboard.interrupt`) and no
line typed afterwards is swallowed by a read nobody waits for. While no line is asked
for, the terminal does not echo (typing during a turn would draw over its output); each
read starts by discarding what was typed meanwhile, so a stray Enter never answers a
question it was not typed for. The terminal's modes are restored on :meth:`close`.

A question is answered with one key (:meth:`Keyboard.readkey`): the terminal is put in
cbreak mode (no line editing, no echo, Ctrl-C still a signal) for as long as it waits,
and a read that starts with an escape (an arrow, a function key) is no answer.
The chat's prompt is the line editor's (``lineeditor``): the keyboard steps aside while
it reads (:meth:`Keyboard.suspend`) and takes the terminal back after. While a chat's turn
runs, the keys typed go to a composer as they come (:meth:`Keyboard.compose`, cbreak mode,
unechoed: the view draws the line), except while a question waits for its key.

Other input (a pipe, a file) is read by a daemon thread, line by line, all of it kept; a
key asked of it is the next line's text.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO


class Interrupted(Exception):
    """Ctrl-C ended the read."""


class Keyboard:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdin
        self._tty = self.stream.isatty()
        self._lines: deque[str | None] = deque()  # None: end of input
        self._partial = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._saved: list[Any] | None = None
        self._listening = False
        self._keys = False  # reading one key (cbreak), not a line
        self._suspended = False
        self._compose: Callable[[str], None] | None = None
        self.at_eof = False

    def isatty(self) -> bool:
        return self._tty

    @property
    def reading(self) -> bool:
        """A line is being waited for (a prompt or a question is on screen)."""
        return self._waiter is not None and not self._waiter.done()

    # ------------------------------------------------------------------ set-up

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        self._loop = asyncio.get_running_loop()
        if self._tty:
            fd = self.stream.fileno()
            self._saved = _termios_get(fd)
            self._loop.add_reader(fd, self._readable, fd)
            self._echo(False)
        else:
            threading.Thread(target=self._pump, name="keyboard", daemon=True).start()

    def close(self) -> None:
        """Stop reading and give the terminal its modes back."""
        if self._started and self._tty and self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.stream.fileno())
        if self._saved is not None:
            _termios_set(self.stream.fileno(), self._saved)
            self._saved = None

    def _echo(self, on: bool, *, canonical: bool = True) -> None:
        """Echo on or off; ``canonical=False``: cbreak (keys arrive one by one, unechoed)."""
        if self._saved is None:
            return
        # POSIX only (no termios on Windows): used on a terminal alone
        import termios

        fd = self.stream.fileno()
        attrs = _termios_get(fd)
        if attrs is None:
            return
        lflag = attrs[3]
        attrs[3] = lflag | termios.ECHO if on else lflag & ~termios.ECHO
        if canonical:
            attrs[3] |= termios.ICANON
        else:
            attrs[3] &= ~(termios.ICANON | termios.ECHO)
            attrs[6][termios.VMIN], attrs[6][termios.VTIME] = 1, 0
        _termios_set(fd, attrs)

    def _quiet(self) -> None:
        """No read waits: unechoed, in lines, or key by key while composing."""
        self._echo(False, canonical=self._compose is None)

    def compose(self, handler: Callable[[str], None] | None) -> None:
        """Hand the keys typed from now on to ``handler`` as they come (``None``: stop).
        On a terminal only; a read (a question) takes its keys first."""
        if not self._tty:
            return
        self._start()
        self._compose = handler
        if not self._listening:
            self._quiet()

    def suspend(self) -> None:
        """Leave the terminal to another reader (the line editor) until :meth:`resume`;
        what was typed before is dropped."""
        self._start()
        if self._tty and not self._suspended and self._loop is not None:
            self._discard_typeahead()
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.stream.fileno())
            self._suspended = True

    def resume(self) -> None:
        """Read the terminal again (typing is not echoed until the next read)."""
        if self._suspended and self._loop is not None and not self.at_eof:
            self._loop.add_reader(self.stream.fileno(), self._readable, self.stream.fileno())
        self._suspended = False

    # ------------------------------------------------------------------ input

    def _readable(self, fd: int) -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:  # the terminal went away (EIO): end of input
            data = b""
        self._feed(data)

    def _pump(self) -> None:
        """The thread for input that is not a terminal."""
        fd = self.stream.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(self._feed, data)
            except RuntimeError:  # the loop is closed: nobody reads any more
                return
            if not data:
                return

    def _feed(self, data: bytes) -> None:
        if not data:
            if self._partial:
                self._lines.append(self._partial)
                self._partial = ""
            self._lines.append(None)
            if self._tty and self._loop is not None:  # a terminal's EOF is not sticky
                self._loop.remove_reader(self.stream.fileno())
        elif self._compose is not None and not self._listening:  # typed during a turn
            self._compose(self._decoder.decode(data))
        elif self._keys and self._tty:  # one key: the first of this read, if a key
            text = self._decoder.decode(data)
            if text and not text.startswith("\x1b"):
                self._lines.append(None if text[0] == "\x04" else text[0])
        else:
            text = self._partial + self._decoder.decode(data)
            *lines, self._partial = text.split("\n")
            self._lines.extend(line + "\n" for line in lines)
        if self._waiter is not None and not self._waiter.done() and self._lines:
            self._waiter.set_result(None)

    def listen(self) -> None:
        """Get ready for a line: on a terminal, what was typed before is discarded and
        what is typed now is echoed. Call it before showing the question or the prompt,
        so that no key typed after they show is lost."""
        self._start()
        if self._tty and not self._listening:
            self._discard_typeahead()
            self._echo(True)
        self._listening = True

    async def readline(self) -> str | None:
        """The next line with its newline, ``None`` at end of input (Ctrl-D); raises
        :class:`Interrupted` when :meth:`interrupt` is called meanwhile."""
        self.listen()
        if self.at_eof:
            self._listening = False
            return None
        try:
            while not self._lines:
                self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
        finally:
            self._listening = False
            if self._tty:
                self._quiet()
        line = self._lines.popleft()
        if line is None:
            self.at_eof = True
        return line

    async def readkey(self) -> str | None:
        """One key pressed (a question's answer), ``None`` for Ctrl-D; on input that is
        not a terminal, the next line's text. Raises :class:`Interrupted` like
        :meth:`readline`."""
        if not self._tty:
            line = await self.readline()
            return None if line is None else line.strip()
        self.listen()
        self._keys = True
        self._echo(False, canonical=False)
        try:
            key = await self.readline()
        finally:
            self._keys = False
            self._quiet()
        if key is None:
            self.at_eof = False  # Ctrl-D at a question: no more than a "no"
        return key

    def _discard_typeahead(self) -> None:
        # POSIX only (no termios on Windows): used on a terminal alone
        import termios

        with contextlib.suppress(termios.error, OSError):
            termios.tcflush(self.stream.fileno(), termios.TCIFLUSH)
        self._lines = deque(line for line in self._lines if line is None)
        self._partial = ""

    def interrupt(self) -> bool:
        """End the pending read with :class:`Interrupted`; ``False`` when none pends."""
        if self._waiter is None or self._waiter.done():
            return False
        self._waiter.set_exception(Interrupted())
        return True


def _termios_get(fd: int) -> list[Any] | None:
    # POSIX only (no termios on Windows): used on a terminal alone
    import termios

    try:
        return termios.tcgetattr(fd)
    except termios.error:
        return None


def _termios_set(fd: int, attrs: list[Any]) -> None:
    # POSIX only (no termios on Windows): used on a terminal alone
    import termios

    with contextlib.suppress(termios.error, OSError):
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
