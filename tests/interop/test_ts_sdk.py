"""Interop: drive ``python -m acp_agent`` with the official TypeScript SDK client.

``ts_client.mjs`` is a real client built on ``@agentclientprotocol/sdk`` (pinned in
``package.json``; install with ``npm ci --prefix tests/interop``). It taps every raw line
in both directions below the SDK; each agent line is replayed here through the schema
``checker`` fixture. A missing node or SDK fails these tests, it never skips them.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..fakes.llm_server import FakeLLMServer, Finish, Reply, Text
from ..harness import agent_env
from ..limits import SCENARIO, WAIT, limit
from ..schema_check import SchemaChecker

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "ts_client.mjs"
SDK_DIR = HERE / "node_modules" / "@agentclientprotocol" / "sdk"
RUN_TIMEOUT = SCENARIO


def _require_client() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: install Node.js >= 20 to run the TypeScript SDK "
                    "interop tests", pytrace=False)
    if not (SDK_DIR / "package.json").is_file():
        pytest.fail(f"the official ACP TypeScript SDK is not installed ({SDK_DIR} missing): "
                    "run `npm ci --prefix tests/interop`", pytrace=False)
    return node


def _command(tmp_path: Path, state_dir: str, scenario: str, *agent_args: str) -> list[str]:
    node = _require_client()
    return [
        node, str(CLIENT), "--scenario", scenario, "--raw-log", str(_raw_log(tmp_path, scenario)),
        "--timeout-ms", str(int((RUN_TIMEOUT - limit(5)) * 1000)),
        "--step-timeout-ms", str(int(WAIT * 1000)), "--",
        sys.executable, "-m", "acp_agent", "--state-dir", state_dir, *agent_args,
    ]


def _raw_log(tmp_path: Path, scenario: str) -> Path:
    return tmp_path / f"raw-{scenario}.jsonl"


def run_ts_client(
    checker: SchemaChecker, tmp_path: Path, state_dir: str, scenario: str
) -> dict[str, Any]:
    """Run one scenario of ts_client.mjs against the agent; replay its raw lines."""
    xdg = tmp_path / "xdg-config"
    xdg.mkdir(exist_ok=True)
    cmd = _command(tmp_path, state_dir, scenario)
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=tmp_path,
            env=agent_env({"XDG_CONFIG_HOME": str(xdg)}),
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"ts_client.mjs did not finish within {RUN_TIMEOUT} s\n"
                    f"stdout: {exc.stdout!r}\nstderr: {exc.stderr!r}")
    return _summary(checker, _raw_log(tmp_path, scenario), proc.returncode, proc.stdout,
                    proc.stderr)


async def run_ts_client_async(
    checker: SchemaChecker, tmp_path: Path, state_dir: str, scenario: str, *agent_args: str,
    env: dict[str, str],
) -> dict[str, Any]:
    """:func:`run_ts_client` while this event loop serves (a fake model server, say)."""
    proc = await asyncio.create_subprocess_exec(
        *_command(tmp_path, state_dir, scenario, *agent_args), cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=agent_env(env))
    try:
        out, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        pytest.fail(f"ts_client.mjs did not finish within {RUN_TIMEOUT} s\n"
                    f"stdout: {out!r}\nstderr: {err!r}")
    assert proc.returncode is not None
    return _summary(checker, _raw_log(tmp_path, scenario), proc.returncode, out.decode(),
                    err.decode())


def run_client_script(
    checker: SchemaChecker, tmp_path: Path, state_dir: str, client: Path
) -> dict[str, Any]:
    """Run a client of its own (``ts_subagents.mjs``, ``ts_steering.mjs``: each drives an
    agent it starts, on a script it writes) against ``python -m acp_agent``; replay its
    raw lines; its summary, checked as :func:`run_ts_client`'s."""
    node = _require_client()
    raw_log = tmp_path / f"raw-{client.stem}.jsonl"
    cmd = [
        node, str(client), "--raw-log", str(raw_log),
        "--timeout-ms", str(int((RUN_TIMEOUT - limit(5)) * 1000)),
        "--step-timeout-ms", str(int(WAIT * 1000)), "--",
        sys.executable, "-m", "acp_agent", "--state-dir", state_dir,
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              cwd=tmp_path, env=agent_env())  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{client.name} did not finish within {RUN_TIMEOUT} s\n"
                    f"stdout: {exc.stdout!r}\nstderr: {exc.stderr!r}")  # fmt: skip
    return _summary(checker, raw_log, proc.returncode, proc.stdout, proc.stderr)


def _summary(
    checker: SchemaChecker, raw_log: Path, returncode: int, stdout: str, stderr: str
) -> dict[str, Any]:
    replay_raw_log(checker, raw_log)

    lines = stdout.strip().splitlines()
    try:
        summary: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        pytest.fail(f"ts_client.mjs printed no JSON summary (exit {returncode})\n"
                    f"stdout: {stdout[-3000:]}\nstderr: {stderr[-3000:]}")
    assert returncode == 0 and summary["ok"], (
        f"TypeScript SDK client failed (exit {returncode}): "
        + json.dumps(summary["errors"], indent=1)
        + f"\nSDK errors: {summary['sdkErrors']}\nagent stderr: {summary['stderrTail']}"
        + f"\nclient stderr: {stderr[-2000:]}"
    )
    assert summary["sdkVersion"] == "2.4.0"
    # Every agent line was seen by the checker (none lost between the tap and here).
    assert summary["raw"]["agentToClient"] > 0
    assert checker.checked == summary["raw"]["agentToClient"]
    return summary


def replay_raw_log(checker: SchemaChecker, raw_log: Path) -> None:
    """Feed the tapped wire to the checker, in wire order."""
    if not raw_log.exists():
        return
    for text in raw_log.read_text().splitlines():
        entry = json.loads(text)
        if entry.get("unterminated"):
            checker._fail(
                f"{entry['dir']} line without newline terminator: {entry['line'][:200]!r}"
            )
        if entry["dir"] == "client->agent":
            try:
                checker.observe_inbound(json.loads(entry["line"]))
            except ValueError:
                checker._fail(f"the TS client wrote a non-JSON line: {entry['line'][:200]!r}")
        else:
            checker.check_line(entry["line"])


def test_ts_sdk_prompt_cancel_and_recover(
    checker: SchemaChecker, tmp_path: Path, state_dir: str
) -> None:
    s = run_ts_client(checker, tmp_path, state_dir, "full")

    assert s["initialize"]["protocolVersion"] == 1
    assert s["sessionId"]
    turns = {t["name"]: t for t in s["turns"]}
    assert [t["name"] for t in s["turns"]] == ["hello", "long-cancelled", "after-cancel"]
    assert [t["stopReason"] for t in s["turns"]] == ["end_turn", "cancelled", "end_turn"]

    hello = turns["hello"]
    assert hello["updateCounts"].get("agent_message_chunk", 0) > 0
    assert hello["updateCounts"].get("agent_thought_chunk", 0) > 0
    assert "Hello from the scripted offline model!" in hello["text"]

    cancelled = turns["long-cancelled"]
    assert cancelled["text"].startswith("partial answer")
    assert "NEVER-REACHED" not in cancelled["text"]
    # The script hangs after the first chunk: only the cancel can end the turn, and
    # nothing after the hang came.

    after = turns["after-cancel"]
    assert "Still here after the cancel." in after["text"]

    for t in s["turns"]:
        assert t["lateUpdates"] == {}, t
    assert s["updateCounts"].get("usage_update", 0) > 0
    assert s["sessionClosed"] is True
    assert s["permissionRequests"] == []
    assert s["unexpectedRequests"] == []
    assert s["agentExit"] == {"code": 0, "signal": None}


def test_ts_sdk_demo_model(checker: SchemaChecker, tmp_path: Path, state_dir: str) -> None:
    """The built-in demo model: greeting, then ``run echo hi`` (permission answered allow)."""
    s = run_ts_client(checker, tmp_path, state_dir, "demo")

    assert [t["stopReason"] for t in s["turns"]] == ["end_turn", "end_turn"]
    greeting, run = s["turns"]
    assert greeting["updateCounts"].get("agent_message_chunk", 0) > 0
    assert run["updateCounts"], "no session/update during the run_command turn"
    for p in s["permissionRequests"]:  # only once the agent has a run_command tool
        assert "allow_once" in p["optionKinds"]
        assert p["toolCallAnnouncedBefore"], p
    assert s["agentExit"] == {"code": 0, "signal": None}


def test_ts_sdk_session_catalogue(checker: SchemaChecker, tmp_path: Path, state_dir: str) -> None:
    """The unstable catalogue methods by the SDK's own names (session.setTitle, status,
    archive, unarchive; list's ``archived`` filter), a session archived mid-turn."""
    s = run_ts_client(checker, tmp_path, state_dir, "catalog")
    catalog = s["catalog"]
    assert catalog["title"] == "Interop title"
    assert catalog["archivedStopReason"] == "cancelled"
    assert catalog["status"] == ["open", "saved", "saved", "saved"]
    assert catalog["lists"]["default"] == ["titled:false:Interop title"]
    assert catalog["lists"]["only"] == ["busy:true:"]
    assert s["sdkErrors"] == []


def test_ts_sdk_draft_features(checker: SchemaChecker, tmp_path: Path, state_dir: str) -> None:
    """The unstable client receives notices, plan documents and compaction intact."""
    s = run_ts_client(checker, tmp_path, state_dir, "drafts")
    assert [t["stopReason"] for t in s["turns"]] == ["end_turn", "end_turn", "end_turn"]
    drafts = s["drafts"]
    assert drafts["notice"]["severity"] == "warning"
    assert drafts["planUpdate"]["plan"]["content"].startswith("## Plan")
    assert (
        drafts["compaction"][0] == "compaction_update"
        and "compaction_summary_chunk" in drafts["compaction"]
    )
    assert s["sdkErrors"] == []


async def test_ts_sdk_sign_in_and_provider_routing(
    checker: SchemaChecker, tmp_path: Path, state_dir: str
) -> None:
    """The unstable client: terminal sign-in offered, auth/status with its updates, logout,
    providers/list|set|disable, and a prompt through the endpoint the client set."""
    xdg = tmp_path / "xdg-config"
    stored = subprocess.run(
        [sys.executable, "-m", "acp_agent", "login", "--provider", "openai", "--key-from-stdin",
         "--store", "file"], input="sk-stored-by-login\n", text=True, capture_output=True,
        env=agent_env({"XDG_CONFIG_HOME": str(xdg)}), timeout=RUN_TIMEOUT)  # fmt: skip
    assert stored.returncode == 0, stored.stderr
    async with FakeLLMServer() as server:
        server.enqueue(Reply([Text("Routed through the editor's endpoint."), Finish("stop")]))
        s = await run_ts_client_async(
            checker, tmp_path, state_dir, "auth", "--model", "openai:gpt-4.1",
            env={"XDG_CONFIG_HOME": str(xdg), "ACP_INTEROP_LLM_URL": server.openai_url})
    auth = s["auth"]
    assert auth["capabilities"]["auth"] == {"logout": {}, "status": {}}
    assert auth["capabilities"]["providers"] == {}
    assert [m.get("type", "agent") for m in auth["authMethods"]] == ["agent", "terminal"]
    assert auth["statusBefore"] == {"state": "authenticated", "accounts": [
        {"label": "OpenAI API key (stored by acp-agent login)", "active": True}]}
    assert auth["statusAfterLogout"] == {"state": "unauthenticated"}
    assert [u["state"] for u in auth["statusUpdates"]] == ["unauthenticated", "authenticated"]
    assert "`$.baseUrl`" in auth["badUrlMessage"]
    before = {p["providerId"]: p for p in auth["listBefore"]}
    after = {p["providerId"]: p for p in auth["listAfter"]}
    assert before["openai"]["required"] and before["openai"]["current"]["baseUrl"] == (
        "https://api.openai.com/v1")
    assert after["openai"]["current"] == {"apiType": "openai", "baseUrl": server.openai_url}
    assert after["anthropic"]["current"] is None
    (turn,) = s["turns"]
    assert turn["stopReason"] == "end_turn" and "Routed through" in turn["text"]
    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer editor-token"
    assert json.loads((xdg / "acp-agent/credentials/keys.json").read_text())["providers"] == {}
