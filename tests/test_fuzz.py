"""Property-based fuzz of the reader and of every method's params (issue 12).

(a) The framing and the connection's dispatch, in-process on a bare connection: arbitrary
bytes, arbitrary JSON values, envelopes broken in every part, truncated and corrupted
lines, deep and huge values, lines cut into chunks. (b) Every method ``Agent.routes()``
serves, in-process on the real agent, with params generated from the official schema
and damaged at one spot. (c) A shorter run of (b) over a real agent subprocess.

The properties: every request line gets exactly one answer, carrying its ``id`` (or
``null`` when the id cannot be read), notifications and responses get none; every error
code is one of the spec's and never -32603 "Internal error" (the input was bad, not the
agent); nothing goes wrong in the read loop (``serve()`` runs on, and no line's dispatch
raised: ``WatchedConnection`` keeps any such line); every message the agent writes passes
the schema checker. Hypothesis runs derandomized, without an example database, so each
run is the same.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_agent.config import Config
from acp_agent.rpc.connection import Route

from .harness import AgentProcess
from .inproc import InProcessAgent
from .schema_check import SchemaChecker
from .schema_strategies import (
    DEEP,
    HUGE,
    INTS,
    JSON_VALUES,
    ODD_CHARS,
    SCALARS,
    TEXT,
    Generator,
    Json,
    encode,
    has_surrogate,
    mutate,
    readable,
    schema_defs,
)

SPEC_CODES = {-32700, -32600, -32601, -32602, -32800, -32000, -32002}
"""The spec's error codes, less -32603: bad input is never the agent's internal error."""

Message = dict[str, Any]

READER_EXAMPLES, METHOD_EXAMPLES, STDIO_EXAMPLES = 600, 800, 150
"""About 15 s in all on a two-core machine with both cores busy (one exchange an example)."""


def fuzz_settings(examples: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )


# --------------------------------------------------------------------------- the oracle


def _key(value: Any) -> tuple[type, Any]:
    return (type(value), value)


def _valid_id(value: Any) -> bool:
    if isinstance(value, str):
        return not has_surrogate(value)
    return value is None or type(value) is int


NULL = frozenset({_key(None)})


class Expect:
    """How many answers a line gets (``lo``..``hi``) and the ids they may carry (``None``:
    any id)."""

    def __init__(self, lo: int, hi: int, ids: frozenset[tuple[type, Any]] | None = NULL) -> None:
        self.lo, self.hi, self.ids = lo, hi, ids

    @property
    def request_id(self) -> Any:
        """The id of the one answer to wait for (``...`` when none is certain)."""
        if self.lo == 1 and self.ids is not None and len(self.ids) == 1:
            return next(iter(self.ids))[1]
        return ...


def expect(value: Json) -> Expect:
    """What the agent owes a line holding ``value`` (a JSON value, Raw tokens inside)."""
    if not isinstance(value, dict):
        return Expect(1, 1)
    ok = readable(value)
    request_id = value.get("id")
    answer_id = frozenset({_key(request_id if _valid_id(request_id) else None)})
    if "method" in value:
        if "id" in value:
            return Expect(1, 1, answer_id)
        well_formed = value.get("jsonrpc") == "2.0" and isinstance(value["method"], str)
        return Expect(0, 0) if (not ok or well_formed) else Expect(1, 1)
    if "result" in value or "error" in value:
        return Expect(0, 0)
    return Expect(1, 1, answer_id)


class Driver:
    """Sends one line at a time and checks what comes back against an :class:`Expect`."""

    def __init__(self, client: InProcessAgent | AgentProcess) -> None:
        self.client = client
        self.probes = itertools.count()

    async def exchange(self, chunks: list[bytes], want: Expect, sent: Json = None) -> list[Message]:
        client = self.client
        if isinstance(sent, dict) and isinstance(sent.get("method"), str) and _valid_id(
            sent.get("id", ...)
        ):
            client.checker.observe_inbound(sent)  # so its result is checked against its method
        before = len(client.messages)
        for chunk in chunks:
            await client.send_raw(chunk)
        probe = await client.request_raw("_fuzz/probe", None, id=f"probe-{next(self.probes)}")
        assert probe["error"]["code"] == -32601, probe
        if want.request_id is not ...:  # an answer that may come from a handler, later
            rid = want.request_id
            await client.wait_for(lambda: any(
                "method" not in m and _key(m.get("id")) == _key(rid)
                for m in client.messages[before:]))
        got = [m for m in client.messages[before:] if "method" not in m and m is not probe]
        assert want.lo <= len(got) <= want.hi, (chunks[0][:300], got)
        for m in got:
            assert want.ids is None or _key(m["id"]) in want.ids, (chunks[0][:300], m)
            assert ("result" in m) != ("error" in m)
            if "error" in m:
                assert m["error"]["code"] in SPEC_CODES, (chunks[0][:300], m)
        return got


def running(client: InProcessAgent) -> None:
    assert not client.serving.done(), "serve() ended"
    assert client.dispatch_failures == [], client.dispatch_failures[:3]


# --------------------------------------------------------------------------- (a) the reader


class Echo:
    async def echo(self, params: object) -> Any:
        return {"params": params}

    async def note(self, params: object) -> None:
        return None

    def routes(self) -> dict[str, Route[Any]]:
        return {
            "_fuzz/echo": Route(object, self.echo),
            "_fuzz/note": Route(object, self.note, notification=True),
        }


METHODS = st.sampled_from(["_fuzz/echo", "_fuzz/note", "_fuzz/unknown", "$/cancel_request",
                           "initialize", ""]) | TEXT
IDS = INTS | TEXT | st.none()
BAD = st.floats(allow_nan=False, allow_infinity=False) | st.booleans() | \
    st.lists(INTS, max_size=2) | st.dictionaries(TEXT, INTS, max_size=2)


def sometimes(draw: st.DrawFn, one_in: int) -> bool:
    """True about one time in ``one_in`` (Hypothesis favours the smallest integer, so the
    rare branch is the largest)."""
    return draw(st.integers(0, one_in - 1)) == one_in - 1


@st.composite
def mostly(draw: st.DrawFn, usual: st.SearchStrategy[Json], odd: st.SearchStrategy[Json]) -> Json:
    """A value from ``usual``, and about one time in five from ``odd``."""
    return draw(odd if sometimes(draw, 5) else usual)


@st.composite
def params(draw: st.DrawFn) -> Json:
    """Mostly ordinary JSON; now and then nested deep or huge."""
    return draw(DEEP if sometimes(draw, 8) else HUGE if sometimes(draw, 12) else JSON_VALUES)


PARAMS = params()


@st.composite
def envelopes(draw: st.DrawFn) -> Json:
    """A request, notification or response: mostly well formed, each part sometimes
    wrong, and one part damaged further now and then."""
    kind = draw(st.sampled_from(["request"] * 3 + ["notification"] * 2 + ["response", "other"]))
    message: dict[str, Json] = {}
    if not sometimes(draw, 8):
        message["jsonrpc"] = "2.0"
    elif draw(st.booleans()):
        message["jsonrpc"] = draw(SCALARS)
    if kind in ("request", "response", "other"):
        message["id"] = draw(BAD | DEEP if sometimes(draw, 8) else IDS)
    if kind in ("request", "notification"):
        message["method"] = draw(
            SCALARS | DEEP if sometimes(draw, 10)
            else METHODS if sometimes(draw, 3)
            else st.sampled_from(["_fuzz/echo", "_fuzz/note"])
        )
        if not sometimes(draw, 4):
            message["params"] = draw(PARAMS)
    if kind == "response":
        message[draw(st.sampled_from(["result", "error"]))] = draw(PARAMS)
    if sometimes(draw, 6):
        message[draw(TEXT)] = draw(PARAMS)
    return draw(mutate(message)) if sometimes(draw, 3) else message


class Line:
    """A line cut into chunks, what it must get, and the value it holds (if any)."""

    def __init__(self, chunks: list[bytes], want: Expect, sent: Json) -> None:
        self.chunks, self.want, self.sent = chunks, want, sent

    def __repr__(self) -> str:
        data = b"".join(self.chunks)
        cut = f"... ({len(data)} bytes)" if len(data) > 300 else ""
        return f"Line({data[:300]!r}{cut}, in {len(self.chunks)} chunks)"


@st.composite
def lines(draw: st.DrawFn) -> Line:
    """A line cut into chunks, what it must get, and the value it holds (if any)."""
    shape = draw(st.sampled_from(["bytes", "json", *["envelope"] * 5, "truncated", "corrupted"]))
    sent: Json = None
    if shape == "bytes":
        line = draw(st.binary(min_size=1, max_size=200)).replace(b"\n", b" ")
        want = Expect(1, 1) if line.strip() else Expect(0, 0)
        data = line + b"\n"
    elif shape == "json":
        sent = draw(JSON_VALUES)
        data, want = encode(sent), expect(sent)
    else:
        sent = draw(envelopes())
        data = encode(sent, ensure_ascii=draw(st.integers(0, 4)) > 0)
        want = expect(sent)
        if shape == "truncated":
            data = data[: draw(st.integers(1, len(data) - 2))] + b"\n"
            want, sent = Expect(1, 1), None
        elif shape == "corrupted":
            at = draw(st.integers(0, len(data) - 1))
            noise = draw(st.binary(min_size=1, max_size=4)).replace(b"\n", b"")
            data = data[:at] + noise + data[at:]
            want, sent = Expect(0, 1, ids=None), None
    if draw(st.integers(0, 9)) == 0:
        data = data[:-1] + b"\r\n"
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=3)))
    chunks = [data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)]) if b > a]
    return Line(chunks, want, sent)


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as r:
        yield r


def test_fuzz_reader_and_dispatch(checker: SchemaChecker, runner: asyncio.Runner) -> None:
    client = InProcessAgent(checker, routes=Echo().routes())
    runner.run(client.start())
    driver = Driver(client)
    count = itertools.count(1)

    @fuzz_settings(READER_EXAMPLES)
    @given(lines())
    def check(line: Line) -> None:
        next(count)
        runner.run(driver.exchange(line.chunks, line.want, line.sent))
        running(client)

    check()
    assert next(count) > READER_EXAMPLES * 0.9  # the examples really ran
    runner.run(client.close())


# --------------------------------------------------------------------------- (b) the methods


class Case:
    def __init__(self, method: str, params: Json) -> None:
        self.method, self.params = method, params

    def __repr__(self) -> str:
        text = repr(self.params)
        return f"Case({self.method!r}, {text[:500]}{'...' if len(text) > 500 else ''})"


class Methods:
    """Params for every routed method: from the schema, with live session ids, safe MCP
    servers and mostly absolute paths mixed in, then damaged at one spot."""

    SKIP = ("mcpServers",)  # never damage a server into something that would run

    def __init__(self, client: InProcessAgent | AgentProcess, workspace: str) -> None:
        self.client = client
        self.workspace = workspace
        self.live: list[str] = []
        self.driver = Driver(client)
        self.ids = itertools.count()
        roots = st.sampled_from([workspace, "/", "/nonexistent/acp-fuzz"])
        odd_paths = st.builds(lambda root, c, rest: root + c + rest, roots, ODD_CHARS,
                              st.text(max_size=4)) | TEXT
        paths = mostly(roots, odd_paths)
        generator = Generator({
            "SessionId": mostly(st.integers(0, 3).map(self.session_id), TEXT),
            "McpServer": st.just({"name": "fuzz", "command": "/nonexistent/acp-fuzz-mcp",
                                  "args": [], "env": []}),
            ".mcpServers": st.just([]),
            ".cwd": paths,
            ".additionalDirectories": st.lists(paths, max_size=2),
            ".modeId": mostly(st.sampled_from(["ask", "accept-edits", "plan", "bypass"]), TEXT),
            ".configId": mostly(st.sampled_from(["mode", "model", "thought_level"]), TEXT),
            ".value": mostly(st.sampled_from(["ask", "plan", "offline", "low"]),
                             TEXT | st.booleans()),
            ".methodId": mostly(st.just("api-key"), TEXT),
            ".text": mostly(st.sampled_from(["hi", "/help", "/mode plan", "/mode ask",
                                             "/model x", "/plan", "/nope"]),
                            st.text(max_size=20)),
        })
        defs = schema_defs()
        by_method = {d["x-method"]: name for name, d in defs.items()
                     if d.get("x-side") == "agent" and not name.endswith("Response")}
        by_method["_session/steering"] = "PromptRequest"  # the extension: the same params
        self.strategies = {
            method: generator.definition(by_method[method]) for method in self.methods()
        }

    def methods(self) -> list[str]:
        from acp_agent.client import ClientProxy
        from acp_agent.handlers.agent import Agent
        from acp_agent.rpc.connection import Connection
        from acp_agent.rpc.framing import LineReader, MemoryPipe

        connection = Connection(LineReader(), MemoryPipe(LineReader()))
        return sorted(Agent(Config(), ClientProxy(connection)).routes())

    def session_id(self, i: int) -> str:
        return self.live[i % len(self.live)] if self.live else "no-session"

    async def refresh(self) -> None:
        """Keep two sessions open (fuzzed close and delete requests end some)."""
        while len(self.live) < 2:
            self.live.append(await self.client.new_session(self.workspace))

    def cases(self) -> st.SearchStrategy[Case]:
        @st.composite
        def case(draw: st.DrawFn) -> Case:
            method = draw(st.sampled_from(sorted(self.strategies)))
            params = draw(self.strategies[method])
            return Case(method, draw(mutate(params, self.SKIP)))
        return case()

    async def check(self, method: str, params: Json, ensure_ascii: bool) -> None:
        await self.refresh()
        notification = method == "session/cancel"
        message: dict[str, Json] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notification:
            message["id"] = f"m{next(self.ids)}"
        want = Expect(0, 0) if notification else expect(message)
        got = await self.driver.exchange([encode(message, ensure_ascii)], want, message)
        ended = method in ("session/close", "session/delete", "session/archive") and any(
            "result" in m for m in got)
        if ended and isinstance(params, dict) and params.get("sessionId") in self.live:
            self.live.remove(params["sessionId"])


def test_fuzz_every_method(checker: SchemaChecker, runner: asyncio.Runner, tmp_path: Path,
                           workspace: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([]))  # the model says the script ran out, and stops
    config = Config(state_dir=str(tmp_path / "state"), offline_script=str(script))
    client = InProcessAgent(checker, config)
    runner.run(client.start())
    runner.run(client.initialize())
    methods = Methods(client, workspace)
    seen: set[str] = set()

    @fuzz_settings(METHOD_EXAMPLES)
    @given(methods.cases(), st.integers(0, 5))
    def check(case: Case, ascii_: int) -> None:
        seen.add(case.method)
        runner.run(methods.check(case.method, case.params, ensure_ascii=ascii_ > 0))
        running(client)

    check()
    assert seen == set(methods.strategies)
    sid = runner.run(client.new_session(workspace))  # and turns still run
    assert runner.run(client.prompt(sid, "still there?"))["stopReason"] == "end_turn"
    runner.run(client.close())


# --------------------------------------------------------------------------- (c) over stdio


async def test_fuzz_methods_over_stdio(checker: SchemaChecker, state_dir: str, tmp_path: Path,
                                       workspace: str) -> None:
    """A bounded run of (b) against a real agent subprocess: the same answers through
    real pipes, and the process exits cleanly after it, having logged no failure."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([]))
    agent = AgentProcess(checker, "--state-dir", state_dir,
                         env={"ACP_AGENT_OFFLINE_SCRIPT": str(script)})
    async with agent:
        await agent.initialize()
        methods = Methods(agent, workspace)
        cases = methods.cases()
        loop = asyncio.get_running_loop()

        @fuzz_settings(STDIO_EXAMPLES)
        @given(cases, st.integers(0, 5))
        def check(case: Case, ascii_: int) -> None:
            future = asyncio.run_coroutine_threadsafe(
                methods.check(case.method, case.params, ensure_ascii=ascii_ > 0), loop)
            future.result()
            assert agent.proc is not None and agent.proc.returncode is None

        await asyncio.to_thread(check)
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "still there?"))["stopReason"] == "end_turn"
    assert agent.proc is not None and agent.proc.returncode == 0
    assert b"cannot dispatch" not in agent.stderr and b"handler failed" not in agent.stderr
