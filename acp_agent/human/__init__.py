"""The human mode: ``acp-agent run "PROMPT"`` and ``acp-agent chat``.

It drives an agent subprocess through the protocol, exactly as an editor would
(:mod:`.client`), and shows a person what they want to see (:mod:`._rich` on a terminal,
:mod:`._render` otherwise: plain text, or JSON lines with ``run --json``). This package
owns the terminal, so it prints; the agent itself never does.

Signals: the agent runs in a session of its own, so Ctrl-C reaches only this process.
During a turn it becomes ``session/cancel`` (the turn ends ``cancelled`` and the chat goes
on); at a permission question it rejects and cancels; a second time during a turn, it
quits. At the chat's prompt the line editor (:mod:`.lineeditor`) has the keys: Ctrl-C
clears the line, and quits when pressed twice on an empty one; Ctrl-D on an empty line,
``exit`` or ``quit`` quit. While a chat's turn runs, what is typed is drawn under its
progress (:mod:`.compose`): Enter steers the turn (``_session/steering``), Tab queues the
message as the next prompt; queued messages and an unsent line come back in the prompt
when a turn is cancelled. Mistakes and signals end in one line and a non-zero status,
never a traceback (``--debug`` shows them).

Exit status (:data:`STOP_STATUS`): 0 when the turn ended ``end_turn``, 3 ``max_tokens``,
4 ``max_turn_requests``, 5 ``refusal``, 130 when Ctrl-C cancelled it, 1 for an error or
a turn the agent cancelled, 2 for a mistake found before the turn (a server that is not
there included), 128 + N when ended by signal N.

A remote model's server is probed (a TCP connection, :mod:`.reach`) while
the agent starts: a refused connection or an unknown host is said at once, before any
prompt, with the likely fix, and the status is 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from ..errors import RemoteError
from ..rpc.connection import ConnectionClosed
from . import resume
from ._render import JsonLines, Renderer, Style, View, block_text
from .checks import Options, UserError, check
from .client import HumanClient
from .compose import HINT, Composer
from .keyboard import Interrupted, Keyboard
from .lineeditor import QUIT_HINT, Cleared, LineEditor, Quit, open_editor, preload
from .reach import fatal, probe, unreachable

if TYPE_CHECKING:
    from ..config import Config
    from ..protocol import types as t

__all__ = [
    "HumanClient", "Keyboard", "Renderer", "Session", "Style", "View", "block_text", "main",
]

INTERRUPTED = 130
ERROR = 1
MISTAKE = 2
STOP_STATUS = {"end_turn": 0, "max_tokens": 3, "max_turn_requests": 4, "refusal": 5}
QUIT_WORDS = ("exit", "quit", "/exit", "/quit")


def main(command: str, args: Any, config: Config, agent_args: list[str]) -> int:
    """Run ``acp-agent run`` / ``chat``; the exit status."""
    try:
        options = check(command, args, config)
    except UserError as exc:
        sys.stderr.write(f"acp-agent: {exc}\n")
        return 2
    if options.debug and "--log-level" not in agent_args:
        agent_args = [*agent_args, "--log-level", "debug"]
    try:
        return asyncio.run(Session(options, agent_args).run())
    except KeyboardInterrupt:  # before the handlers were in place, or after
        sys.stderr.write("\n")
        return INTERRUPTED
    except Exception as exc:
        if options.debug:
            # only with --debug
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"acp-agent: unexpected error: {exc!r} (--debug shows where)\n")
        return 1


def make_view(options: Options) -> View:
    if options.json:
        return JsonLines(sys.stdout)
    if sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
        # rich's renderer (heavy): only on a terminal
        from ._rich import RichView

        return RichView()
    return Renderer(sys.stdout, answer_only=not sys.stdout.isatty())


def error_line(exc: RemoteError, command: str = "chat") -> str:
    """A failed prompt in one line, with the likely fix when there is one."""
    message = exc.message
    if "Cannot connect to" in message:
        message += "; is the server running, and is --base-url right?"
    elif exc.code == -32000 and "Authentication" in message:
        if "acp-agent login" not in message:
            message += "; `acp-agent login` stores a key"
        if command == "chat":
            message += "; the conversation is kept (`/model` switches to another model)"
    return message


def make_view_for(options: Options) -> View:
    view = make_view(options)
    view.cwd = options.cwd
    return view


class Session:
    """One run of the human mode: the agent, the view, the keyboard and Ctrl-C."""

    def __init__(self, options: Options, agent_args: list[str]) -> None:
        self.options = options
        self.agent_args = agent_args
        self.view = make_view_for(options)
        self.keyboard = Keyboard()
        self.client: HumanClient | None = None
        self.sid: str | None = None
        self.in_turn = False
        self.cancelling = False
        self.quit_status: int | None = None  # set when a signal ends it all
        self.closing = False
        self.prompted = False  # a prompt was sent (a chat worth resuming)
        self.resumed = False
        self.editor: LineEditor | None = None
        self._main: asyncio.Task[int] | None = None
        self._reach: asyncio.Task[str | None] | None = None
        self.composer = Composer(self.submit, self.view.draft)
        self.queued: list[str] = []  # Tab during a turn: the next prompts, in order
        self._steered: asyncio.Future[None] | None = None  # the last steer sent

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        loop.add_signal_handler(signal.SIGINT, self.on_interrupt)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self.quit, 128 + sig)
        if self.options.command == "chat" and self.keyboard.isatty():
            preload()  # prompt_toolkit's import overlaps the agent's start
        if self.options.url is not None:
            self._reach = asyncio.create_task(probe(self.options.url))
        try:
            self.client = await HumanClient.spawn(
                self.agent_args, self.view, policy=self.options.policy,
                command=self.options.command, debug=self.options.debug,
            )  # fmt: skip
            self.client.keyboard = self.keyboard
            self.client.on_ask_cancel = self.cancel_turn
            return await self.converse(self.client)
        except asyncio.CancelledError:
            if self.quit_status is None:
                raise
            return self.quit_status
        except ConnectionClosed:
            self.view.close()
            assert self.client is not None
            await self.client.close(grace=2)
            sys.stderr.write(f"acp-agent: {self.client.exit_reason()}\n")
            return 1
        finally:
            self.closing = True  # from now on Ctrl-C only hurries the agent's exit
            self.keyboard.close()
            self.view.close()
            if self.client is not None:
                await self.client.close(grace=1 if self.quit_status else 5)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(sig)

    # ------------------------------------------------------------------ signals

    def on_interrupt(self) -> None:
        """Ctrl-C: a read ends (the prompt quits, a question rejects and cancels); a turn
        is cancelled; a second one while it is cancelled quits."""
        if self.closing:
            proc = self.client.proc if self.client is not None else None
            if proc is not None and proc.returncode is None:
                proc.kill()
            return
        if self.keyboard.interrupt():
            return
        if self.in_turn and not self.cancelling:
            self.cancel_turn()
            return
        self.view.line_break()
        self.quit(INTERRUPTED)

    def cancel_turn(self) -> None:
        if self.client is not None and self.sid is not None and not self.cancelling:
            self.cancelling = True
            self.client.cancel_soon(self.sid)
            self.view.start_cancelling()

    def quit(self, status: int) -> None:
        if self.closing:
            return
        if self.quit_status is None:
            self.quit_status = status
            if status == INTERRUPTED and self.in_turn:
                self.view.note("interrupted", "warn")
        if self._main is not None:
            self._main.cancel()

    # ------------------------------------------------------------------ the conversation

    async def converse(self, client: HumanClient) -> int:
        options = self.options
        await client.initialize()
        try:
            if options.resume is not None:
                info = await resume.find(client, options.resume, options.cwd, self.keyboard,
                                         self.view)  # fmt: skip
                self.view.cwd = info.cwd
                replayed = await client.load_session(info.session_id, info.cwd)
                self.sid, self.resumed = info.session_id, True
                self.view.note(f"resumed: {resume.title_of(info)} ({info.session_id})")
                resume.show_end(self.view, replayed)
            else:
                self.sid = await client.new_session(options.cwd)
        except UserError as exc:
            return self.mistake(str(exc))
        problem = await self.reachable()
        try:
            if problem is not None:
                return self.mistake(problem)
            if options.prompt is not None:
                self.prompted = True
                result = await self.turn(options.prompt)
                if result is None:
                    return ERROR
                if result.stop_reason == "cancelled":
                    return INTERRUPTED if self.cancelling else ERROR
                return STOP_STATUS.get(result.stop_reason, ERROR)
            return await self.chat()
        finally:
            await self.leave(client)

    def mistake(self, text: str) -> int:
        """A mistake found before the first prompt: one line, as before the agent starts."""
        self.view.close()
        sys.stderr.write(f"acp-agent: {text}\n")
        return MISTAKE

    async def reachable(self) -> str | None:
        """Nothing there at the model's base URL: the line that says so (else ``None``)."""
        if self._reach is None:
            return None
        why = await self._reach
        if not fatal(why) or self.options.url is None:
            return None
        assert why is not None
        return unreachable(self.options.family, self.options.url, why, self.options.url_source)

    async def leave(self, client: HumanClient) -> None:
        """The session stays (said with the command that resumes it) or goes: ``run``
        without --save, and a chat in which nothing was said, leave nothing behind."""
        sid = self.sid
        if sid is None:
            return
        said = self.prompted or self.resumed or self.options.command == "run"
        if self.options.save and said:
            if self.options.command == "chat":
                flag = f" --state-dir {self.options.state_flag}" if self.options.state_flag else ""
                self.view.note(f"saved as {sid} (resume: acp-agent chat --resume {sid}{flag})")
            return
        with contextlib.suppress(TimeoutError):  # even after a quit
            await asyncio.wait_for(client.delete(sid), 3)

    async def chat(self) -> int:
        sandbox = self.client.sandbox if self.client is not None else None
        self.view.note(
            f"acp-agent chat · {self.options.model} · "
            + (f"sandbox {sandbox} · " if sandbox else "")
            + "/help lists the commands · Ctrl-C cancels a turn · Ctrl-D or `exit` quits"
            + (f" · {HINT}" if self.composing() else ""),
        )
        while True:
            if self.queued:
                text = self.queued.pop(0)
                self.view.user(text)
            else:
                try:
                    line = await self.read_prompt(self.composer.take())
                except Interrupted:
                    self.view.line_break()
                    return INTERRUPTED
                if line is None:
                    return 0
                text = line.strip()
            if not text:
                continue
            if text in QUIT_WORDS:
                return 0
            if text == "/mode":
                self.show_modes()
                continue
            self.prompted = True
            result = await self.turn(text)
            assert self.client is not None
            if self.client.eof:
                return 0
            if (result is None or result.stop_reason == "cancelled") and self.queued:
                self.composer.text = "\n".join([*self.queued, self.composer.take()]).strip()
                self.queued.clear()
                self.view.note("the queued messages are back in the prompt (Enter sends them)")

    async def read_prompt(self, default: str = "") -> str | None:
        """The next prompt: from the line editor on a terminal (starting with ``default``),
        else the next line; ``None`` at the end (Ctrl-D)."""
        if not self.keyboard.isatty():
            self.keyboard.listen()
            return await self.keyboard.readline()
        if self.editor is None:
            self.editor = open_editor(self.options.state_dir)
        self.keyboard.suspend()
        try:
            while True:
                try:
                    return await self.editor.read(default)
                except Cleared:
                    default = ""
                    self.view.note(QUIT_HINT)
                except Quit:
                    raise Interrupted from None
        finally:
            self.keyboard.resume()

    async def turn(self, text: str) -> t.PromptResponse | None:
        assert self.client is not None and self.sid is not None
        self.in_turn, self.cancelling = True, False
        composing = self.composing()
        if composing:
            self.keyboard.compose(self.composer.feed)
        try:
            result = await self.client.prompt(self.sid, text)
        except RemoteError as exc:
            self.view.note(error_line(exc, self.options.command), "error")
            return None
        finally:
            self.in_turn = False
            if composing:
                self.keyboard.compose(None)
        if self._steered is not None:  # a steer the turn's end overtook comes back queued
            steered, self._steered = self._steered, None
            await steered
        return result

    # ------------------------------------------------------------------ typed during a turn

    def composing(self) -> bool:
        """Keys typed during a turn are read (a chat on a terminal)."""
        return self.options.command == "chat" and self.keyboard.isatty()

    def submit(self, text: str, steer: bool) -> None:
        """A line typed during the turn: Enter steers it into the turn (when the agent
        can be steered), Tab queues it."""
        if not steer or self.client is None or not self.client.steering or not self.in_turn:
            self.queued.append(text)
            self.view.note(f"queued for after this turn: {text}")
            return
        before = self._steered
        self._steered = asyncio.ensure_future(self._steer(text, before))

    async def _steer(self, text: str, before: asyncio.Future[None] | None) -> None:
        """Send one steer, after the one typed before it (their order is kept)."""
        if before is not None:
            await before
        assert self.client is not None and self.sid is not None
        try:
            outcome = await self.client.steer(self.sid, text)
        except (RemoteError, ConnectionClosed) as exc:
            outcome = f"failed ({getattr(exc, 'message', exc)})"
        if outcome == "injected":
            self.view.user(text)
            self.view.note("  ↳ steered: the model reads it at its next request")
            return
        self.queued.append(text)
        why = "the turn had ended" if outcome == "promptRequired" else f"steering {outcome}"
        self.view.note(f"{why}; queued as the next prompt: {text}")

    def show_modes(self) -> None:
        modes = self.client.modes if self.client is not None else None
        if modes is None:
            self.view.note("this agent has no modes")
            return
        self.view.note("modes (/mode <id> switches):", "plain")
        for m in modes.available_modes:
            mark = "●" if m.id == modes.current_mode_id else " "
            about = m.description if isinstance(m.description, str) else m.name
            self.view.note(f" {mark} {m.id:<13} {about}", "plain")
        if self.client is not None and self.client.sandbox is not None:
            self.view.note(f"sandbox of auto's commands: {self.client.sandbox}", "plain")

