"""The offline built-in model: no key, no network.

Two ways to drive it:

* **Demo** (default): a small rule-based model that makes the agent useful to try. It
  thinks, publishes a plan, calls tools through the real machinery (a command that
  asks for permission, file reads, listings) and streams an answer about the results.
  ``run <command>``, ``read <path>``, ``list [path]`` and ``write <path> <text>`` pick a
  tool; anything else runs the guided demo.
* **Script**: a JSON file (config ``offline-script`` / ``ACP_AGENT_OFFLINE_SCRIPT``) holding
  a list of responses, consumed one per model request; this is the scripted model for
  tests. Each response is a list of steps::

      {"text": "..."}            streamed in word-sized chunks
      {"thinking": "..."}        streamed as thought chunks
      {"tool_call": {"name": "read_file", "arguments": {...}, "id": "optional"}}
      {"usage": {"input_tokens": 10, "output_tokens": 5}}
      {"sleep": 0.5}             pause (cancellation tests)
      {"mark": "/tmp/x"}         create that file now (tests wait for it)
      {"hang": true}             never finish (the turn must still end on cancel)
      {"error": {"status": 429, "retry_after": 0.1, "message": "..."}}
      {"disconnect": true}       the stream breaks here
      {"finish": "stop" | "length" | "refusal" | "tool_calls"}

  Without a ``finish`` step the reason is ``tool_calls`` if the response called a tool,
  else ``stop``. When the script runs out the model says so and stops.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import shlex
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec

from ..conversation import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
    estimate_tokens,
)
from ..errors import ProviderAuthError, ProviderHTTPError, ProviderStreamError
from .base import (
    Finished,
    FinishReason,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallReady,
    ToolCallStarted,
    UsageReport,
)

_WORDS = re.compile(r"\S+\s*|\s+")
ARGUMENT_PIECE = 24  # characters of a tool call's argument JSON per ToolCallDelta

#: The keys a script step may have (one each; see the module's docstring).
STEP_KEYS = frozenset(
    ("text", "thinking", "tool_call", "usage", "sleep", "mark", "hang", "error", "disconnect",
     "finish")
)  # fmt: skip


class ScriptError(ValueError):
    """An offline script that cannot be played; the message says where and why."""


def load_script(path: str) -> list[list[dict[str, Any]]]:
    """The responses of the script at ``path``, checked step by step."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ScriptError(f"cannot read {path}: {exc.strerror}") from None
    try:
        script = msgspec.json.decode(data, type=list[list[dict[str, Any]]])
    except msgspec.ValidationError as exc:
        where = _where(str(exc))
        raise ScriptError(
            f"{path}: {where}: a script is a list of responses, each a list of steps, e.g."
            ' [[{"text": "Hello"}], [{"tool_call": {"name": "read_file", "arguments": {...}}}]]'
        ) from None
    except msgspec.DecodeError as exc:
        raise ScriptError(f"{path}: not valid JSON: {exc}") from None
    for i, response in enumerate(script):
        for j, step in enumerate(response):
            unknown = sorted(set(step) - STEP_KEYS)
            if unknown:
                raise ScriptError(
                    f"{path}: response {i + 1}, step {j + 1}: unknown key {unknown[0]!r} "
                    f"(one of {', '.join(sorted(STEP_KEYS))})"
                )
            call = step.get("tool_call")
            if "tool_call" in step and not (isinstance(call, dict) and "name" in call):
                raise ScriptError(
                    f"{path}: response {i + 1}, step {j + 1}: `tool_call` needs a `name`"
                )
    return script


def _where(message: str) -> str:
    """msgspec's "Expected `array`, got `object` - at `$[0]`" in the script's terms."""
    what, _, at = message.partition(" - at ")
    kinds = {"array": "a list", "object": "an object ({...})", "str": "a string",
             "int": "a number", "null": "null", "bool": "true or false", "float": "a number"}
    found = re.match(r"Expected `(\w+)`, got `(\w+)`", what)
    if found:
        want, got = (kinds.get(k, k) for k in found.groups())
        what = f"{got} where {want} belongs"
    indexes = [int(i) + 1 for i in re.findall(r"\[(\d+)\]", at)]
    names = ("response", "step")
    place = ", ".join(f"{name} {i}" for name, i in zip(names, indexes, strict=False))
    return f"{place}: {what}" if place else f"the whole script is {what.split(' where ')[0]}"


def chunk_words(text: str, per_chunk: int = 2) -> Iterator[str]:
    """Split text into small chunks of a few words (keeping whitespace)."""
    batch: list[str] = []
    for match in _WORDS.finditer(text):  # lazily: a huge text must not block the loop
        batch.append(match.group())
        if len(batch) == per_chunk:
            yield "".join(batch)
            batch.clear()
    if batch:
        yield "".join(batch)


class OfflineProvider:
    def __init__(
        self, script: list[list[dict[str, Any]]] | None = None, *, delay: float = 0.0
    ) -> None:
        self._script = list(script) if script is not None else None
        self._delay = delay
        self._ids = itertools.count(1)

    @classmethod
    def from_file(cls, path: str) -> OfflineProvider:
        return cls(load_script(path))

    @property
    def name(self) -> str:
        return "offline"

    @property
    def endpoint(self) -> str:
        return "the offline model"

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        steps = self._next_steps(request)
        out_chars = 0
        called = False
        finish: FinishReason | None = None
        usage: UsageReport | None = None
        for step in steps:
            if "text" in step or "thinking" in step:
                is_text = "text" in step
                for piece in chunk_words(str(step["text" if is_text else "thinking"])):
                    if self._delay:
                        await asyncio.sleep(self._delay)
                    out_chars += len(piece)
                    yield TextDelta(piece) if is_text else ThinkingDelta(piece)
            elif "tool_call" in step:
                call = step["tool_call"]
                call_id = str(call.get("id") or f"offline_{next(self._ids)}")
                arguments = dict(call.get("arguments", {}))
                yield ToolCallStarted(call_id, str(call["name"]))
                text = json.dumps(arguments)  # written piece by piece, as a model does
                for start in range(0, len(text), ARGUMENT_PIECE):
                    yield ToolCallDelta(call_id, text[start : start + ARGUMENT_PIECE])
                yield ToolCallReady(call_id, str(call["name"]), arguments)
                called = True
            elif "usage" in step:
                usage = msgspec.convert(step["usage"], UsageReport)
            elif "mark" in step:
                with open(str(step["mark"]), "w"):
                    pass
            elif "sleep" in step:
                await asyncio.sleep(float(step["sleep"]))
            elif step.get("hang"):
                await asyncio.Event().wait()
            elif "error" in step:
                err = step["error"]
                if int(err.get("status", 500)) in (401, 403):
                    raise ProviderAuthError(str(err.get("message", "rejected key")), err["status"])
                raise ProviderHTTPError(
                    str(err.get("message", "scripted error")),
                    int(err.get("status", 500)),
                    retry_after=err.get("retry_after"),
                )
            elif step.get("disconnect"):
                raise ProviderStreamError("scripted disconnect")
            elif "finish" in step:
                finish = step["finish"]
        yield usage or UsageReport(
            input_tokens=estimate_tokens(request.messages, request.system),
            output_tokens=max(1, out_chars // 4),
        )
        yield Finished(finish or ("tool_calls" if called else "stop"))

    # ------------------------------------------------------------------ behaviour

    def _next_steps(self, request: ModelRequest) -> list[dict[str, Any]]:
        if self._script is not None:
            if self._script:
                return self._script.pop(0)
            return [{"text": "The offline script has no more responses."}]
        return demo_steps(request)


# ---------------------------------------------------------------------- the demo model


def _last_user_text(messages: list[Message]) -> str:
    """The user's own words in the last prompt (the agent's ``<system-reminder>`` notes
    that may come before them are not the user's)."""
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            texts = [p.text for p in m.parts if isinstance(p, TextPart)
                     and not p.text.startswith("<system-reminder>")]  # fmt: skip
            return " ".join(texts).strip()
    return ""


def _turn_results(messages: list[Message]) -> list[ToolResultMessage]:
    """Tool results since the last user message."""
    out: list[ToolResultMessage] = []
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            break
        if isinstance(m, ToolResultMessage):
            out.append(m)
    return out[::-1]


def _calls_made(messages: list[Message]) -> list[str]:
    names: list[str] = []
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            break
        if isinstance(m, AssistantMessage):
            names[:0] = [p.name for p in m.parts if isinstance(p, ToolCallPart)]
    return names


def _result_text(result: ToolResultMessage, limit: int = 12) -> str:
    text = "\n".join(p.text for p in result.parts if isinstance(p, TextPart)).strip()
    lines = text.splitlines()
    shown = "\n".join(lines[:limit])
    more = f"\n… ({len(lines) - limit} more lines)" if len(lines) > limit else ""
    return shown + more


def _intent(text: str) -> tuple[str, dict[str, Any]] | None:
    lowered = text.lower()
    first, _, rest = text.partition(" ")
    word = first.lower()
    rest = rest.strip()
    if word == "run" and rest:
        return "run_command", {"command": rest.strip("`")}
    if word == "read" and rest:
        return "read_file", {"path": shlex.split(rest)[0] if rest else rest}
    if word in ("list", "ls"):
        return "list_directory", {"path": rest or "."}
    if word == "write" and rest:
        path, _, content = rest.partition(" ")
        return "write_file", {"path": path, "content": (content or "Written by acp-agent.") + "\n"}
    if lowered.startswith(("hi", "hello", "hey")) and len(lowered) < 20:
        return None
    return "demo", {}


DEMO_PLAN = [
    {"content": "Understand the request", "priority": "high", "status": "completed"},
    {"content": "Look at the workspace", "priority": "medium", "status": "in_progress"},
    {"content": "Answer with what was found", "priority": "low", "status": "pending"},
]
DEMO_PLAN_DONE = [dict(e, status="completed") for e in DEMO_PLAN]


def demo_steps(request: ModelRequest) -> list[dict[str, Any]]:
    tools = {t.name for t in request.tools}
    text = _last_user_text(request.messages)
    results = _turn_results(request.messages)
    made = _calls_made(request.messages)
    intent = _intent(text)

    if intent is None:
        return [{"text": GREETING}]
    name, args = intent
    if name != "demo":
        if not results:
            if name not in tools:
                return [{"text": f"I would use `{name}`, but it is not available right now."}]
            return [
                {"thinking": f"The user asked me to use {name}. I'll do that."},
                {"tool_call": {"name": name, "arguments": args}},
            ]
        return [{"text": _report(results[-1])}]

    # The guided demo: plan -> command (asks permission) -> plan done -> answer.
    if not made:
        steps: list[dict[str, Any]] = [
            {
                "thinking": f"The user wrote: {text[:200]!r}. I'm the offline model, so I'll show "
                "what an agent turn looks like: a plan, a tool call, and an answer."
            },
            {
                "text": "I'm running on the **offline built-in model** (no key, no network). "
                "Let me show you a real turn.\n\n"
            },
        ]
        if "update_plan" in tools:
            steps.append(
                {"tool_call": {"name": "update_plan", "arguments": {"entries": DEMO_PLAN}}}
            )
        elif "run_command" in tools:
            steps.append({"tool_call": {"name": "run_command", "arguments": {"command": "ls"}}})
        return steps
    if made[-1] == "update_plan" and "run_command" in tools and "run_command" not in made:
        return [{"tool_call": {"name": "run_command", "arguments": {"command": "ls"}}}]
    if made[-1] == "run_command" and "update_plan" in tools:
        return [
            {"text": _report(results[-1]) + "\n\n"},
            {"tool_call": {"name": "update_plan", "arguments": {"entries": DEMO_PLAN_DONE}}},
        ]
    return [{"text": CLOSING}]


def _report(result: ToolResultMessage) -> str:
    """What the demo says of its tool call: not the output again (the call shows it)."""
    body = _result_text(result)
    if result.is_error:
        return f"`{result.name}` did not run (the call above says why), so I'll leave it there."
    if not body:
        return f"`{result.name}` finished with no output."
    return f"`{result.name}` worked; its output is shown above."


GREETING = (
    "Hello! I'm acp-agent on its offline built-in model. Try `run <command>`, "
    "`read <path>`, `list [path]`, `write <path> <text>`, or ask anything for a guided demo. "
    "Configure `--model openai:<model>` or `--model anthropic:<model>` for a real model."
)
CLOSING = (
    "That was a complete agent turn: a plan, a tool call that asked for your permission, "
    "and this answer. Configure a real model with `--model openai:<model>` or "
    "`--model anthropic:<model>`."
)
