"""The human mode: ``acp-agent run "PROMPT"`` and ``acp-agent chat``.

It drives an agent subprocess through the protocol, exactly as an editor would, and
renders what a person wants to see: streamed text, thoughts dimmed, the plan, tool calls
with their status and diffs, permission questions answered at the keyboard, a progress
line while the model works, and the usage at the end. This module owns the terminal, so
it prints; the agent itself never does.
"""

from __future__ import annotations

import asyncio
import difflib
import itertools
import json
import os
import sys
from typing import Any, TextIO

PERMISSION_KEYS = {"a": "allow_once", "A": "allow_always", "r": "reject_once", "R": "reject_always"}


class Style:
    def __init__(self, stream: TextIO) -> None:
        self.color = stream.isatty() and not os.environ.get("NO_COLOR")

    def __call__(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def dim(self, text: str) -> str:
        return self("2", text)

    def bold(self, text: str) -> str:
        return self("1", text)


STATUS_MARK = {"pending": "…", "in_progress": "▶", "completed": "✓", "failed": "✗"}
PLAN_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class Renderer:
    """Turns session/update notifications into terminal output."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.s = Style(out)
        self.kind: str | None = None  # the stream we are in: "text" or "thought"
        self.calls: dict[str, dict[str, Any]] = {}
        self.usage: dict[str, Any] | None = None

    def _switch(self, kind: str | None) -> None:
        if self.kind != kind and self.kind is not None:
            self.out.write("\n")
        self.kind = kind

    def update(self, u: dict[str, Any]) -> None:
        kind = u.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self._switch("text")
            self.out.write(_block_text(u["content"]))
        elif kind == "agent_thought_chunk":
            self._switch("thought")
            self.out.write(self.s.dim(_block_text(u["content"])))
        elif kind == "plan":
            self._switch(None)
            self.out.write(self.s.bold("Plan") + "\n")
            for e in u["entries"]:
                self.out.write(f"  {PLAN_MARK.get(e['status'], '[?]')} {e['content']}\n")
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(u)
        elif kind == "usage_update":
            self.usage = u
        elif kind == "notice":
            self._switch(None)
            self.out.write(
                self.s("33", f"! {u['title']}")
                + (f": {u['description']}" if u.get("description") else "")
                + "\n"
            )
        self.out.flush()

    def _tool(self, u: dict[str, Any]) -> None:
        call = self.calls.setdefault(u["toolCallId"], {})
        before = call.get("status")
        call.update({k: v for k, v in u.items() if v is not None})
        status = call.get("status", "pending")
        if status == before or status not in ("completed", "failed"):
            return  # the progress line shows the work; print each call once, when done
        self._switch(None)
        mark = STATUS_MARK.get(status, "?")
        color = "32" if status == "completed" else "31"
        self.out.write(
            self.s(color, f"{mark} {call.get('title', call.get('name', 'tool'))}") + "\n"
        )
        if call.get("kind") != "think" or status == "failed":  # a plan is shown as a plan
            for item in call.get("content") or []:
                self.out.write(self._content(item))

    def _content(self, item: dict[str, Any]) -> str:
        if item.get("type") == "diff":
            old = (item.get("oldText") or "").splitlines(keepends=True)
            new = item["newText"].splitlines(keepends=True)
            lines = list(difflib.unified_diff(old, new, "a" + item["path"], "b" + item["path"]))
            shown = []
            for line in lines[:200]:
                code = "32" if line.startswith("+") else "31" if line.startswith("-") else "2"
                shown.append(self.s(code, line.rstrip("\n")) + "\n")
            return "".join(shown)
        if item.get("type") == "content":
            text = _block_text(item["content"]).rstrip("\n")
            body = "\n".join(text.splitlines()[:40])
            return self.s.dim("  " + body.replace("\n", "\n  ")) + "\n" if body else ""
        if item.get("type") == "terminal":
            return self.s.dim(f"  [terminal {item['terminalId']}]") + "\n"
        return ""

    def finish(self, result: dict[str, Any]) -> None:
        self._switch(None)
        parts = [f"stop: {result.get('stopReason')}"]
        usage = result.get("usage")
        if usage:
            parts.append(f"tokens: {usage['inputTokens']} in / {usage['outputTokens']} out")
        if self.usage:
            parts.append(f"context: {self.usage['used']}/{self.usage['size']}")
            if self.usage.get("cost"):
                parts.append(
                    f"cost: {self.usage['cost']['amount']:.4f} {self.usage['cost']['currency']}"
                )
        self.out.write(self.s.dim("— " + " · ".join(parts)) + "\n")
        self.out.flush()


def _block_text(block: dict[str, Any]) -> str:
    if block.get("type") == "text":
        return str(block.get("text", ""))
    if block.get("type") == "resource_link":
        return f"[{block.get('name')}]({block.get('uri')})"
    return f"[{block.get('type')}]"


class HumanClient:
    """A minimal ACP client over the agent subprocess's pipes."""

    def __init__(self, agent_args: list[str], renderer: Renderer, *, yes: bool) -> None:
        self.agent_args = agent_args
        self.r = renderer
        self.yes = yes
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.spinning = False

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "acp_agent",
            *self.agent_args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=1 << 28,
        )
        self.reader = asyncio.create_task(self._read())

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = fut
        self._send({"id": request_id, "method": method, "params": params})
        reply = await fut
        if "error" in reply:
            raise RuntimeError(reply["error"].get("message", "error"))
        return dict(reply["result"])

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            msg = json.loads(line)
            if "method" in msg and "id" in msg:
                task = asyncio.create_task(self._answer(msg))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            elif msg.get("method") == "session/update":
                self._clear_progress()
                self.r.update(msg["params"]["update"])
            elif msg.get("id") in self.pending:
                self.pending.pop(msg["id"]).set_result(msg)
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(RuntimeError("the agent exited"))

    async def _answer(self, msg: dict[str, Any]) -> None:
        if msg["method"] != "session/request_permission":
            self._send({"id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
            return
        params = msg["params"]
        options = {o["kind"]: o["optionId"] for o in params["options"]}
        if self.yes:
            kind = "allow_once"
        elif not sys.stdin.isatty():
            kind = "reject_once"
        else:
            kind = await self._ask(params["toolCall"].get("title") or "a tool call")
        option = options.get(kind) or next(iter(options.values()))
        self._send(
            {"id": msg["id"], "result": {"outcome": {"outcome": "selected", "optionId": option}}}
        )

    async def _ask(self, title: str) -> str:
        self._clear_progress()
        question = f"\nAllow {title}? [a]llow once, [A]lways, [r]eject, [R]eject always: "
        while True:
            sys.stderr.write(self.r.s.bold(question))
            sys.stderr.flush()
            answer = (await asyncio.to_thread(sys.stdin.readline)).strip()
            if answer in PERMISSION_KEYS:
                return PERMISSION_KEYS[answer]
            if answer.lower() in ("y", "yes"):
                return "allow_once"
            if answer.lower() in ("n", "no", ""):
                return "reject_once"

    def _clear_progress(self) -> None:
        if self.spinning:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.spinning = False

    async def _progress(self) -> None:
        """A spinner on stderr while the model works, drawn only at the start of a line
        (never over streamed text)."""
        if not sys.stderr.isatty():
            return
        for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
            if self.r.kind is None:
                sys.stderr.write(f"\r{frame} working…")
                sys.stderr.flush()
                self.spinning = True
            await asyncio.sleep(0.1)

    async def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        spinner = asyncio.create_task(self._progress())
        try:
            result = await self.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
            )
        finally:
            spinner.cancel()
            self._clear_progress()
        self.r.finish(result)
        return result

    async def cancel(self, session_id: str) -> None:
        self._send({"method": "session/cancel", "params": {"sessionId": session_id}})

    async def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = await self.proc.wait()
        await self.reader
        return code


async def run_human(agent_args: list[str], prompt: str | None, *, yes: bool, cwd: str) -> int:
    """``prompt`` runs one turn; ``None`` starts an interactive chat."""
    client = HumanClient(agent_args, Renderer(sys.stdout), yes=yes)
    await client.start()
    await client.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": {"readTextFile": False, "writeTextFile": False},
                "terminal": False,
            },
            "clientInfo": {"name": "acp-agent-human", "version": "1"},
        },
    )
    session = await client.request("session/new", {"cwd": cwd, "mcpServers": []})
    sid = session["sessionId"]
    code = 0
    try:
        if prompt is not None:
            result = await _prompt_with_ctrl_c(client, sid, prompt)
            code = 0 if result.get("stopReason") in ("end_turn", "cancelled") else 1
        else:
            sys.stderr.write("acp-agent chat — Ctrl-D to quit, Ctrl-C cancels a turn\n")
            while True:
                sys.stdout.write(client.r.s.bold("> "))
                sys.stdout.flush()
                line = await asyncio.to_thread(sys.stdin.readline)
                if not line:
                    break
                if line.strip():
                    await _prompt_with_ctrl_c(client, sid, line.strip())
    except RuntimeError as exc:
        sys.stderr.write(f"acp-agent: {exc}\n")
        code = 1
    finally:
        await client.close()
    return code


async def _prompt_with_ctrl_c(client: HumanClient, sid: str, text: str) -> dict[str, Any]:
    """Ctrl-C during a turn sends session/cancel instead of killing the process."""
    import signal

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, lambda: asyncio.ensure_future(client.cancel(sid)))
    try:
        return await client.prompt(sid, text)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
