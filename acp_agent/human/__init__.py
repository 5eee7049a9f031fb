"""The human mode: ``acp-agent run "PROMPT"`` and ``acp-agent chat``.

It drives an agent subprocess through the protocol, exactly as an editor would
(:mod:`.client`), and shows a person what they want to see (:mod:`._rich` on a terminal,
:mod:`._render` otherwise: plain text, or JSON lines with ``run --json``). This package
owns the terminal, so it prints; the agent itself never does.

Signals: the agent runs in a session of its own, so Ctrl-C reaches only this process.
During a turn it becomes ``session/cancel`` (the turn ends ``cancelled`` and the chat goes
on); at a permission question it rejects and cancels; at the prompt, or a second time
during a turn, it quits. Ctrl-D at the prompt quits. Mistakes and signals end in one line
and a non-zero status, never a traceback (``--debug`` shows them).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING, Any

from ..errors import RemoteError
from ..rpc.connection import ConnectionClosed
from ._render import JsonLines, Renderer, Style, View, block_text
from .checks import Options, UserError, check
from .client import HumanClient
from .keyboard import Interrupted, Keyboard

if TYPE_CHECKING:
    from ..config import Config
    from ..protocol import types as t

__all__ = [
    "HumanClient", "Keyboard", "Renderer", "Session", "Style", "View", "block_text", "main",
]

INTERRUPTED = 130


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
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"acp-agent: unexpected error: {exc!r} (--debug shows where)\n")
        return 1


def make_view(options: Options) -> View:
    if options.json:
        return JsonLines(sys.stdout)
    import os

    if sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
        from ._rich import RichView

        return RichView()
    return Renderer(sys.stdout)


def error_line(exc: RemoteError) -> str:
    """A failed prompt in one line, with the likely fix when there is one."""
    message = exc.message
    if "Cannot connect to" in message:
        message += "; is the server running, and is --base-url right?"
    elif exc.code == -32000 and "Authentication" in message:
        message += " (set it in the environment and start again)"
    return message


class Session:
    """One run of the human mode: the agent, the view, the keyboard and Ctrl-C."""

    def __init__(self, options: Options, agent_args: list[str]) -> None:
        self.options = options
        self.agent_args = agent_args
        self.view = make_view(options)
        self.keyboard = Keyboard()
        self.client: HumanClient | None = None
        self.sid: str | None = None
        self.in_turn = False
        self.cancelling = False
        self.quit_status: int | None = None  # set when a signal ends it all
        self.closing = False
        self._main: asyncio.Task[int] | None = None

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        loop.add_signal_handler(signal.SIGINT, self.on_interrupt)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self.quit, 128 + sig)
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
        await client.initialize()
        self.sid = sid = await client.new_session(self.options.cwd)
        try:
            if self.options.prompt is not None:
                result = await self.turn(self.options.prompt)
                if result is None:
                    return 1
                if result.stop_reason == "cancelled":
                    return INTERRUPTED if self.cancelling else 1
                return 0 if result.stop_reason == "end_turn" else 1
            return await self.chat()
        finally:
            if not self.options.save:  # even after a quit: `run` leaves nothing behind
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(client.delete(sid), 3)

    async def chat(self) -> int:
        sandbox = self.client.sandbox if self.client is not None else None
        self.view.note(
            f"acp-agent chat · {self.options.model} · "
            + (f"sandbox {sandbox} · " if sandbox else "")
            + "/help lists the commands · Ctrl-C cancels a turn · Ctrl-D quits",
        )
        while True:
            self.keyboard.listen()
            if self.keyboard.isatty():
                self.view.prompt()
            try:
                line = await self.keyboard.readline()
            except Interrupted:
                self.view.line_break()
                return INTERRUPTED
            if line is None:
                if self.keyboard.isatty():
                    self.view.line_break()
                return 0
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                return 0
            if text == "/mode":
                self.show_modes()
                continue
            await self.turn(text)
            assert self.client is not None
            if self.client.eof:
                return 0

    async def turn(self, text: str) -> t.PromptResponse | None:
        assert self.client is not None and self.sid is not None
        self.in_turn, self.cancelling = True, False
        try:
            return await self.client.prompt(self.sid, text)
        except RemoteError as exc:
            self.view.note(error_line(exc), "error")
            return None
        finally:
            self.in_turn = False

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

