"""Interop: ``acp-agent serve`` driven by the official TypeScript SDK's remote clients,
``createHttpStream`` (Streamable HTTP) and ``createWebSocketStream`` (WebSocket over the
``ws`` package), both pinned in ``package.json``.

``ts_remote.mjs`` taps every message under the SDK (POST bodies, SSE events, frames); each
connection's messages are replayed here through a schema checker of its own (request ids
are per connection), whose failures are the test's. A missing node, SDK or ``ws`` fails
these tests, it never skips them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ..limits import SCENARIO, WAIT, limit
from ..remote import TOKEN, ServeProcess
from ..schema_check import SchemaChecker
from .test_ts_sdk import _require_client

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "ts_remote.mjs"
RUN_TIMEOUT = SCENARIO  # the whole scenario; each step has WAIT
HANG = [{"text": "partial answer "}, {"hang": True}, {"text": "NEVER-REACHED"}]
SCRIPT = [
    [{"text": "Hello from the remote agent!"}],
    [{"tool_call": {"name": "write_file",
                    "arguments": {"path": "note.txt", "content": "written on the server\n"}}}],
    [{"text": "The note is written."}],
    HANG, HANG, HANG,
]  # fmt: skip


def _require_ws() -> None:
    if not (HERE / "node_modules" / "ws" / "package.json").is_file():
        pytest.fail("the `ws` package is not installed: run `npm ci --prefix tests/interop`",
                    pytrace=False)  # fmt: skip


async def run_remote(checker: SchemaChecker, tmp_path: Path, url: str, transport: str,
                     scenario: str, **extra: str) -> dict[str, Any]:  # fmt: skip
    """Run ``ts_remote.mjs``; replay its wire per connection; its JSON summary."""
    node = _require_client()
    _require_ws()
    raw = tmp_path / f"raw-{scenario}-{transport}.jsonl"
    args = {"url": url, "transport": transport, "token": TOKEN, "scenario": scenario,
            "raw-log": str(raw), "timeout-ms": str(int((RUN_TIMEOUT - limit(5)) * 1000)),
            "step-timeout-ms": str(int(WAIT * 1000)), **extra}  # fmt: skip
    command = [node, str(CLIENT), *[x for k, v in args.items() for x in (f"--{k}", v)]]
    proc = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
    replay(checker, raw)
    try:
        summary: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    except (IndexError, ValueError):
        pytest.fail(f"ts_remote.mjs printed no summary (exit {proc.returncode})\n"
                    f"stdout: {out.decode()[-3000:]}\nstderr: {err.decode()[-3000:]}")
    assert proc.returncode == 0 and summary["ok"], (
        json.dumps(summary["errors"], indent=1) + f"\nclient stderr: {err.decode()[-3000:]}")
    return summary


def replay(checker: SchemaChecker, raw: Path) -> dict[str, int]:
    """Each connection's messages through a checker of its own; how many each sent."""
    checkers: dict[str, SchemaChecker] = {}
    for text in raw.read_text().splitlines():
        entry = json.loads(text)
        own = checkers.setdefault(entry["conn"], SchemaChecker())
        if entry["dir"] == "client->agent":
            own.observe_inbound(json.loads(entry["line"]))
        else:
            own.check_line(entry["line"])
    for own in checkers.values():
        checker.failures.extend(own.failures)
    return {conn: own.checked for conn, own in checkers.items()}


@pytest.fixture
async def server(tmp_path: Path, state_dir: str) -> Any:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    proc = ServeProcess("--listen", "127.0.0.1:0", "--state-dir", state_dir,
                        env={"ACP_AGENT_SERVE_TOKEN": TOKEN,
                             "ACP_AGENT_OFFLINE_SCRIPT": str(script)})  # fmt: skip
    await proc.start()
    yield proc
    await proc.close()


@pytest.mark.parametrize("transport", ["http", "ws"])
async def test_the_sdk_clients_hold_a_conversation(
    checker: SchemaChecker, tmp_path: Path, server: ServeProcess, transport: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    s = await run_remote(checker, tmp_path, server.url, transport, "conversation",
                         workspace=str(workspace))  # fmt: skip
    c = s["conversation"]
    assert s["sdkErrors"] == []
    # refused without the token, before anything is opened
    assert "401" in c["noToken"]["message"]
    assert [h["status"] for h in s["http"] if h["conn"] == "noauth"] == [401]
    # initialize: 200 with Acp-Connection-Id (HTTP) or 101 with it (WebSocket)
    first = next(h for h in s["http"] if h["conn"] == "A")
    assert first["status"] == (200 if transport == "http" else 101) and first["connectionId"]
    assert c["loadSession"] is True
    assert c["authMethods"] == ["api-key"]  # no terminal login: the client machine's
    assert c["hello"] == {"stopReason": "end_turn", "text": "Hello from the remote agent!"}
    # the permission question went to the client; the tool ran on the server's files
    assert c["write"] == {"stopReason": "end_turn", "text": "The note is written."}
    assert (workspace / "note.txt").read_text() == "written on the server\n"
    assert [r["method"] for r in c["clientRequests"]] == ["session/request_permission"]
    assert c["cancelled"] == {"stopReason": "cancelled", "text": "partial answer "}
    assert c["cancelRequest"] == {"stopReason": "cancelled", "text": "partial answer "}
    # B was refused the session A held, clearly (409 over HTTP, a JSON-RPC error on WS)
    if transport == "http":
        assert c["refused"]["status"] == 409
        assert "open on another connection" in c["refused"]["body"]
    else:
        assert c["refused"]["code"] == -32600
        assert "open on another connection" in c["refused"]["message"]
    # A went away mid-turn; B reattached: the whole conversation replayed
    assert c["replayedUser"] == ["hello", "write the note", "cancel me",
                                 "cancel this request", "left hanging"]  # fmt: skip
    assert c["replayedAgent"] == ("Hello from the remote agent!The note is written."
                                  + "partial answer " * 3)  # fmt: skip
    assert "tool_call" in c["replayedKinds"]
    assert c["after"] == {"stopReason": "end_turn", "text": "Hello from the remote agent!"}
    assert s["raw"]["A"] > 10 and s["raw"]["B"] > 5
    assert "NEVER-REACHED" not in json.dumps(s)
    assert server.proc is not None and server.proc.returncode is None  # it lived on
