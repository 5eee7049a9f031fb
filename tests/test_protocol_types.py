"""Tests of the generated ACP wire types (``acp_agent/protocol/types.py``) and their generator."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types as pytypes
import typing
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from msgspec import UNSET, UnsetType

from acp_agent.protocol import Wire
from acp_agent.protocol import types as t

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "acp_agent" / "protocol" / "types.py"


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_protocol", ROOT / "tools" / "gen_protocol.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_protocol"] = module
    spec.loader.exec_module(module)
    return module


gen = _load_generator()
SCHEMA: dict[str, Any] = json.loads(gen.default_schema_path().read_text(encoding="utf-8"))
DEFS: dict[str, Any] = SCHEMA["$defs"]
MODEL = gen.build_model(SCHEMA)


@cache
def _validator(def_name: str, strict: bool) -> jsonschema.Draft202012Validator:
    root: dict[str, Any] = {"$defs": DEFS, "$ref": f"#/$defs/{def_name}"}
    if strict:
        # Top-level keys must all be declared (through $ref/allOf/anyOf/oneOf); `_meta` is
        # allowed on every type.
        root["properties"] = {"_meta": {"type": ["object", "null"]}}
        root["unevaluatedProperties"] = False
    return jsonschema.Draft202012Validator(root)


def validate(instance: Any, def_name: str, strict: bool = False) -> None:
    errors = sorted(_validator(def_name, strict).iter_errors(instance), key=str)
    assert not errors, f"{def_name}: {[e.message for e in errors[:3]]} in {instance}"


def roundtrip(data: dict[str, Any], tp: Any) -> Any:
    """Decode ``data`` as ``tp``, re-encode it, and check the JSON is unchanged."""
    obj = msgspec.json.Decoder(tp).decode(json.dumps(data).encode())
    assert json.loads(msgspec.json.encode(obj)) == data
    return obj


# --------------------------------------------------------------------------- tables


def _decoded_types() -> list[tuple[str, Any]]:
    out = [(f"agent {m} params", p) for m, (p, _) in t.AGENT_METHODS.items()]
    out += [(f"client {m} result", r) for m, (_, r) in t.CLIENT_METHODS.items() if r]
    out += [(f"protocol {m} params", p) for m, (p, _) in t.PROTOCOL_METHODS.items()]
    out.append(("session/update (history)", t.SessionNotification))
    return out


@pytest.mark.parametrize(("label", "tp"), _decoded_types(), ids=lambda x: str(x))
def test_inbound_types_are_decodable(label: str, tp: Any) -> None:
    msgspec.json.Decoder(tp)


def test_method_tables_cover_the_schema() -> None:
    sides: dict[str, set[str]] = {}
    for d in DEFS.values():
        if "x-method" in d:
            sides.setdefault(d["x-side"], set()).add(d["x-method"])
    assert set(t.AGENT_METHODS) == sides["agent"]
    assert set(t.CLIENT_METHODS) == sides["client"]
    assert set(t.PROTOCOL_METHODS) == sides["protocol"] == {"$/cancel_request"}
    assert t.AGENT_METHODS["session/cancel"] == (t.CancelNotification, None)
    assert t.AGENT_METHODS["mcp/message"] == (t.MessageMcpNotification, None)
    assert t.AGENT_METHODS["session/prompt"] == (t.PromptRequest, t.PromptResponse)
    assert t.CLIENT_METHODS["session/update"] == (t.SessionNotification, None)
    assert t.CLIENT_METHODS["session/request_permission"] == (
        t.RequestPermissionRequest,
        t.RequestPermissionResponse,
    )
    assert not any(m.startswith("proxy/") for m in (*t.AGENT_METHODS, *t.CLIENT_METHODS))


def test_error_codes() -> None:
    codes = {
        "PARSE_ERROR": -32700,
        "INVALID_REQUEST": -32600,
        "METHOD_NOT_FOUND": -32601,
        "INVALID_PARAMS": -32602,
        "INTERNAL_ERROR": -32603,
        "REQUEST_CANCELLED": -32800,
        "AUTHENTICATION_REQUIRED": -32000,
        "RESOURCE_NOT_FOUND": -32002,
    }
    assert {name: getattr(t, name) for name in codes} == codes
    schema_codes = {b["const"] for b in DEFS["ErrorCode"]["anyOf"] if "const" in b}
    assert set(codes.values()) == schema_codes


def test_open_enums_have_value_tuples() -> None:
    assert t.NOTICE_SEVERITY_VALUES == ("info", "warning", "error")
    assert t.SESSION_CONFIG_OPTION_CATEGORY_VALUES == (
        "mode",
        "model",
        "model_config",
        "thought_level",
    )
    assert t.NoticeSeverity is str
    assert typing.get_args(t.StopReason) == (
        "end_turn",
        "max_tokens",
        "max_turn_requests",
        "refusal",
        "cancelled",
    )


# --------------------------------------------------------------------------- session/update

SESSION_UPDATES: list[tuple[str, dict[str, Any]]] = [
    (
        "UserMessageChunk",
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "Fix the bug"},
            "messageId": "m1",
        },
    ),
    (
        "AgentMessageChunk",
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {
                "type": "text",
                "text": "Sure.",
                "annotations": {"audience": ["user"], "priority": 0.5},
            },
        },
    ),
    (
        "AgentThoughtChunk",
        {
            "sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "Reading main.py first"},
        },
    ),
    (
        "ToolCall",
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_1",
            "title": "Read main.py",
            "kind": "read",
            "status": "pending",
            "locations": [{"path": "/src/main.py", "line": 3}],
            "rawInput": {"path": "/src/main.py"},
        },
    ),
    (
        "ToolCallUpdateSessionUpdate",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_1",
            "status": "completed",
            "content": [
                {"type": "content", "content": {"type": "text", "text": "ok"}},
                {"type": "diff", "path": "/src/main.py", "oldText": None, "newText": "print(1)\n"},
                {"type": "terminal", "terminalId": "term_1"},
            ],
            "rawOutput": {"lines": 12},
        },
    ),
    (
        "Plan",
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Read the code", "priority": "high", "status": "completed"},
                {"content": "Write the fix", "priority": "medium", "status": "in_progress"},
            ],
        },
    ),
    (
        "PlanUpdate",
        {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": "plan_1",
                "entries": [{"content": "Test", "priority": "low", "status": "pending"}],
            },
        },
    ),
    ("PlanRemoved", {"sessionUpdate": "plan_removed", "planId": "plan_1"}),
    (
        "AvailableCommandsUpdate",
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [
                {"name": "web", "description": "Search the web", "input": {"hint": "query"}},
                {"name": "test", "description": "Run tests"},
            ],
        },
    ),
    ("CurrentModeUpdate", {"sessionUpdate": "current_mode_update", "currentModeId": "code"}),
    (
        "ConfigOptionUpdate",
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {
                    "type": "select",
                    "id": "model",
                    "name": "Model",
                    "category": "_x",
                    "currentValue": "fast",
                    "options": [
                        {"value": "fast", "name": "Fast"},
                        {"value": "smart", "name": "Smart", "description": None},
                    ],
                },
                {"type": "boolean", "id": "yolo", "name": "Auto-approve", "currentValue": False},
            ],
        },
    ),
    (
        "SessionInfoUpdate",
        {
            "sessionUpdate": "session_info_update",
            "title": "Fix the bug",
            "updatedAt": "2025-06-01T12:00:00Z",
        },
    ),
    (
        "UsageUpdate",
        {
            "sessionUpdate": "usage_update",
            "used": 53000,
            "size": 200000,
            "cost": {"amount": 0.045, "currency": "USD"},
        },
    ),
    (
        "Notice",
        {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": "Rate limited",
            "description": "Retrying in 2s",
        },
    ),
    (
        "CompactionUpdate",
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "cmp_1",
            "status": "completed",
            "summary": [{"type": "text", "text": "We fixed main.py."}],
        },
    ),
    (
        "CompactionSummaryChunk",
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "cmp_1",
            "content": {"type": "text", "text": "We fixed"},
        },
    ),
    (
        "SubagentUpdate",
        {
            "sessionUpdate": "subagent_update",
            "sessionId": "sub_1",
            "title": "Explorer",
            "state": {
                "state": "idle",
                "stopReason": "end_turn",
                "usage": {"totalTokens": 10, "inputTokens": 7, "outputTokens": 3},
            },
        },
    ),
    (
        "SessionMessage",
        {
            "sessionUpdate": "session_message",
            "messageId": "msg_2",
            "senderSessionId": "sub_1",
            "content": [{"type": "text", "text": "Found it"}],
        },
    ),
    (
        "SessionMessageChunk",
        {
            "sessionUpdate": "session_message_chunk",
            "messageId": "msg_3",
            "content": {"type": "text", "text": "Found"},
        },
    ),
]


def test_session_update_union_has_all_19_variants() -> None:
    members = typing.get_args(t.SessionUpdate)
    assert [m.__name__ for m in members] == [name for name, _ in SESSION_UPDATES]
    schema_tags = [
        v["properties"]["sessionUpdate"]["const"] for v in DEFS["SessionUpdate"]["oneOf"]
    ]
    assert [msgspec.inspect.type_info(m).tag for m in members] == schema_tags  # type: ignore[attr-defined]
    assert [data["sessionUpdate"] for _, data in SESSION_UPDATES] == schema_tags


@pytest.mark.parametrize(("cls_name", "data"), SESSION_UPDATES, ids=[n for n, _ in SESSION_UPDATES])
def test_session_update_roundtrip(cls_name: str, data: dict[str, Any]) -> None:
    obj = roundtrip(data, t.SessionUpdate)
    assert type(obj).__name__ == cls_name
    validate(json.loads(msgspec.json.encode(obj)), "SessionUpdate", strict=True)
    note = t.SessionNotification(session_id="sess_1", update=obj)
    validate(json.loads(msgspec.json.encode(note)), "SessionNotification", strict=True)


# --------------------------------------------------------------------------- semantics


def test_patch_semantics_null_vs_omitted() -> None:
    cleared = t.ToolCallUpdateSessionUpdate(tool_call_id="c", status=None)
    omitted = t.ToolCallUpdateSessionUpdate(tool_call_id="c")
    assert json.loads(msgspec.json.encode(cleared)) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
        "status": None,
    }
    assert json.loads(msgspec.json.encode(omitted)) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
    }
    dec = msgspec.json.Decoder(t.SessionUpdate)
    a = dec.decode(b'{"sessionUpdate":"tool_call_update","toolCallId":"c","status":null}')
    b = dec.decode(b'{"sessionUpdate":"tool_call_update","toolCallId":"c"}')
    assert isinstance(a, t.ToolCallUpdateSessionUpdate) and isinstance(
        b, t.ToolCallUpdateSessionUpdate
    )
    assert a.status is None
    assert b.status is UNSET
    # The untagged ToolCallUpdate (inside session/request_permission) behaves the same.
    assert json.loads(msgspec.json.encode(t.ToolCallUpdate(tool_call_id="c", title=None))) == {
        "toolCallId": "c",
        "title": None,
    }


def test_meta_roundtrips_on_nested_types() -> None:
    data = {
        "sessionId": "s",
        "prompt": [
            {
                "type": "text",
                "text": "hi",
                "annotations": {"priority": 1.0, "_meta": {"a": [1, {"b": None}]}},
                "_meta": {"trace": "x"},
            }
        ],
        "_meta": {"traceparent": "00-1"},
    }
    req = roundtrip(data, t.PromptRequest)
    assert req.meta == {"traceparent": "00-1"}
    block = req.prompt[0]
    assert isinstance(block, t.TextContent)
    assert block.meta == {"trace": "x"}
    assert isinstance(block.annotations, t.Annotations)
    assert block.annotations.meta == {"a": [1, {"b": None}]}
    assert t.TextContent(text="x").meta is UNSET
    assert json.loads(msgspec.json.encode(t.TextContent(text="x", meta=None))) == {
        "type": "text",
        "text": "x",
        "_meta": None,
    }


def test_unknown_fields_are_ignored() -> None:
    raw = {
        "protocolVersion": 1,
        "futureField": {"x": 1},
        "clientCapabilities": {"fs": {"readTextFile": True, "someNewCap": True}, "newThing": {}},
    }
    req = msgspec.json.decode(json.dumps(raw).encode(), type=t.InitializeRequest)
    assert json.loads(msgspec.json.encode(req)) == {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True}},
    }


def test_unknown_open_enum_values_decode() -> None:
    dec = msgspec.json.Decoder(t.SessionUpdate)
    notice = dec.decode(b'{"sessionUpdate":"notice","severity":"_custom","title":"t"}')
    assert isinstance(notice, t.Notice) and notice.severity == "_custom"
    cfg = dec.decode(
        b'{"sessionUpdate":"config_option_update","configOptions":[{"type":"boolean",'
        b'"id":"a","name":"A","category":"_x","currentValue":true}]}'
    )
    assert isinstance(cfg, t.ConfigOptionUpdate)
    option = cfg.config_options[0]
    assert isinstance(option, t.SessionConfigBoolean) and option.category == "_x"
    status = msgspec.json.decode(b'{"state":"_new_state"}', type=t.AuthStatusResponse)
    assert status.state == "_new_state"


def test_mcp_servers_decode_through_the_merged_class() -> None:
    data = {
        "cwd": "/work",
        "mcpServers": [
            {
                "name": "fs",
                "command": "/bin/mcp-fs",
                "args": ["--root", "/"],
                "env": [{"name": "A", "value": "1"}],
            },
            {
                "type": "http",
                "name": "web",
                "url": "https://mcp.example/http",
                "headers": [{"name": "Authorization", "value": "x"}],
            },
            {"type": "sse", "name": "events", "url": "https://mcp.example/sse", "headers": []},
            {"type": "acp", "name": "inproc", "serverId": "srv_1"},
        ],
    }
    req = roundtrip(data, t.NewSessionRequest)
    stdio, http, sse, acp = req.mcp_servers
    assert all(isinstance(s, t.McpServerAny) for s in req.mcp_servers)
    assert (stdio.type, stdio.command, stdio.args) == (UNSET, "/bin/mcp-fs", ["--root", "/"])
    assert stdio.env == [t.EnvVariable(name="A", value="1")]
    assert (http.type, http.url, http.headers[0].name) == (
        "http",
        "https://mcp.example/http",
        "Authorization",
    )
    assert (sse.type, sse.headers) == ("sse", [])
    assert (acp.type, acp.server_id) == ("acp", "srv_1")
    validate(json.loads(msgspec.json.encode(req)), "NewSessionRequest", strict=True)
    # The precise variants encode the same wire shapes.
    assert json.loads(msgspec.json.encode(t.McpServerHttp(name="web", url="u", headers=[]))) == {
        "type": "http",
        "name": "web",
        "url": "u",
        "headers": [],
    }
    for server in (req.mcp_servers, data["mcpServers"]):
        assert server  # both non-empty


def test_embedded_resource_text_and_blob_decode_in_a_prompt() -> None:
    data = {
        "sessionId": "s",
        "prompt": [
            {"type": "text", "text": "Look at these"},
            {
                "type": "resource",
                "resource": {
                    "uri": "file:///a.py",
                    "mimeType": "text/x-python",
                    "text": "print(1)",
                },
            },
            {
                "type": "resource",
                "resource": {
                    "uri": "file:///a.png",
                    "mimeType": "image/png",
                    "blob": "iVBORw0KGgo=",
                },
            },
            {"type": "resource_link", "uri": "file:///b.py", "name": "b.py"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
        ],
    }
    req = roundtrip(data, t.PromptRequest)
    text_res, blob_res = req.prompt[1].resource, req.prompt[2].resource
    assert isinstance(text_res, t.EmbeddedResourceResourceAny)
    assert (text_res.text, text_res.blob) == ("print(1)", UNSET)
    assert (blob_res.blob, blob_res.text) == ("iVBORw0KGgo=", UNSET)
    assert [type(b).__name__ for b in req.prompt] == [
        "TextContent",
        "EmbeddedResource",
        "EmbeddedResource",
        "ResourceLink",
        "ImageContent",
        "AudioContent",
    ]
    validate(json.loads(msgspec.json.encode(req)), "PromptRequest", strict=True)


def test_initialize_request_from_the_official_sdks() -> None:
    data = {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
            "session": {"notices": {}, "compaction": {}},
            "plan": {},
            "subagents": {},
        },
        "clientInfo": {"name": "x", "version": "1"},
    }
    req = roundtrip(data, t.InitializeRequest)
    caps = req.client_capabilities
    assert isinstance(caps, t.ClientCapabilities)
    assert isinstance(caps.fs, t.FileSystemCapabilities)
    assert (caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal) == (True, True, True)
    assert isinstance(caps.session, t.ClientSessionCapabilities)
    assert isinstance(caps.session.notices, t.NoticeCapabilities)
    assert isinstance(caps.session.compaction, t.CompactionCapabilities)
    assert isinstance(caps.plan, t.PlanCapabilities)
    assert isinstance(caps.subagents, t.SubagentCapabilities)
    assert caps.auth is UNSET and caps.elicitation is UNSET
    assert req.client_info == t.Implementation(name="x", version="1")
    # The minimal form (only the required field) also decodes.
    assert (
        msgspec.json.decode(b'{"protocolVersion":1}', type=t.InitializeRequest).client_capabilities
        is UNSET
    )


def test_initialize_response_encodes_valid() -> None:
    resp = t.InitializeResponse(
        protocol_version=1,
        agent_capabilities=t.AgentCapabilities(
            load_session=True,
            prompt_capabilities=t.PromptCapabilities(image=True, embedded_context=True),
            mcp_capabilities=t.McpCapabilities(http=True),
            session_capabilities=t.SessionCapabilities(close=t.SessionCloseCapabilities()),
        ),
        auth_methods=[t.AuthMethodAgent(id="login", name="Log in")],
        agent_info=t.Implementation(name="acp-agent", version="0.1.0"),
    )
    validate(json.loads(msgspec.json.encode(resp)), "InitializeResponse", strict=True)


def test_client_responses_decode() -> None:
    dec = msgspec.json.Decoder(t.RequestPermissionResponse)
    selected = dec.decode(b'{"outcome":{"outcome":"selected","optionId":"allow"}}').outcome
    assert selected == t.SelectedPermissionOutcome(option_id="allow")
    cancelled = dec.decode(b'{"outcome":{"outcome":"cancelled"}}').outcome
    assert isinstance(cancelled, t.CancelledRequestPermissionOutcome)

    elic = msgspec.json.Decoder(t.CreateElicitationResponse)
    accept = elic.decode(
        b'{"action":"accept","content":{"n":3,"x":1.5,"ok":true,"s":"v","l":["a"]}}'
    )
    assert isinstance(accept, t.ElicitationAcceptAction)
    assert accept.content == {"n": 3, "x": 1.5, "ok": True, "s": "v", "l": ["a"]}
    assert isinstance(elic.decode(b'{"action":"decline"}'), t.DeclineCreateElicitationResponse)

    mcp = msgspec.json.Decoder(t.MessageMcpResponseAny)
    assert mcp.decode(b'{"result":{"tools":[]}}').result == {"tools": []}
    err = mcp.decode(b'{"error":{"code":-32601,"message":"nope"}}').error
    assert isinstance(err, t.McpError) and err.code == -32601

    out = msgspec.json.decode(
        b'{"output":"hi","truncated":false,"exitStatus":{"exitCode":0}}',
        type=t.TerminalOutputResponse,
    )
    assert out.exit_status == t.TerminalExitStatus(exit_code=0)


def test_set_config_option_request_both_shapes() -> None:
    tp = t.AGENT_METHODS["session/set_config_option"][0]
    assert tp is t.SetSessionConfigOptionRequestAny
    b = roundtrip({"sessionId": "s", "configId": "yolo", "type": "boolean", "value": True}, tp)
    v = roundtrip({"sessionId": "s", "configId": "model", "value": "fast"}, tp)
    assert (b.type, b.value, v.type, v.value) == ("boolean", True, UNSET, "fast")


def test_cancel_request_notification_ids() -> None:
    dec = msgspec.json.Decoder(t.CancelRequestNotification)
    assert dec.decode(b'{"requestId":7}').request_id == 7
    assert dec.decode(b'{"requestId":"a"}').request_id == "a"
    assert dec.decode(b'{"requestId":null}').request_id is None


# --------------------------------------------------------------------------- every class

CLASSES: dict[str, type[Wire]] = {
    name: obj
    for name, obj in vars(t).items()
    if isinstance(obj, type)
    and issubclass(obj, Wire)
    and obj.__module__ == t.__name__
    and obj.__name__ == name  # not an alias such as InitializeProxyRequest
}

# Merged decode classes are deliberately loose; give them a valid wire shape.
MERGED_EXAMPLES: dict[str, Any] = {
    "McpServerAny": lambda: t.McpServerAny(name="fs", command="mcp", args=[], env=[]),
    "EmbeddedResourceResourceAny": lambda: t.EmbeddedResourceResourceAny(uri="file:///a", text="x"),
    "SetSessionConfigOptionRequestAny": lambda: t.SetSessionConfigOptionRequestAny(
        session_id="s", config_id="c", value="v"
    ),
    "MessageMcpResponseAny": lambda: t.MessageMcpResponseAny(result={}),
    "SessionConfigSelectOptionsItemAny": lambda: t.SessionConfigSelectOptionsItemAny(
        value="v", name="n"
    ),
}


def _synth(tp: Any, full: bool, depth: int) -> Any:
    if tp is Any:
        return {"k": "v"}
    if tp in (str, int, float, bool):
        return {str: "x", int: 1, float: 1.5, bool: True}[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return args[0]
    if origin in (typing.Union, pytypes.UnionType):
        choices = [a for a in args if a not in (type(None), UnsetType)]
        return _synth(choices[0], full, depth)
    if origin is list:
        return [_synth(args[0], full, depth)]
    if origin is dict:
        return {"k": _synth(args[1], full, depth)}
    if isinstance(tp, type) and issubclass(tp, Wire):
        return build(tp, full, depth + 1)
    raise AssertionError(f"cannot synthesise {tp!r}")


# Merged untagged mixins: the schema needs one of the session/request scopes.
SCOPE_REQUIRED: dict[str, dict[str, Any]] = {
    "ElicitationFormMode": {"session_id": "s"},
    "ElicitationUrlMode": {"request_id": 1},
}


def build(cls: type[Wire], full: bool, depth: int = 0) -> Wire:
    if cls.__name__ in MERGED_EXAMPLES:
        return MERGED_EXAMPLES[cls.__name__]()  # type: ignore[no-any-return]
    kwargs: dict[str, Any] = dict(SCOPE_REQUIRED.get(cls.__name__, {}))
    for f in msgspec.structs.fields(cls):
        if f.name == "meta":
            if full:
                kwargs["meta"] = {"k": "v"}
        elif f.required or (full and depth < 4):
            kwargs[f.name] = _synth(f.type, full, depth)
    return cls(**kwargs)


def _validate_def(name: str) -> str:
    cls = MODEL.classes[name]
    if cls.merged:
        union = next(u for u in MODEL.unions.values() if u.merged == name)
        return str(union.name)
    return str(cls.validate_def)


def test_model_and_module_agree() -> None:
    assert set(CLASSES) == set(MODEL.classes)
    assert len(CLASSES) >= 190


@pytest.mark.parametrize("full", [False, True], ids=["minimal", "full"])
@pytest.mark.parametrize("name", sorted(set(MODEL.classes) - {"SessionConfigSelectOptionsItemAny"}))
def test_every_class_encodes_valid_json(name: str, full: bool) -> None:
    obj = build(CLASSES[name], full)
    encoded = msgspec.json.encode(obj)
    validate(json.loads(encoded), _validate_def(name), strict=True)
    try:
        dec = msgspec.json.Decoder(type(obj))
    except TypeError:
        assert name not in MODEL.decoded  # only outbound-only types may be undecodable
        return
    assert dec.decode(encoded) == obj


def test_every_schema_property_name_roundtrips() -> None:
    """Each schema property is a field whose wire name is exactly the schema's name."""
    checked = 0
    for name, cls in CLASSES.items():
        enc = {f.encode_name for f in msgspec.structs.fields(cls)}
        assert "_meta" in enc
        expected: set[str] = set()
        for def_name in {name, MODEL.classes[name].validate_def}:
            d = DEFS.get(def_name or "", {})
            expected |= set(d.get("properties", {}))
        for f in msgspec.structs.fields(cls):
            if f.name != "meta":
                # Attribute names are snake_case except where a keyword/shadowing forces a `_`.
                assert f.name.rstrip("_") == gen.snake(f.encode_name), (name, f.name)
        missing = expected - enc
        assert not missing, f"{name}: {missing}"
        checked += len(expected)
    all_props = {
        p for d in DEFS.values() if not d.get("x-docs-ignore") for p in d.get("properties", {})
    }
    seen = {f.encode_name for cls in CLASSES.values() for f in msgspec.structs.fields(cls)}
    assert all_props <= seen
    assert checked > 500


def test_no_schema_prose_in_generated_module() -> None:
    text = GENERATED.read_text(encoding="utf-8")
    assert '"""' not in text
    head = text.splitlines()[:3]
    assert head[0] == "# Generated by tools/gen_protocol.py from schema.unstable.json"
    assert head[1].startswith("# (@agentclientprotocol/sdk ") and head[1].endswith("Do not edit.")
    assert head[2].startswith("# schema sha256 ")


# --------------------------------------------------------------------------- generator


def test_generator_reproduces_the_committed_module(tmp_path: Path) -> None:
    out = tmp_path / "types.py"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_protocol.py"), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == GENERATED.read_bytes(), (
        "acp_agent/protocol/types.py is stale: run `python tools/gen_protocol.py`"
    )
