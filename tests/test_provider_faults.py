"""The fault-injection suite (issue 12): every way a model provider fails, in both wire
formats (OpenAI Chat Completions, Anthropic Messages), through the agent process, the
real SDK and a local server that fails the way the real services do.

For each fault: the turn ends with a stop reason or a clear error (its code, and a
message naming the cause and the endpoint); the server saw the requests it should (retries
where retrying can help, none where it cannot); every retry was announced; and the agent
then answers a normal prompt, sending a valid history. Retry delays and timeouts are
configured small; stalls are endless, so no outcome depends on the machine's speed. What
needs small limits gets them for itself: the agent reloads its configuration (SIGUSR1)
with roomy limits before the normal prompt, and with the small turn-timeout only once
the turn has got where the test needs it (its request at the server, its permission
asked), so nothing depends on how long this machine takes to get a turn there.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .fakes.llm_server import (
    Burst,
    FakeLLMServer,
    Finish,
    Hang,
    HttpError,
    Malformed,
    Raw,
    Reply,
    Response,
    Text,
    ToolCall,
    Usage,
    anthropic_error,
    openai_error,
)
from .fakes.llm_wire import Step
from .harness import AgentProcess
from .schema_check import SchemaChecker

VENDORS = ("openai", "anthropic")
MODEL = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-5"}
KEY = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
NOTICES: dict[str, Any] = {"session": {"notices": {}}}
LIMITS = {  # small waits; timeouts far above a local answer unless a fault needs them small
    "max-retries": 2,
    "retry-max-delay": 0.01,
    "first-event-timeout": 60.0,
    "idle-timeout": 60.0,
    "turn-timeout": 3600.0,
}


def lead(vendor: str) -> int:
    """SSE events a vendor sends before any content (Anthropic: message_start, ping)."""
    return 0 if vendor == "openai" else 2


def upto_first_text(vendor: str) -> int:
    """Events written up to and including the first text delta."""
    return 1 if vendor == "openai" else 4  # + content_block_start, content_block_delta


def ok(text: str = "fine") -> Reply:
    return Reply([Text(text), Usage(10, 2), Finish("stop")])


# The vendors' own error answers (bodies, and headers where they matter).


def rejected_key(vendor: str) -> HttpError:
    if vendor == "openai":
        return openai_error(401, "Incorrect API key provided: test-key.",
                            "invalid_request_error", "invalid_api_key")  # fmt: skip
    return anthropic_error(401, "authentication_error", "invalid x-api-key")


def forbidden(vendor: str) -> HttpError:
    if vendor == "openai":
        return openai_error(403, "Country, region, or territory not supported",
                            "request_forbidden", "unsupported_country_region_territory")
    return anthropic_error(403, "permission_error", "Your API key does not have permission "
                           "to use the specified resource.")  # fmt: skip


def no_model(vendor: str) -> HttpError:
    if vendor == "openai":
        return openai_error(404, "The model `gpt-4.1` does not exist or you do not have "
                            "access to it.", "invalid_request_error", "model_not_found")
    return anthropic_error(404, "not_found_error", "model: claude-sonnet-4-5")


def rate_limited(vendor: str, **headers: str) -> HttpError:
    if vendor == "openai":
        return openai_error(
            429, "Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, "
            "Used 30000, Requested 1200.", "tokens", "rate_limit_exceeded", **headers)  # fmt: skip
    return anthropic_error(429, "rate_limit_error", "Number of request tokens has exceeded "
                           "your per-minute rate limit", **headers)  # fmt: skip


def server_error(vendor: str) -> HttpError:
    if vendor == "openai":
        return openai_error(500, "The server had an error while processing your request. "
                            "Sorry about that!", "server_error")  # fmt: skip
    return anthropic_error(500, "api_error", "Internal server error")


def overloaded(vendor: str) -> HttpError:
    if vendor == "openai":  # OpenAI never answers 529: its overload is a 503
        return openai_error(503, "The engine is currently overloaded, please try again later",
                            "server_error")  # fmt: skip
    return anthropic_error(529, "overloaded_error", "Overloaded", x_should_retry="true")


def stream_error(vendor: str) -> Reply:
    """An error reported inside a 200 stream, before any content."""
    if vendor == "openai":
        error = {"message": "The server had an error processing your request.",
                 "type": "server_error"}  # fmt: skip
        return Reply([Raw({"error": error})], done=False)
    error = {"type": "overloaded_error", "message": "Overloaded"}
    return Reply([Raw({"type": "error", "error": error}, "error")])


READ_HELLO = json.dumps({"path": "hello.txt"})


def broken_answer(vendor: str) -> Reply:
    """Text, then (Anthropic) a complete tool call, then the connection drops."""
    if vendor == "openai":  # OpenAI's tool calls are complete only at the finish
        return Reply([Text("partial "), Text("more")], disconnect_after=1)
    steps: list[Step] = [Text("partial "), ToolCall("toolu_a", "read_file", READ_HELLO),
                         Text("more")]  # fmt: skip
    return Reply(steps, disconnect_after=10)  # after the tool_use block's stop


def many_calls(vendor: str, n: int = 200) -> Reply:
    prefix = "call_" if vendor == "openai" else "toolu_"
    calls = [ToolCall(f"{prefix}{i:03d}", "read_file", READ_HELLO, pieces=1) for i in range(n)]
    return Reply([*calls, Usage(100, 2000), Finish("tool_calls")])


@dataclass(frozen=True)
class Fault:
    name: str
    script: Callable[[str], list[Response]]
    """What the server answers, in order, given the vendor."""
    stop: str | None = None
    """The stop reason; or else the error ``code``, whose message holds every ``says``
    (``{url}``, ``{key}``, ``{model}`` filled in) and the vendor's own error message."""
    code: int | None = None
    says: tuple[str, ...] = ()
    requests: int = 1
    retries: int = 0
    """Retries announced (notices, or agent messages for a client without notices)."""
    waits: tuple[str, ...] = ()
    """How long each announced retry waits, as announced."""
    limits: dict[str, float] = field(default_factory=dict)
    warm: bool = False
    """The prompt waits for the agent's warm-up (the SDK imported, the connection to the
    server open ahead): a small first-event-timeout then bounds a warm agent's request,
    not an import or a connection."""
    late: bool = False
    """The ``limits`` are reloaded once the server has seen the ``requests``: a bound on
    the whole turn must not depend on how long this machine takes to get there (importing
    the SDK, say)."""
    notices: bool = True
    refused: bool = False
    """Nothing listens at the endpoint (until the fault is over)."""


FAULTS = [
    Fault("401 rejected key", lambda v: [rejected_key(v)], code=-32000,
          says=("the API key in {key} was rejected (`acp-agent login` stores another)",
                "{url}", "HTTP 401")),
    Fault("403 forbidden", lambda v: [forbidden(v)], code=-32000,
          says=("the API key in {key} is not allowed", "`acp-agent login` stores another",
                "{url}", "HTTP 403")),
    Fault("404 no such model", lambda v: [no_model(v)], code=-32603,
          says=("model `{model}` not found", "{url}", "HTTP 404")),
    Fault("429 then ok, Retry-After honoured up to the cap", lambda v: [
        rate_limited(v, retry_after="30"), rate_limited(v, retry_after_ms="150"), ok()],
        stop="end_turn", requests=3, retries=2, waits=("200 ms", "150 ms"),
        limits={"retry-max-delay": 0.2}),
    Fault("429 persistent", lambda v: [rate_limited(v, retry_after="0")] * 3,
          code=-32603, says=("rate limited (HTTP 429", "{url}", "gave up after 2 retries"),
          requests=3, retries=2),
    Fault("429 persistent, client without notices", lambda v: [
        rate_limited(v, retry_after="0"), rate_limited(v, retry_after="2"), rate_limited(v)],
        code=-32603, says=("rate limited", "gave up after 2 retries"), requests=3,
        retries=1, waits=("2.0 s",), limits={"retry-max-delay": 2.0}, notices=False),
    Fault("500 then ok", lambda v: [server_error(v), ok()],
          stop="end_turn", requests=2, retries=1),
    Fault("overloaded (529 / 503) then ok", lambda v: [overloaded(v), ok()],
          stop="end_turn", requests=2, retries=1),
    Fault("error event in the stream then ok", lambda v: [stream_error(v), ok()],
          stop="end_turn", requests=2, retries=1),
    # nothing has answered there yet: not waited for (tests/providers/test_resilient.py
    # shows a refused connection retried once the endpoint has answered)
    Fault("connection refused", lambda v: [], code=-32603, requests=0, retries=0,
          says=("Cannot connect to {url}: connection refused",), refused=True),
    Fault("stall before the response headers", lambda v: [Hang(), Hang()],
          code=-32603, requests=2, retries=1,
          says=("No answer from", "{url}", "within 0.5 s (limits.first-event-timeout)"),
          limits={"first-event-timeout": 0.5, "max-retries": 1}, warm=True),
    Fault("keep-alives only, before any content", lambda v: [
        Reply([], keepalive_after=lead(v), done=False)] * 2,
        code=-32603, requests=2, retries=1,
        says=("No answer from", "{url}", "within 0.5 s (limits.first-event-timeout)"),
        limits={"first-event-timeout": 0.5, "max-retries": 1}, warm=True),
    Fault("stall mid-stream", lambda v: [
        Reply([Text("partial "), Text("never")], hang_after=upto_first_text(v))],
        code=-32603, says=("stalled for 0.5 s (limits.idle-timeout)", "{url}"),
        limits={"idle-timeout": 0.5}),
    Fault("keep-alives only, mid-stream", lambda v: [
        Reply([Text("partial "), Text("never")], keepalive_after=upto_first_text(v))],
        code=-32603, says=("stalled for 0.5 s (limits.idle-timeout)", "{url}"),
        limits={"idle-timeout": 0.5}),
    Fault("disconnect mid-stream", lambda v: [broken_answer(v)], code=-32603,
          says=("The stream from", "{url}", "broke off", "closed the connection")),
    Fault("disconnect before any content then ok", lambda v: [
        Reply([Text("x"), Finish("stop")], disconnect_after=lead(v)), ok()],
        stop="end_turn", requests=2, retries=1),
    Fault("malformed SSE", lambda v: [Reply([Malformed(), Finish("stop")])],
          code=-32603, says=("{url}", "invalid stream event", "trunc")),
    Fault("invalid tool JSON", lambda v: [
        Reply([ToolCall("call_bad" if v == "openai" else "toolu_bad", "read_file",
                        '{"path": "hello.txt"', pieces=2), Finish("tool_calls")]),
        ok("sorry")], stop="end_turn", requests=2),
    Fault("200 parallel tool calls", lambda v: [many_calls(v), ok("read them all")],
          stop="end_turn", requests=2),
    Fault("turn timeout", lambda v: [Hang()], code=-32603,
          says=("The turn ran longer than limits.turn-timeout (1 s)",),
          limits={"turn-timeout": 1.0}, late=True),
]


def write_config(tmp_path: Path, limits: dict[str, float]) -> str:
    path = tmp_path / "faults.toml"
    path.write_text("[limits]\n" + "".join(f"{k} = {v}\n" for k, v in limits.items()))
    return str(path)


async def reload(agent: AgentProcess, config: str, limits: dict[str, float]) -> None:
    """The agent's configuration file now has ``limits``; the agent reads it (SIGUSR1)."""
    write_config(Path(config).parent, limits)
    await agent.reload()


def base_url(vendor: str, server: FakeLLMServer) -> str:
    return server.openai_url if vendor == "openai" else server.url


def make_agent(checker: SchemaChecker, state_dir: str, vendor: str, server: FakeLLMServer,
               config: str, mode: str = "bypass") -> AgentProcess:  # fmt: skip
    return AgentProcess(
        checker, "--state-dir", state_dir, "--model", f"{vendor}:{MODEL[vendor]}",
        "--base-url", base_url(vendor, server), "--mode", mode, "--config", config,
        "--log-level", "debug", env={KEY[vendor]: "test-key"},
    )  # fmt: skip


def prompt_params(sid: str, text: str) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}


def text_of(agent: AgentProcess, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates_of(sid, "agent_message_chunk"))


def vendor_said(script: list[Response]) -> str | None:
    """The message in the last error body the server sent, which the error must carry."""
    bodies = [r.body for r in script if isinstance(r, HttpError) and r.body]
    return str(bodies[-1]["error"]["message"]) if bodies else None


def assert_valid_history(vendor: str, body: dict[str, Any]) -> None:
    """Every tool call in the history sent has its result, where the vendor wants it."""
    messages: list[dict[str, Any]] = body["messages"]
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        if vendor == "openai":
            calls = {c["id"] for c in message.get("tool_calls") or []}
            answered = set()
            for later in messages[i + 1:]:
                if later["role"] != "tool":
                    break
                answered.add(later["tool_call_id"])
        else:
            calls = {b["id"] for b in message["content"] if b["type"] == "tool_use"}
            after = messages[i + 1]["content"] if i + 1 < len(messages) else []
            answered = {b["tool_use_id"] for b in after if b["type"] == "tool_result"}
        assert calls <= answered, f"unanswered tool calls {calls - answered} in {messages}"


@pytest.fixture
async def listener() -> AsyncIterator[socket.socket]:
    """A bound socket that is not listening: connections to it are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield sock
    sock.close()


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
async def test_fault(checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
                     listener: socket.socket, vendor: str, fault: Fault) -> None:  # fmt: skip
    server = FakeLLMServer(sock=listener)
    if not fault.refused:
        await server.start()
    script = fault.script(vendor)
    config = write_config(tmp_path, {**LIMITS, **({} if fault.late else fault.limits)})
    try:
        async with make_agent(checker, state_dir, vendor, server, config) as agent:
            await agent.initialize(NOTICES if fault.notices else {})
            sid = await agent.new_session(workspace)
            if fault.warm:
                await agent.logged("connected ahead")
            before = len(server.requests)
            server.enqueue(*script)
            turn = agent.start_request("session/prompt", prompt_params(sid, "go"))
            if fault.late:
                await server.wait_for_requests(before + fault.requests)
                await reload(agent, config, {**LIMITS, **fault.limits})
            response = await turn
            if fault.stop is not None:
                assert response.get("result", {}).get("stopReason") == fault.stop, response
            else:
                error = response.get("error")
                assert error is not None and error["code"] == fault.code, response
                fill = {"url": base_url(vendor, server), "key": KEY[vendor],
                        "model": MODEL[vendor]}  # fmt: skip
                for fragment in fault.says:
                    assert fragment.format(**fill) in error["message"], error["message"]
                said = vendor_said(script)
                assert said is None or said in error["message"], error["message"]
            assert len(server.requests) - before == fault.requests
            check_announced(agent, sid, fault)
            EXTRA_CHECKS.get(fault.name, _nothing)(agent, sid, server, vendor)

            if fault.refused:
                await server.start()  # the same port starts answering
            if fault.limits:  # the normal prompt under roomy limits, in the same process
                await reload(agent, config, LIMITS)
            seen = len(server.requests)
            server.enqueue(Burst(1, "still here"))
            assert (await agent.prompt(sid, "and now?"))["stopReason"] == "end_turn"
            assert text_of(agent, sid).endswith("still here")
            assert len(server.requests) == seen + 1
            assert_valid_history(vendor, server.requests[-1].body)
    finally:
        await server.close()


def check_announced(agent: AgentProcess, sid: str, fault: Fault) -> None:
    if fault.notices:
        descriptions = [n.get("description", "") for n in agent.updates_of(sid, "notice")]
        assert all(n["severity"] == "warning" for n in agent.updates_of(sid, "notice"))
    else:  # waits of 2 s or more reach the user as a message, shorter ones go unsaid
        assert agent.updates_of(sid, "notice") == []
        descriptions = [line for line in text_of(agent, sid).splitlines() if "Retry " in line]
    limit = int({**LIMITS, **fault.limits}["max-retries"])
    assert len(descriptions) == fault.retries, descriptions
    for description in descriptions:
        assert f" of {limit} in " in description, description
    if not fault.notices and fault.retries:
        assert text_of(agent, sid).startswith("**Rate limited; waiting**")
    for description, wait in zip(descriptions, fault.waits, strict=False):
        assert description.endswith(f" in {wait}."), description


# ----------------------------------------------------------------- per-fault extra checks


def _invalid_json(agent: AgentProcess, sid: str, server: FakeLLMServer, vendor: str) -> None:
    """The call fails with a message saying its JSON was invalid; the model reads it."""
    updates = agent.updates_of(sid, "tool_call_update")
    (update,) = [u for u in updates if u.get("status") == "failed"]
    assert "not valid JSON" in json.dumps(update["content"])
    assert "not valid JSON" in json.dumps(server.requests[1].body["messages"][-1])
    assert text_of(agent, sid) == "sorry"


def _many_calls(agent: AgentProcess, sid: str, server: FakeLLMServer, vendor: str) -> None:
    """All 200 ran and were answered, in one follow-up request."""
    assert len(agent.updates_of(sid, "tool_call")) == 200
    done = [u for u in agent.updates_of(sid, "tool_call_update") if u.get("status") == "completed"]
    assert len(done) == 200
    body = json.dumps(server.requests[1].body["messages"])
    assert body.count("2\\tworld") == 200  # read_file numbers the lines
    assert_valid_history(vendor, server.requests[1].body)


def _partial_kept(agent: AgentProcess, sid: str, server: FakeLLMServer, vendor: str) -> None:
    """What was shown before the stream broke stays shown (and is never streamed twice)."""
    assert text_of(agent, sid) == "partial "


def _nothing(agent: AgentProcess, sid: str, server: FakeLLMServer, vendor: str) -> None:
    pass


EXTRA_CHECKS: dict[str, Callable[[AgentProcess, str, FakeLLMServer, str], None]] = {
    "invalid tool JSON": _invalid_json,
    "200 parallel tool calls": _many_calls,
    "stall mid-stream": _partial_kept,
    "keep-alives only, mid-stream": _partial_kept,
    "disconnect mid-stream": _partial_kept,
}


# ----------------------------------------------------------------- the turn's own bound


@pytest.mark.parametrize("vendor", VENDORS)
async def test_the_turn_timeout_ends_a_waiting_tool_call(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path, vendor: str
) -> None:
    """A permission the user never answers: past ``limits.turn-timeout`` the prompt errs
    naming the limit, the call ends failed saying why, and its result is in the history."""
    call_id = "call_w" if vendor == "openai" else "toolu_w"
    write = json.dumps({"path": "new.txt", "content": "x"})
    released = asyncio.Event()

    async def never_answered(params: dict[str, Any]) -> dict[str, Any]:
        await released.wait()
        return {"outcome": {"outcome": "cancelled"}}

    async with FakeLLMServer() as server:
        config = write_config(tmp_path, LIMITS)
        async with make_agent(checker, state_dir, vendor, server, config, "ask") as agent:
            agent.handlers["session/request_permission"] = never_answered
            await agent.initialize(NOTICES)
            sid = await agent.new_session(workspace)
            server.enqueue(Reply([Text("Writing. "), ToolCall(call_id, "write_file", write),
                                  Finish("tool_calls")]))  # fmt: skip
            turn = agent.start_request("session/prompt", prompt_params(sid, "write"))
            await agent.wait_for(lambda: bool(agent.client_requests))  # the permission asked
            await reload(agent, config, {**LIMITS, "turn-timeout": 1.0})  # bounds this turn
            response = await turn
            assert response["error"]["code"] == -32603
            assert "limits.turn-timeout (1 s)" in response["error"]["message"]
            assert len(agent.client_requests) == 1  # the permission asked, never answered
            final = agent.updates_of(sid, "tool_call_update")[-1]
            assert final["status"] == "failed"
            assert "ran out of time (limits.turn-timeout = 1 s)" in json.dumps(final["content"])
            released.set()
            assert not Path(workspace, "new.txt").exists()

            await reload(agent, config, LIMITS)
            server.enqueue(ok("next"))
            assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"
            body = server.requests[-1].body
            assert_valid_history(vendor, body)
            assert "ran out of time" in json.dumps(body["messages"])
