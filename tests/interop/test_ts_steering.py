"""Interop: steering (``_session/steering``, issue 28) through the official TypeScript SDK
client, as the orchestrators that steer claude-agent-acp and codex-acp call it.

``ts_steering.mjs`` reads the capability from the ``initialize`` result's ``_meta``, then
steers an idle session with ``promptRequired``, a turn whose tool call waits for its
permission answer, an idle session again (a turn starts), with an unknown idle
behaviour, and loads the session. Each raw agent line is replayed here through the
schema ``checker``. A missing node or SDK fails the test, it never skips it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..harness import agent_env
from ..limits import WAIT, limit
from ..schema_check import SchemaChecker
from .test_ts_sdk import _require_client, replay_raw_log

CLIENT = Path(__file__).resolve().parent / "ts_steering.mjs"
RUN_TIMEOUT = limit(90)  # the whole scenario; each step is bounded by WAIT


def test_ts_sdk_steering(checker: SchemaChecker, tmp_path: Path, state_dir: str) -> None:
    node = _require_client()
    raw_log = tmp_path / "raw-steering.jsonl"
    cmd = [
        node, str(CLIENT), "--raw-log", str(raw_log),
        "--timeout-ms", str(int((RUN_TIMEOUT - limit(5)) * 1000)),
        "--step-timeout-ms", str(int(WAIT * 1000)), "--",
        sys.executable, "-m", "acp_agent", "--state-dir", state_dir,
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              cwd=tmp_path, env=agent_env())  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"ts_steering.mjs did not finish within {RUN_TIMEOUT} s\n"
                    f"stdout: {exc.stdout!r}\nstderr: {exc.stderr!r}")  # fmt: skip
    replay_raw_log(checker, raw_log)
    try:
        s = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        pytest.fail(f"ts_steering.mjs printed no JSON summary (exit {proc.returncode})\n"
                    f"stdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr[-3000:]}")  # fmt: skip
    assert proc.returncode == 0 and s["ok"], (
        json.dumps(s["errors"], indent=1) + f"\nagent stderr: {s['stderrTail']}"
        + f"\nclient stderr: {proc.stderr[-2000:]}")  # fmt: skip
    assert s["sdkVersion"] == "2.4.0"
    assert checker.checked == s["raw"]["agentToClient"] > 0
    assert s["advertised"] == {"supported": True, "idleBehaviors": ["promptRequired"]}
    assert s["outcomes"] == {
        "idle": {"outcome": "promptRequired", "reason": "noRunningTurn"},
        "running": {"outcome": "injected"},
        "started": {"outcome": "startedNewTurn"},
        "unknownIdle": -32602,
    }
    assert s["stopReasons"] == ["end_turn"]
    live = [(kind, text) for kind, _, text in s["live"]]
    assert live == [
        ("tool_call", ""), ("user_message_chunk", "briefly please"),
        ("agent_message_chunk", "Briefly: hi."),
        ("user_message_chunk", "one more thing"), ("agent_message_chunk", "Started by a steer."),
    ]  # fmt: skip
    steer_id = s["live"][1][1]
    assert steer_id not in {m[1] for m in s["live"] if m is not s["live"][1]}
    replayed = [(kind, mid, text) for kind, mid, text in s["replayed"] if kind != "tool_call"]
    assert replayed[:3] == [
        ("user_message_chunk", replayed[0][1], "run it"),
        ("user_message_chunk", steer_id, "briefly please"),
        ("agent_message_chunk", s["live"][2][1], "Briefly: hi."),
    ]
    assert [text for _, _, text in replayed[3:]] == ["one more thing", "Started by a steer."]
    assert s["agentExit"] == {"code": 0, "signal": None}
