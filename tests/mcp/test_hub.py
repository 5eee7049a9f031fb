"""McpHub against real MCP servers written with the SDK: stdio, streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import pytest_asyncio

from acp_agent.conversation import ImagePart
from acp_agent.engine.permissions import decide
from acp_agent.errors import ToolError
from acp_agent.mcp import McpHub, PromptError
from acp_agent.protocol import types as t

from ..limits import WAIT, eventually
from ..procs import alive
from ..schema_check import validate_def
from .conftest import SERVERS, LocalServer, Recorder, http, stdio, tool_ctx
from .servers.demo import PNG

# Real server processes (the SDK's imports take a second each): end to end. One worker
# runs the module, so its servers (module fixtures) start once.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow,
              pytest.mark.xdist_group("mcp-hub")]


#: The ``shared`` fixture: one hub with three ready servers, its recorder, its cwd.
Shared = tuple[McpHub, Recorder, str]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(
    web: LocalServer, legacy_sse: LocalServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Shared]:
    """One hub with a stdio, a streamable HTTP and an SSE server, all ready."""
    cwd = str(tmp_path_factory.mktemp("session"))
    rec = Recorder()
    hub = McpHub(
        [
            stdio("local", env={"DEMO_SETTING": "on"}),
            http("web", web.url("/mcp"), headers={"Authorization": "Bearer sekrit"}),
            http("legacy", legacy_sse.url("/sse"), kind="sse"),
        ],
        cwd=cwd,
        on_problem=rec.on_problem,
        on_change=rec.on_change,
    )
    hub.start()
    await hub.wait_ready(WAIT)
    assert hub.status() == {"local": "ready", "web": "ready", "legacy": "ready"}, rec.problems
    yield hub, rec, cwd
    await hub.aclose()


def by_name(hub: McpHub) -> dict[str, Any]:
    return {tool.spec.name: tool for tool in hub.tools()}


async def run(hub: McpHub, tool: str, cwd: str, /, **args: object) -> Any:
    return await by_name(hub)[tool].run(args, tool_ctx(cwd))


# ------------------------------------------------------------------------ listing


async def test_tools_are_namespaced_per_server_with_their_schemas(shared: Shared) -> None:
    """Every server's tools are offered as mcp__<server>__<tool> with the server's schema."""
    hub, rec, _ = shared
    tools = by_name(hub)
    assert {"mcp__local__echo", "mcp__web__echo", "mcp__legacy__echo"} <= tools.keys()
    assert len(tools) == len(hub.tools()) == 3 * 12
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) for name in tools)
    add = tools["mcp__local__add"].spec
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert add.parameters["required"] == ["a", "b"]
    assert add.description.startswith("Add two integers.")
    assert "'local'" in add.description
    assert tools["mcp__local__picture"].spec.parameters == {
        "type": "object", "properties": {}, "title": "pictureArguments"}
    assert rec.problems == []
    assert rec.changes == 3  # each server becoming ready


async def test_annotations_map_to_kind_and_permission_access(
    shared: Shared, tmp_path: Path
) -> None:
    """readOnlyHint tools read (no asking in ask mode); unannotated ones execute and ask."""
    hub, _, cwd = shared
    ctx = tool_ctx(cwd)
    tools = by_name(hub)
    seen = {n: (tools[f"mcp__local__{n}"].kind, tools[f"mcp__local__{n}"].describe({}, ctx).access)
            for n in ("echo", "add", "delete_thing", "remember")}
    assert seen == {"echo": ("read", "read"), "add": ("other", "execute"),
                    "delete_thing": ("edit", "execute"), "remember": ("edit", "write")}
    assert decide("ask", "read", True) == "allow"
    assert decide("ask", "execute", True) == "ask"
    assert decide("plan", "write", True) == "deny"
    echo = tools["mcp__local__echo"]
    info = echo.describe(echo.parse({"text": "x"}), ctx)
    assert info.title == "echo (local MCP)"
    assert info.command is None and echo.spec.name == "mcp__local__echo"  # "always": the tool
    assert info.locations == () and info.paths == ()


# ------------------------------------------------------------------------ calls


async def test_text_result_reaches_model_and_editor(shared: Shared) -> None:
    """A text result is the model's text and one ACP text content block."""
    hub, _, cwd = shared
    out = await run(hub, "mcp__local__echo", cwd, text="hi")
    assert out.text == "echo: hi"
    assert out.content == [t.Content(content=t.TextContent(text="echo: hi"))]
    assert out.images == []


async def test_image_result_becomes_image_part_and_acp_image(shared: Shared) -> None:
    """Images go to the model as ImageParts and to the editor as ACP image content."""
    hub, _, cwd = shared
    out = await run(hub, "mcp__local__picture", cwd)
    png = base64.b64encode(PNG).decode()
    assert out.text == "a tiny picture"
    assert out.images == [ImagePart(data=png, mime_type="image/png")]
    assert out.content[1] == t.Content(content=t.ImageContent(data=png, mime_type="image/png"))
    for block in out.content:
        assert validate_def("ToolCallContent", msgspec.to_builtins(block)) == []


async def test_resource_results_become_text_and_acp_resources(shared: Shared) -> None:
    """Embedded resources and resource links: text for the model, ACP blocks for the editor."""
    hub, _, cwd = shared
    out = await run(hub, "mcp__local__resources", cwd)
    assert "[resource file:///notes.txt]\nnote body" in out.text
    assert "<https://example.com/spec.md>" in out.text and "The spec" in out.text
    embedded, link = (c.content for c in out.content)
    assert isinstance(embedded, t.EmbeddedResource)
    assert embedded.resource.text == "note body"
    assert embedded.resource.mime_type == "text/plain"
    assert isinstance(link, t.ResourceLink)
    assert (link.name, link.uri, link.mime_type) == ("spec", "https://example.com/spec.md",
                                                    "text/markdown")
    for block in out.content:
        assert validate_def("ToolCallContent", msgspec.to_builtins(block)) == []


async def test_is_error_result_raises_tool_error(shared: Shared) -> None:
    """isError results raise ToolError carrying the server's text."""
    hub, _, cwd = shared
    with pytest.raises(ToolError, match="it broke"):
        await run(hub, "mcp__local__fail", cwd)
    assert hub.status()["local"] == "ready"


async def test_stdio_server_gets_env_and_session_cwd(
    shared: Shared, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Configured env is merged over a small base (no agent secrets); cwd is the session's."""
    hub, _, cwd = shared
    assert (await run(hub, "mcp__local__getenv", cwd, name="DEMO_SETTING")).text == "on"
    assert (await run(hub, "mcp__local__getenv", cwd, name="PATH")).text != ""
    assert Path((await run(hub, "mcp__local__cwd", cwd)).text) == Path(cwd).resolve()


async def test_base_env_leaves_out_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """API keys in the agent's environment are not passed to stdio servers."""
    from acp_agent.mcp._server import base_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-nope")
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = base_env()
    assert "OPENAI_API_KEY" not in env
    assert env["LANG"] == "C.UTF-8"


async def test_streamable_http_call_sends_configured_headers(
    shared: Shared, web: LocalServer
) -> None:
    """Calls over streamable HTTP work and carry the configured headers."""
    hub, _, cwd = shared
    assert (await run(hub, "mcp__web__add", cwd, a=2, b=3)).text == "5"
    assert web.headers and all(h.get("authorization") == "Bearer sekrit" for h in web.headers)


async def test_sse_call(shared: Shared) -> None:
    """The deprecated HTTP+SSE transport works too."""
    hub, _, cwd = shared
    assert (await run(hub, "mcp__legacy__echo", cwd, text="old")).text == "echo: old"


@pytest.mark.parametrize("server", ["local", "web"])
async def test_cancel_aborts_slow_call_and_server_stays_usable(
    shared: Shared, server: str, tmp_path: Path
) -> None:
    """Cancelling a call in flight propagates CancelledError (the call would otherwise last
    an hour); the server carries on."""
    hub, _, cwd = shared
    started = tmp_path / "started"
    call = asyncio.ensure_future(
        run(hub, f"mcp__{server}__slow", cwd, seconds=3600, started=str(started)))
    await eventually(started.exists, "the server is running the call")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert hub.status()[server] == "ready"
    out = await asyncio.wait_for(run(hub, f"mcp__{server}__echo", cwd, text="again"), WAIT)
    assert out.text == "echo: again"


# ------------------------------------------------------------------------ prompts


async def test_prompts_are_listed_as_slash_commands(shared: Shared) -> None:
    """Prompts become mcp:<server>:<prompt> commands with an input hint when they take input."""
    hub, _, _ = shared
    prompts = {p.name: p for p in hub.prompts()}
    assert {"mcp:local:greet", "mcp:local:review", "mcp:local:standup",
            "mcp:web:greet", "mcp:legacy:greet"} <= prompts.keys()
    greet, review, standup = (prompts[f"mcp:local:{n}"] for n in ("greet", "review", "standup"))
    assert greet.takes_input and greet.hint == "name"
    assert review.hint == "code=… [language=…]"
    assert not standup.takes_input and standup.hint is None
    assert greet.description == "Greet someone. (MCP: local)"
    assert standup.description == "Standup (MCP: local)"
    for p in prompts.values():
        assert " " not in p.name
        wire = msgspec.to_builtins(p.as_command())
        assert validate_def("AvailableCommand", wire) == []
    assert "input" not in msgspec.to_builtins(standup.as_command())


async def test_prompt_with_one_argument_takes_the_whole_text(shared: Shared) -> None:
    hub, _, _ = shared
    blocks = await hub.get_prompt("mcp:local:greet", "Ada Lovelace")
    assert blocks == [t.TextContent(text="Please greet Ada Lovelace warmly.")]


async def test_prompt_with_several_arguments_parses_key_value_pairs(shared: Shared) -> None:
    hub, _, _ = shared
    blocks = await hub.get_prompt("mcp:web:review", 'code="x = 1" language=go')
    assert blocks == [t.TextContent(text="Review this go code:\nx = 1")]
    blocks = await hub.get_prompt("mcp:local:review", "print(1)")
    assert blocks == [t.TextContent(text="Review this python code:\nprint(1)")]


async def test_prompt_with_several_roles_marks_them(shared: Shared) -> None:
    hub, _, _ = shared
    blocks = await hub.get_prompt("mcp:legacy:standup", "")
    assert [b.text for b in blocks if isinstance(b, t.TextContent)] == [
        "[user]", "What did I do yesterday?",
                                        "[assistant]", "You fixed the parser."]


async def test_prompt_errors_are_prompt_errors(shared: Shared) -> None:
    hub, _, _ = shared
    with pytest.raises(PromptError, match=r"Missing name\. Usage: /mcp:local:greet name"):
        await hub.get_prompt("mcp:local:greet", "  ")
    with pytest.raises(PromptError, match="Unknown MCP command /mcp:nope:x"):
        await hub.get_prompt("mcp:nope:x", "")


# ------------------------------------------------------------------------ failures


async def test_server_crashing_mid_call_is_reported_and_hub_carries_on(
    web: LocalServer, tmp_path: Path
) -> None:
    """A server that dies during a call: ToolError, its tools withdrawn, the server started
    again and reported; the other server works throughout; the dead process is gone.
    (Losing it twice: test_live.py.)"""
    rec = Recorder()
    hub = McpHub([stdio("crashy"), http("web", web.url("/mcp"))], cwd=str(tmp_path),
                 on_problem=rec.on_problem, on_change=rec.on_change)
    hub.start()
    try:
        await hub.wait_ready(WAIT)
        pid = int((await run(hub, "mcp__crashy__pid", str(tmp_path))).text)
        with pytest.raises(ToolError, match="MCP server 'crashy' exited during a call to 'crash'"):
            await run(hub, "mcp__crashy__crash", str(tmp_path))
        assert (await run(hub, "mcp__web__echo", str(tmp_path), text="ok")).text == "echo: ok"
        severity, description = await rec.reported("MCP server 'crashy' stopped; restarted")
        assert severity == "warning" and "exited during a call to 'crash'" in description
        assert hub.status() == {"crashy": "ready", "web": "ready"}
        assert not alive(pid)
        assert int((await run(hub, "mcp__crashy__pid", str(tmp_path))).text) != pid
        assert any(p.server == "crashy" for p in hub.prompts())
        await rec.until(lambda: rec.changes == 4)  # two servers ready, one lost, back
    finally:
        await hub.aclose()


async def test_servers_that_never_start_do_not_hold_up_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad command and a server that never answers: wait_ready returns after its bound
    and reports both; problems found earlier are held until then; aclose kills the hang."""
    import mcp.client.stdio

    # The SDK's grace between closing the hang's stdin and SIGTERM (2 s): not under test.
    monkeypatch.setattr(mcp.client.stdio, "PROCESS_TERMINATION_TIMEOUT", 0.05)
    rec = Recorder()
    pid_file = tmp_path / "hang.pid"
    hub = McpHub(
        [stdio("missing", "", command="/nonexistent/mcp-server"),
         stdio("hang", str(SERVERS / "hang.py"), str(pid_file)),
         stdio("quitter", str(SERVERS / "exit_at_once.py")),
         t.McpServerAny(name="bridge", type="acp", server_id="x")],
        cwd=str(tmp_path), on_problem=rec.on_problem,
    )
    hub.start()
    await eventually(lambda: bool(pid_file.exists() and pid_file.read_text()
                                  and hub.status()["quitter"] == "failed"),
                     "the hang is running and the quitter has failed")
    assert hub.status()["missing"] == "failed"
    assert rec.problems == []  # held until the first wait_ready
    await hub.wait_ready(0.5)  # the hang never gets ready: this returns after 0.5 s
    problems = {title: (severity, desc or "") for severity, title, desc in rec.problems}
    assert problems["MCP server 'missing' failed to start"][0] == "error"
    assert "No such file" in problems["MCP server 'missing' failed to start"][1]
    assert problems["MCP server 'bridge' not started"][0] == "error"
    quitter = problems["MCP server 'quitter' failed to start"][1]
    assert "exited before it was ready" in quitter and "boom: missing config file" in quitter
    assert problems["MCP server 'hang' is still starting"][0] == "warning"
    assert hub.tools() == [] and hub.prompts() == []
    # the hang was reported: not waited for again (this would take an hour), nor reported
    await hub.wait_ready(3600)
    assert len(rec.problems) == 4

    pid = int(pid_file.read_text())
    assert alive(pid)
    await hub.aclose()  # the hang ignores its stdin: the SDK ends it with SIGTERM
    assert not alive(pid)
    assert len(rec.problems) == 4


async def test_a_failure_during_wait_ready_is_told_before_it_returns(tmp_path: Path) -> None:
    """A server failing while a turn waits for the servers: the turn goes on only once
    the user was told (the report yields to the loop, as a write to the editor does)."""
    told: list[str] = []

    async def on_problem(severity: str, title: str, description: str | None) -> None:
        for _ in range(5):  # a report that takes a few turns of the loop to leave
            await asyncio.sleep(0)
        told.append(title)

    hub = McpHub([stdio("quitter", str(SERVERS / "exit_at_once.py"))], cwd=str(tmp_path),
                 on_problem=on_problem)  # fmt: skip
    hub.start()
    assert hub.status()["quitter"] == "starting"
    await hub.wait_ready(WAIT)  # (the announcement is made at once: nothing held)
    assert told == ["MCP server 'quitter' failed to start"]
    await hub.aclose()


async def test_late_server_joins_and_aclose_leaves_no_child_process(tmp_path: Path) -> None:
    """A server not ready within wait_ready's bound is offered once it is; aclose then
    terminates it, is idempotent, and the hub offers nothing after."""
    pid_file, go = tmp_path / "demo.pid", tmp_path / "go"
    rec = Recorder()
    hub = McpHub([stdio("late", str(SERVERS / "demo.py"), "--wait-for", str(go),
                        "--pid-file", str(pid_file))],
                 cwd=str(tmp_path), on_problem=rec.on_problem, on_change=rec.on_change)
    hub.start()
    await hub.wait_ready(0.05)  # the server waits for `go`: certainly not ready yet
    assert [p[:2] for p in rec.problems] == [("warning", "MCP server 'late' is still starting")]
    assert hub.tools() == []
    go.touch()
    await asyncio.wait_for(rec.changed.wait(), WAIT)
    assert "mcp__late__echo" in {tool.spec.name for tool in hub.tools()}
    assert "mcp:late:greet" in {p.name for p in hub.prompts()}

    pid = int(pid_file.read_text())
    assert alive(pid)
    await asyncio.gather(hub.aclose(), hub.aclose())
    await hub.aclose()
    assert not alive(pid)
    assert hub.tools() == [] and hub.prompts() == []
    assert hub.status() == {"late": "closed"}
    assert len(rec.problems) == 1
    hub.start()  # no-op after close
    assert hub.status() == {"late": "closed"}


async def test_hub_without_servers_is_free() -> None:
    """No servers: start/wait_ready/aclose do nothing (and load no SDK)."""
    hub = McpHub([], cwd="/")
    hub.start()
    await hub.wait_ready(5)
    assert hub.tools() == [] and hub.prompts() == []
    await hub.aclose()
