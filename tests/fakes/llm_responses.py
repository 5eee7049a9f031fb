"""The fake server's OpenAI Responses API: what it remembers and what it refuses.

A fake is only as honest as the rules it enforces. :func:`check` refuses a request as
api.openai.com does, with its error shapes (HTTP 400 ``invalid_request_error``, 404 for
items it cannot find), for everything the agent builds:

* parameters: unknown ones (``messages``, ``stream_options``... of Chat Completions),
  ``max_output_tokens`` below 16, a ``reasoning`` or ``include`` of encrypted reasoning for a
  model that does not reason, ``tools`` in the Chat Completions shape, strict tools whose
  schema is not strict, custom tools without a name or with a ``format`` other than
  ``text`` or a ``grammar`` (``lark`` or ``regex``, with its ``definition``),
  ``previous_response_id`` with nothing stored;
* input items: an unknown type or role, input parts in an assistant message, a reasoning
  item without ``summary``, whose encrypted content this server never issued, or that is
  referenced only by id while nothing is stored (``store: false``: 404 "Item with id ... not
  found"), a reasoning item not followed by the message or call of its answer, an item whose
  id was issued right after a reasoning item but arrives without it (and the reverse), a
  ``function_call_output`` without its ``function_call`` earlier (likewise a
  ``custom_tool_call_output`` without its ``custom_tool_call``), a call without its output
  later, calls without any ``tools``, ``item_reference`` items (nothing is stored).

Beyond the real API's observed errors, three rules are the project's own reading of it: a
reasoning item sent without id must still be followed by an output item, calls in the
input require ``tools``, and custom tools are for the models that take them (GPT-5 and
codex).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from typing import Any

_REASONING_MODEL = re.compile(r"^(o\d|gpt-5(?!.*-chat)|codex-)")
_PARAMS = {
    "background", "context_management", "conversation", "include", "input", "instructions",
    "max_output_tokens", "max_tool_calls", "metadata", "model", "parallel_tool_calls",
    "previous_response_id", "prompt", "prompt_cache_key", "prompt_cache_retention",
    "reasoning", "safety_identifier", "service_tier", "store", "stream", "stream_options",
    "temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user",
}  # fmt: skip
_INCLUDES = {
    "file_search_call.results", "message.input_image.image_url",
    "computer_call_output.output.image_url", "reasoning.encrypted_content",
    "code_interpreter_call.outputs", "message.output_text.logprobs", "web_search_call.results",
}  # fmt: skip
_EFFORTS = {"none", "minimal", "low", "medium", "high", "xhigh"}
_ROLES = {"user", "system", "developer", "assistant"}
_INPUT_PARTS = {"input_text", "input_image", "input_file"}
_OUTPUT_PARTS = {"output_text", "refusal"}
_ITEM_TYPES = {"message", "reasoning", "function_call", "function_call_output", "item_reference",
               "custom_tool_call", "custom_tool_call_output"}
_CUSTOM_MODEL = re.compile(r"^(gpt-5(?!.*-chat)|codex-)")


class ResponsesState:
    """What the fake remembers across requests: the ids it issued, the encrypted content of
    its reasoning items, and which item came right after which reasoning item."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.sealed: dict[str, str] = {}  # encrypted content -> reasoning item id
        self.follower: dict[str, str] = {}  # reasoning id -> the item right after it
        self.leader: dict[str, str] = {}  # that item's id -> the reasoning id

    def issuer(self, body: Any) -> _Issuer:
        include = body.get("include") if isinstance(body, dict) else None
        tools = body.get("tools") if isinstance(body, dict) else None
        custom = {t.get("name") for t in tools or [] if t.get("type") == "custom"}
        return _Issuer(self, "reasoning.encrypted_content" in (include or ()), custom)


class _Issuer:
    def __init__(self, state: ResponsesState, encrypt: bool, custom: set[str]) -> None:
        self.state = state
        self.encrypt = encrypt
        self.custom = custom

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self.state._ids):06d}fake"

    def seal(self, reasoning_id: str) -> str | None:
        if not self.encrypt:
            return None
        digest = hashlib.sha256(f"fake-secret:{reasoning_id}".encode()).hexdigest()
        sealed = f"gAAAAB{digest}{reasoning_id}"
        self.state.sealed[sealed] = reasoning_id
        return sealed

    def followed(self, reasoning_id: str, item_id: str) -> None:
        self.state.follower[reasoning_id] = item_id
        self.state.leader[item_id] = reasoning_id


class _Refused(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 code: str | None = None) -> None:  # fmt: skip
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": "invalid_request_error",
                               "param": param, "code": code}}  # fmt: skip


def check(body: Any, state: ResponsesState) -> tuple[int, dict[str, Any]] | None:
    """``None`` when api.openai.com would take ``body``; else its error (status, body)."""
    try:
        _check(body, state)
    except _Refused as refused:
        return refused.status, refused.body
    return None


def _check(body: Any, state: ResponsesState) -> None:
    if not isinstance(body, dict):
        raise _Refused("The request body is not valid JSON.")
    for name in ("model", "input"):
        if name not in body:
            raise _Refused(
                f"Missing required parameter: '{name}'.", name, code="missing_required_parameter"
            )
    for name in body:
        if name not in _PARAMS:
            raise _Refused(f"Unknown parameter: '{name}'.", name, code="unknown_parameter")
    if body.get("stream") is not True:
        raise _Refused("This fake only streams: set stream to true.", "stream")
    model = str(body["model"])
    reasons = _REASONING_MODEL.match(model) is not None
    limit = body.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or limit < 16):
        raise _Refused(f"Invalid 'max_output_tokens': integer below minimum value. Expected a "
                       f"value >= 16, but got {limit} instead.", "max_output_tokens",
                       code="integer_below_min_value")  # fmt: skip
    _check_reasoning(body, reasons)
    if body.get("previous_response_id") is not None and body.get("store") is False:
        raise _Refused(f"Previous response with id '{body['previous_response_id']}' not found.",
                       "previous_response_id", 404)  # fmt: skip
    tools = body.get("tools") or []
    for i, tool in enumerate(tools):
        _check_tool(i, tool)
        if isinstance(tool, dict) and tool.get("type") == "custom" and not _CUSTOM_MODEL.match(
                model):  # fmt: skip
            raise _Refused(f"Custom tools are not supported with the model '{model}'.",
                           f"tools[{i}].type", code="unsupported_value")  # fmt: skip
    if body.get("tool_choice", "auto") not in ("auto", "none", "required") and not isinstance(
        body.get("tool_choice"), dict
    ):
        raise _Refused(f"Invalid value: '{body['tool_choice']}'.", "tool_choice")
    if isinstance(body["input"], list):
        _check_items(body["input"], bool(tools), body.get("store", True) is False, state)
    elif not isinstance(body["input"], str):
        raise _Refused("Invalid type for 'input': expected a string or an array.", "input")


def _check_reasoning(body: dict[str, Any], reasons: bool) -> None:
    reasoning = body.get("reasoning")
    if reasoning is not None:
        if not reasons:
            message = "Unsupported parameter: 'reasoning.effort' is not supported with this model."
            raise _Refused(message, "reasoning.effort", code="unsupported_parameter")
        if reasoning.get("effort") not in (None, *_EFFORTS):
            raise _Refused(f"Invalid value: '{reasoning['effort']}'.", "reasoning.effort")
        if reasoning.get("summary") not in (None, "auto", "concise", "detailed"):
            raise _Refused(f"Invalid value: '{reasoning['summary']}'.", "reasoning.summary")
    for value in body.get("include") or []:
        if value not in _INCLUDES:
            raise _Refused(f"Invalid value: '{value}'.", "include")
        if value == "reasoning.encrypted_content" and not reasons:
            raise _Refused("Encrypted content is not supported with this model.", "include")


def _check_tool(i: int, tool: Any) -> None:
    where = f"tools[{i}]"
    if isinstance(tool, dict) and tool.get("type") == "custom":
        _check_custom(where, tool)
        return
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise _Refused(f"Invalid value for '{where}.type'.", f"{where}.type")
    for name in ("name", "parameters"):
        if name not in tool:  # e.g. the Chat Completions shape, {"function": {...}}
            raise _Refused(f"Missing required parameter: '{where}.{name}'.", f"{where}.{name}",
                           code="missing_required_parameter")  # fmt: skip
    if tool.get("strict", True) is not False and not _strict_schema(tool["parameters"]):
        raise _Refused(f"Invalid schema for function '{tool['name']}': In context=(), "
                       "'additionalProperties' is required to be supplied and to be false.",
                       f"{where}.parameters", code="invalid_function_parameters")  # fmt: skip


def _check_custom(where: str, tool: dict[str, Any]) -> None:
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise _Refused(f"Missing required parameter: '{where}.name'.", f"{where}.name",
                       code="missing_required_parameter")  # fmt: skip
    allowed = {"type", "name", "description", "format"}
    for key in tool:
        if key not in allowed:
            raise _Refused(f"Unknown parameter: '{where}.{key}'.", f"{where}.{key}",
                           code="unknown_parameter")  # fmt: skip
    fmt = tool.get("format", {"type": "text"})
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return
    if kind != "grammar":
        raise _Refused(f"Invalid value: '{kind}'. Supported values are: 'text' and 'grammar'.",
                       f"{where}.format.type", code="invalid_value")  # fmt: skip
    if fmt.get("syntax") not in ("lark", "regex"):
        raise _Refused(f"Invalid value: '{fmt.get('syntax')}'. Supported values are: 'lark' "
                       "and 'regex'.", f"{where}.format.syntax", code="invalid_value")  # fmt: skip
    if not isinstance(fmt.get("definition"), str) or not fmt["definition"].strip():
        raise _Refused(f"Missing required parameter: '{where}.format.definition'.",
                       f"{where}.format.definition", code="missing_required_parameter")  # fmt: skip


def _strict_schema(schema: Any) -> bool:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return True
    properties = schema.get("properties", {})
    return (
        schema.get("additionalProperties") is False
        and set(schema.get("required", [])) == set(properties)
        and all(_strict_schema(p) for p in properties.values())
    )


def _kind(item: dict[str, Any]) -> str:
    return str(item.get("type") or ("message" if "role" in item else ""))


def _is_output(item: Any) -> bool:
    return isinstance(item, dict) and (
        _kind(item) in ("function_call", "custom_tool_call")
        or (_kind(item) == "message" and item.get("role") == "assistant")
    )


def _check_items(items: list[Any], has_tools: bool, stateless: bool, state: ResponsesState) -> None:
    calls: set[str] = set()
    custom: set[str] = set()
    outputs: set[str] = set()
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict) or _kind(item) not in _ITEM_TYPES:
            kind = _kind(item) if isinstance(item, dict) else type(item).__name__
            raise _Refused(f"Invalid value: '{kind}'. Supported values are: "
                           f"{', '.join(sorted(_ITEM_TYPES))}.", f"{where}.type")  # fmt: skip
        kind = _kind(item)
        if kind == "message":
            _check_message(where, item)
        elif kind == "reasoning":
            _check_reasoning_item(where, items, i, stateless, state)
        elif kind in ("function_call", "custom_tool_call"):
            text = "arguments" if kind == "function_call" else "input"
            for name in ("call_id", "name", text):
                if not isinstance(item.get(name), str):
                    raise _Refused(
                        f"Missing required parameter: '{where}.{name}'.", f"{where}.{name}"
                    )
            calls.add(item["call_id"])
            if kind == "custom_tool_call":
                custom.add(item["call_id"])
        elif kind in ("function_call_output", "custom_tool_call_output"):
            wanted = "custom tool call" if kind == "custom_tool_call_output" else "tool call"
            if item.get("call_id") not in calls or (
                    (item.get("call_id") in custom) != (kind == "custom_tool_call_output")):
                raise _Refused(f"No {wanted} found for {kind.replace('_', ' ')} with call_id "
                               f"{item.get('call_id')}.", "input")  # fmt: skip
            _check_output(where, item.get("output"))
            outputs.add(item["call_id"])
        else:  # item_reference
            raise _Refused(f"Item with id '{item.get('id')}' not found.", "input", 404)
        leader = state.leader.get(str(item.get("id")))
        if leader is not None:
            before = items[i - 1] if i else None
            if not isinstance(before, dict) or before.get("id") != leader:
                raise _Refused(f"Item '{item['id']}' of type '{kind}' was provided without its "
                               f"required 'reasoning' item: '{leader}'.", "input")  # fmt: skip
    missing = sorted(calls - outputs)
    if missing:
        raise _Refused(f"No tool output found for function call {missing[0]}.", "input")
    if calls and not has_tools:
        raise _Refused("Function calls in the input require `tools` to declare them.", "tools")


def _check_message(where: str, item: dict[str, Any]) -> None:
    role = item.get("role")
    if role not in _ROLES:
        raise _Refused(f"Invalid value: '{role}'.", f"{where}.role")
    content = item.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _Refused(f"Invalid type for '{where}.content'.", f"{where}.content")
    allowed = _OUTPUT_PARTS if role == "assistant" else _INPUT_PARTS
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            raise _Refused(f"Invalid value: '{kind}'. Supported values are: "
                           f"{' and '.join(repr(a) for a in sorted(allowed))}.",
                           f"{where}.content[{j}].type", code="invalid_value")  # fmt: skip
        if kind == "input_image" and not (part.get("image_url") or part.get("file_id")):
            raise _Refused(f"Missing required parameter: '{where}.content[{j}].image_url'.")


def _check_output(where: str, output: Any) -> None:
    if isinstance(output, str):
        return
    if not isinstance(output, list) or not all(
        isinstance(p, dict) and p.get("type") in _INPUT_PARTS for p in output
    ):
        raise _Refused(f"Invalid type for '{where}.output': expected a string or an array of "
                       "input_text, input_image or input_file.", f"{where}.output")  # fmt: skip


def _check_reasoning_item(
    where: str, items: list[Any], i: int, stateless: bool, state: ResponsesState
) -> None:
    item = items[i]
    if not isinstance(item.get("summary"), list):
        raise _Refused(f"Missing required parameter: '{where}.summary'.", f"{where}.summary")
    sealed = item.get("encrypted_content")
    ident = item.get("id")
    if sealed is None:
        if ident is None:
            raise _Refused(f"Missing required parameter: '{where}.encrypted_content'.",
                           f"{where}.encrypted_content")  # fmt: skip
        if stateless or ident not in state.follower:
            raise _Refused(f"Item with id '{ident}' not found. Items are not persisted when "
                           "`store` is set to false. Try again with `store` set to true, or "
                           "remove this item from your input.", "input", 404)  # fmt: skip
    elif sealed not in state.sealed or (ident is not None and state.sealed[sealed] != ident):
        raise _Refused(f"The encrypted content for item {ident or where} could not be verified.",
                       "input", code="invalid_encrypted_content")  # fmt: skip
    label = f"Item '{ident or where}' of type 'reasoning' was provided without its required " \
            "following item."  # fmt: skip
    following = next(
        (x for x in items[i + 1 :] if not (isinstance(x, dict) and _kind(x) == "reasoning")), None
    )
    if not _is_output(following):
        raise _Refused(label, "input")
    if ident is not None:
        expected = state.follower.get(ident)
        nxt = items[i + 1] if i + 1 < len(items) else None
        if expected is not None and (not isinstance(nxt, dict) or nxt.get("id") != expected):
            raise _Refused(label, "input")
