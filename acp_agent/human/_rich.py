"""What a person sees of a turn on a terminal, drawn with ``rich`` (imported only here,
only in the human mode).

One owner of the screen: everything goes through one console. Finished things are printed
for good (answers as Markdown, a block at a time, once the block is complete; thoughts
dimmed; tool calls with their status and syntax-highlighted diffs; notices), and below
them a live region is redrawn in place: the block being streamed, the plan as a checklist
and a progress line. The live region is taken down before a question or the prompt is
shown (:meth:`RichView.pause`) and put back after, so nothing ever draws over them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from rich.console import (
    Console,
    ConsoleOptions,
    Group,
    JustifyMethod,
    RenderableType,
    RenderResult,
)
from rich.live import Live
from rich.markdown import CodeBlock, Heading, Markdown, MarkdownElement
from rich.padding import Padding
from rich.segment import Segment
from rich.spinner import Spinner
from rich.syntax import Syntax
from rich.text import Text

from ..escaping import escaped
from ..protocol import types as t
from ._render import Call, View, block_text, diff_lines

CODE_THEME = "ansi_dark"  # the terminal's own colours, on any background
PLAN_MARK = {"pending": ("○", "default"), "in_progress": ("◉", "bold yellow"),
             "completed": ("✔", "green")}  # fmt: skip
NOTE_STYLES = {"info": "dim", "warn": "yellow", "error": "bold red", "plain": ""}
MAX_OUTPUT_LINES = 20
MAX_DIFF_LINES = 200


class _Code(CodeBlock):
    """A code block indented, without the blank lines rich pads it with."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        code = str(self.text).rstrip()
        yield Syntax(code, self.lexer_name, theme=self.theme, word_wrap=True,
                     padding=(0, 0, 0, 2), background_color="default")  # fmt: skip


class _Heading(Heading):
    """Every heading at the left margin, as the text around it (rich centres a title)."""

    LEVEL_ALIGN: ClassVar[dict[str, JustifyMethod]] = dict.fromkeys(Heading.LEVEL_ALIGN, "left")


class _Markdown(Markdown):
    """Markdown a block at a time: the blank line between blocks is the view's, so none
    comes before the block (rich starts a list with one)."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements, "fence": _Code, "code_block": _Code, "heading_open": _Heading,
    }  # fmt: skip

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        started = False
        for segment in super().__rich_console__(console, options):
            if not started and isinstance(segment, Segment) and segment.text == "\n":
                continue
            started = True
            yield segment


def complete_blocks(text: str) -> int:
    """How much of a streamed Markdown text is whole blocks (paragraphs, lists, code
    blocks): up to the last blank line or closing fence outside a code block."""
    cut = pos = 0
    fence = ""
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        pos += len(line)
        bare = line.strip()
        if fence:
            if bare.startswith(fence) and not bare.strip(fence[0]):
                fence, cut = "", pos
        elif bare.startswith(("```", "~~~")):
            fence = bare[: len(bare) - len(bare.lstrip(bare[0]))]
        elif not bare:
            cut = pos
    return cut


class RichView(View):
    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console(highlight=False, emoji=False, markup=False)
        self.live: Live | None = None
        self.buf = ""  # the streamed message's text not printed yet
        self.kind: str | None = None  # what buf holds: "text" or "thought"
        self.blocks = 0  # blocks of the current message printed so far
        self.running: dict[str, Call] = {}
        self.started = time.monotonic()
        self.in_turn = False
        self.spinner = Spinner("dots", style="cyan")  # one, so that it turns
        self._ticker: asyncio.Task[None] | None = None
        self._draft = ""  # typed during the turn (the terminal does not echo it)

    # ------------------------------------------------------------------ the live region

    def begin_turn(self) -> None:
        super().begin_turn()
        self.running.clear()
        self.started = time.monotonic()
        self.in_turn = True
        self._show_live()

    def _show_live(self) -> None:
        if self.live is not None:
            return
        self.live = Live(
            self._live(), console=self.console, auto_refresh=False, transient=True,
            redirect_stdout=False, redirect_stderr=False,
        )  # fmt: skip
        self.live.start(refresh=True)
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    def _hide_live(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self.live is not None:
            self.live.stop()
            self.live = None

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            self._refresh()

    def _refresh(self) -> None:
        if self.live is not None:
            self.live.update(self._live(), refresh=True)

    def _live(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self.buf.strip():
            parts.append(self._block(self.buf))
        if self.plan:
            parts.append(self._plan(self.plan))
        self.spinner.update(text=self._status())
        parts.append(self.spinner)
        if self._draft:
            parts.append(Text.assemble(("› ", "bold cyan"), self._draft, ("▏", "cyan"),
                                       ("   Enter steers · Tab queues", "dim")))  # fmt: skip
        return Group(*parts)

    def draft(self, text: str) -> None:
        self._draft = text
        self._refresh()

    def _status(self) -> Text:
        seconds = int(time.monotonic() - self.started)
        if self.cancelling:
            text = Text("cancelling… (Ctrl-C again quits)", style="yellow")
        elif self.running:
            text = Text("▶ " + list(self.running.values())[-1].label)
        else:
            text = Text("working…")
        return text.append(f"  {seconds}s", style="dim")

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        self._flush(final=True)
        self._hide_live()
        try:
            yield
        finally:
            if self.in_turn:
                self._show_live()

    # ------------------------------------------------------------------ what is printed

    def _print(self, *renderables: RenderableType, end: str = "\n", wrap: bool = True) -> None:
        self.console.print(*renderables, end=end, soft_wrap=not wrap)

    def _block(self, text: str) -> RenderableType:
        if self.kind == "thought":
            return Text(text.strip("\n"), style="dim italic")
        return _Markdown(text.strip("\n"), code_theme=CODE_THEME)

    def _flush(self, *, final: bool = False) -> None:
        """Print the complete blocks of the streamed message (all of it when ``final``)."""
        cut = len(self.buf) if final else complete_blocks(self.buf)
        done, self.buf = self.buf[:cut], self.buf[cut:]
        if done.strip():
            if self.blocks:
                self._print("")
            self._print(self._block(done))
            self.blocks += 1
        if final:
            if self.blocks:
                self._print("")
            self.kind, self.blocks = None, 0

    def _stream(self, kind: str, text: str) -> None:
        if kind != self.kind:
            self._flush(final=True)
            self.kind = kind
        self.buf += text
        self._flush()
        self._refresh()

    def update(self, u: t.SessionUpdate) -> None:
        tracked = self.track(u)
        match u:
            case t.AgentMessageChunk(content=block):
                self._stream("text", block_text(block))
            case t.AgentThoughtChunk(content=block):
                self._stream("thought", block_text(block))
            case t.ToolCall() | t.ToolCallUpdateSessionUpdate():
                assert tracked is not None
                self._tool(u.tool_call_id, *tracked)
            case t.Notice(title=title, description=description):
                self._flush(final=True)
                line = Text("! " + escaped(title), style="yellow")
                said = f": {escaped(description)}" if description else ""
                self._print(line.append(said))
            case _:
                self._refresh()

    def _tool(self, call_id: str, call: Call, before: t.ToolCallStatus | None) -> None:
        status = call.status or "pending"
        if status not in ("completed", "failed"):
            self.running[call_id] = call
            self._refresh()
            return
        self.running.pop(call_id, None)
        ok, why = call.outcome
        if status == before or (call.kind == "think" and ok):
            self._refresh()  # printed already, or a plan shown as the plan
            return
        self._flush(final=True)
        head = Text("✓ " if ok else "✗ ", style="bold green" if ok else "bold red")
        head.append(call.label, style="bold")
        if why:
            head.append(f"  {why}", style="red")
        self._print(head)
        for item in call.content or []:
            shown = self._content(item)
            if shown is not None:
                self._print(Padding(shown, (0, 0, 0, 2)))

    def _content(self, item: t.ToolCallContent) -> RenderableType | None:
        match item:
            case t.Diff():
                lines = diff_lines(item, self.relative)
                more = len(lines) - MAX_DIFF_LINES
                body = "\n".join(lines[:MAX_DIFF_LINES]) + (f"\n… {more} more lines" * (more > 0))
                return Syntax(body, "diff", theme=CODE_THEME, background_color="default")
            case t.Content(content=block):
                text = block_text(block).strip("\n")
                if not text:
                    return None
                return _output(text)
            case t.Terminal(terminal_id=terminal_id):
                return Text(f"[terminal {terminal_id}]", style="dim")
        return None

    def _plan(self, entries: list[t.PlanEntry]) -> RenderableType:
        lines = Text("Plan", style="bold")
        for e in entries:
            mark, style = PLAN_MARK.get(e.status, ("?", "default"))
            lines.append(f"\n {mark} ", style=style)
            lines.append(escaped(e.content), style="dim" if e.status == "completed" else style)
        return lines

    def finish(self, result: t.PromptResponse) -> None:
        self._flush(final=True)
        self._hide_live()
        self.in_turn = False
        if self.plan:
            self._print(self._plan(self.plan))
        footer = self.footer(result)
        if footer:
            style = "dim" if result.stop_reason in ("end_turn", "cancelled") else "yellow"
            self._print(Text("— " + " · ".join(footer), style=style))

    # ------------------------------------------------------------------ the front end's

    def note(self, text: str, level: str = "info") -> None:
        self._flush(final=True)
        style = NOTE_STYLES.get(level, "dim")
        self._print(Text(text, style=style), wrap=False)  # the terminal wraps: copied whole

    def start_cancelling(self) -> None:
        self.cancelling = True
        self._refresh()

    def question(self, req: t.RequestPermissionRequest, choices: list[tuple[str, str]]) -> None:
        call = self.calls.get(req.tool_call.tool_call_id)
        title = escaped(req.tool_call.title or (call.label if call else "a tool call"))
        self._print(Text.assemble(("? ", "bold yellow"), ("Allow ", "bold"), (title, "bold"),
                                  ("?", "bold")))  # fmt: skip
        preview = _preview(req.tool_call.raw_input, title, self.relative)
        if preview is not None:
            self._print(Padding(preview, (0, 0, 0, 2)))
        for key, name in choices:
            self._print(Text.assemble("  ", (f"[{key}]", "bold cyan"), f" {escaped(name)}"))
        self._print(Text("  Press a key (Ctrl-C: reject and cancel): ", style="cyan"), end="")

    def answered(self, name: str) -> None:
        self._print(Text(name, style="bold"))

    def user(self, text: str) -> None:
        self._flush(final=True)
        self._print(Text.assemble(("> ", "bold cyan"), (text.replace("\n", "\n  "), "bold")))

    def end_replay(self) -> None:
        self._flush(final=True)

    def prompt(self) -> None:
        self._print(Text("> ", style="bold cyan"), end="")

    def line_break(self) -> None:
        self._print("")

    def close(self) -> None:
        self._hide_live()
        self.in_turn = False


def _clip(text: str) -> str:
    lines = text.splitlines()
    more = len(lines) - MAX_OUTPUT_LINES
    return "\n".join(lines[:MAX_OUTPUT_LINES]) + (f"\n… {more} more lines" if more > 0 else "")


def _output(text: str) -> Text:
    """A tool's output, dimmed and cut to its first lines; a fenced output (a command's)
    without its fences, what follows them (the exit code) kept."""
    head, _, rest = text.partition("\n")
    if head.startswith(("```", "~~~")):
        body, fence, tail = rest.rpartition(head.rstrip())
        if fence:
            return Text(_clip(body.strip("\n")) + "\n" + tail.strip("\n"), style="dim")
    return Text(_clip(text), style="dim")


def _preview(raw: Any, title: str, show: Callable[[str], str]) -> RenderableType | None:
    """What a question is about, beyond its title: the command, the edit as a diff, the
    content to be written."""
    if not isinstance(raw, dict):
        return None
    command, path = raw.get("command"), raw.get("path")
    if isinstance(command, str):
        command = escaped(command, lines=True)
        return None if command in title else Text("$ " + command, style="dim")
    old, new = raw.get("old_string"), raw.get("new_string")
    if isinstance(path, str) and isinstance(old, str) and isinstance(new, str):
        lines = diff_lines(t.Diff(path=path, old_text=old, new_text=new), show)[2:]  # no names
        return Syntax(_clip("\n".join(lines)), "diff", theme=CODE_THEME,
                      background_color="default")  # fmt: skip
    content = raw.get("content")
    if isinstance(path, str) and isinstance(content, str):
        lexer = Syntax.guess_lexer(path, content)
        return Syntax(_clip(content.rstrip("\n")), lexer, theme=CODE_THEME,
                      background_color="default")  # fmt: skip
    return None
