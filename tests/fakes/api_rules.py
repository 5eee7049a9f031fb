"""What the real APIs reject, enforced by the fake server (a lenient fake proves nothing).

For a request body, :func:`violation` returns the vendor's own error response, or
``None``. Checked: every tool call answered by its result right after it (and no result
without its call); Anthropic's first message from the user, the results first in the
message after the calls (text the user adds comes after them), and ``tools`` defined
whenever tool blocks are in the history; and the context window, in each vendor's own format
(OpenAI ``context_length_exceeded``, Anthropic ``prompt is too long``). Tokens are counted
as the agent estimates them: about four characters of JSON a token.
"""

from __future__ import annotations

import json
from typing import Any


def count_tokens(body: dict[str, Any]) -> int:
    parts = [body.get("system"), body.get("messages"), body.get("tools")]
    return len(json.dumps([p for p in parts if p], separators=(",", ":"))) // 4


def _openai(status: int, message: str, code: str | None, param: str | None = None) -> Any:
    from .llm_server import HttpError

    body = {"error": {"message": message, "type": "invalid_request_error",
                      "param": param, "code": code}}  # fmt: skip
    return HttpError(status, body, {"x-request-id": "req_fake"})


def _anthropic(message: str) -> Any:
    from .llm_server import HttpError

    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return HttpError(400, body, {"request-id": "req_fake"})


def violation(vendor: str, body: Any, window: int | None) -> Any:
    if not isinstance(body, dict):
        return None
    if vendor == "openai":
        return _openai_rules(body, window)
    if vendor == "anthropic":
        return _anthropic_rules(body, window)
    return None


def _openai_rules(body: dict[str, Any], window: int | None) -> Any:
    messages = body.get("messages") or []
    pending: list[str] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                return _openai(400, "Invalid parameter: messages with role 'tool' must be a "
                               "response to a preceeding message with 'tool_calls'.",
                               None, f"messages.[{i}].role")  # fmt: skip
            pending.remove(m["tool_call_id"])
            continue
        if pending:
            return _openai(400, "An assistant message with 'tool_calls' must be followed by tool "
                           "messages responding to each 'tool_call_id'. The following "
                           f"tool_call_ids did not have response messages: {', '.join(pending)}",
                           None, "messages")  # fmt: skip
        if role == "assistant":
            pending = [c["id"] for c in m.get("tool_calls") or []]
    if pending:
        return _openai(400, "An assistant message with 'tool_calls' must be followed by tool "
                       f"messages responding to each 'tool_call_id': {', '.join(pending)}",
                       None, "messages")  # fmt: skip
    used = count_tokens(body)
    if window is not None and used + int(body.get("max_completion_tokens") or
                                         body.get("max_tokens") or 0) > window:  # fmt: skip
        return _openai(400, f"This model's maximum context length is {window} tokens. However, "
                       f"your messages resulted in {used} tokens. Please reduce the length of "
                       "the messages.", "context_length_exceeded", "messages")  # fmt: skip
    return None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _anthropic_rules(body: dict[str, Any], window: int | None) -> Any:
    messages = body.get("messages") or []
    if messages and messages[0].get("role") != "user":
        return _anthropic("messages: first message must use the \"user\" role")
    has_tool_blocks = False
    for i, m in enumerate(messages):
        uses = [b["id"] for b in _blocks(m) if b.get("type") == "tool_use"]
        results = [b.get("tool_use_id") for b in _blocks(m) if b.get("type") == "tool_result"]
        has_tool_blocks = has_tool_blocks or bool(uses or results)
        if m.get("role") == "assistant" and uses:
            after = messages[i + 1] if i + 1 < len(messages) else None
            answered = {b.get("tool_use_id") for b in _blocks(after or {})
                        if b.get("type") == "tool_result"}  # fmt: skip
            missing = [u for u in uses if u not in answered]
            leading = _blocks(after or {})[: len(uses)]
            if not missing and any(b.get("type") != "tool_result" for b in leading):
                return _anthropic(
                    f"messages.{i + 1}: Did not find {len(uses)} `tool_result` block(s) at the "
                    "beginning of this message. Messages following `tool_use` blocks must begin "
                    "with a matching number of `tool_result` blocks."
                )
            if missing and after is not None:
                return _anthropic(
                    f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
            if missing:
                return _anthropic(f"messages.{i}: `tool_use` ids without `tool_result`: "
                                  f"{', '.join(missing)}")  # fmt: skip
        if m.get("role") == "user" and results:
            before = messages[i - 1] if i else {}
            asked = {b.get("id") for b in _blocks(before) if b.get("type") == "tool_use"}
            stray = [r for r in results if r not in asked]
            if stray:
                return _anthropic(
                    f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {', '.join(map(str, stray))}. Each `tool_result` block must have "
                    "a corresponding `tool_use` block in the previous message."
                )
    if has_tool_blocks and not body.get("tools"):
        return _anthropic("Requests which include `tool_use` or `tool_result` blocks must "
                          "define tools.")  # fmt: skip
    used = count_tokens(body)
    if window is not None and used > window:
        return _anthropic(f"prompt is too long: {used} tokens > {window} maximum")
    return None
