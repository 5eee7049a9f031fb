"""Interop: subagents through the official TypeScript SDK client.

``ts_subagents.mjs`` advertises ``subagents: {}`` and ``elicitation: {form: {}}`` and runs
parallel children that ask permission, a cancel of one child by its own id and a cancel
of the parent, questions (``ask_user``) from the parent and from a child answered by the
SDK's elicitation handler, a long answer streamed in ``session_message_chunk`` updates, a
question cancelled with the turn (the SDK aborts its handler on ``$/cancel_request``),
and a ``session/load`` that replays the children's transcripts under their ids. It checks
the wire order itself (announcement before child traffic, idle at the end) and that the
SDK parsed every update; each raw agent line is replayed here through the schema
``checker``. A missing node or SDK fails the test, it never skips it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..harness import agent_env
from ..limits import SCENARIO, WAIT, limit
from ..schema_check import SchemaChecker
from .test_ts_sdk import _require_client, replay_raw_log

CLIENT = Path(__file__).resolve().parent / "ts_subagents.mjs"
RUN_TIMEOUT = SCENARIO


def test_ts_sdk_subagents(checker: SchemaChecker, tmp_path: Path, state_dir: str) -> None:
    node = _require_client()
    raw_log = tmp_path / "raw-subagents.jsonl"
    cmd = [
        node, str(CLIENT), "--raw-log", str(raw_log),
        "--timeout-ms", str(int((RUN_TIMEOUT - limit(5)) * 1000)),
        "--step-timeout-ms", str(int(WAIT * 1000)), "--",
        sys.executable, "-m", "acp_agent", "--state-dir", state_dir,
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              cwd=tmp_path, env=agent_env())
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"ts_subagents.mjs did not finish within {RUN_TIMEOUT} s\n"
                    f"stdout: {exc.stdout!r}\nstderr: {exc.stderr!r}")
    replay_raw_log(checker, raw_log)
    try:
        s = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        pytest.fail(f"ts_subagents.mjs printed no JSON summary (exit {proc.returncode})\n"
                    f"stdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr[-3000:]}")
    assert proc.returncode == 0 and s["ok"], (
        json.dumps(s["errors"], indent=1) + f"\nSDK errors: {s['sdkErrors']}"
        + f"\nagent stderr: {s['stderrTail']}\nclient stderr: {proc.stderr[-2000:]}")
    assert s["sdkVersion"] == "2.4.0"
    assert checker.checked == s["raw"]["agentToClient"] > 0

    root = s["sessionId"]
    assert [t["stopReason"] for t in s["turns"]] == [
        "end_turn", "end_turn", "cancelled", "end_turn", "end_turn", "end_turn", "cancelled"]
    children = s["children"]
    assert sorted(c["title"] for c in children.values()) == [
        "Alpha", "Asker", "Beta", "Slow", "Stuck", "Writer"]
    assert {c["parent"] for c in children.values()} == {root}
    by_title = {c["title"]: c for c in children.values()}
    for title in ("Alpha", "Beta"):
        assert [st["state"] for st in by_title[title]["states"]] == [
            "running", "requires_action", "running", "idle"]
        assert by_title[title]["states"][-1]["stopReason"] == "end_turn"
    for title in ("Slow", "Stuck"):
        assert by_title[title]["states"][-1] == {"state": "idle", "stopReason": "cancelled"}
    # permission requests came under the children's ids, one per parallel child
    assert sorted(p["sessionId"] for p in s["permissionRequests"]) == sorted(
        sid for sid, c in children.items() if c["title"] in ("Alpha", "Beta"))
    assert s["updateCounts"]["subagent_update"] >= 4 * 2
    assert s["updateCounts"]["session_message"] >= 2 * 3  # instructions both ways, answers
    assert "Both children are done." in s["parentText"]
    assert "Carrying on without it." in s["parentText"]
    assert s["agentExit"] == {"code": 0, "signal": None}

    # questions: the parent's, the child's (under its id, requires_action meanwhile), and
    # one cancelled with its turn: the SDK aborted the handler on $/cancel_request
    asker = next(sid for sid, c in children.items() if c["title"] == "Asker")
    asked = s["elicitations"]
    assert [q["sessionId"] for q in asked] == [root, asker, root]
    assert all(q["mode"] == "form" and q["toolCallId"] for q in asked)
    assert all(q["fields"] == ["strategy", "files"] for q in asked)
    assert s["elicitationsAborted"] == 1
    assert [st["state"] for st in by_title["Asker"]["states"]] == [
        "running", "requires_action", "running", "idle"]

    # the long answer: chunks on both views, folded back by the client
    writer = next(sid for sid, c in children.items() if c["title"] == "Writer")
    assert s["updateCounts"]["session_message_chunk"] > 2 * 6
    [(answer_id, answer)] = [(i, m) for i, m in s["messages"][root].items()
                             if m.get("senderSessionId") == writer]
    assert answer["text"] == s["long"] and answer["chunks"] > 1
    [sent] = [m for m in s["messages"][writer].values() if m.get("recipientSessionId") == root]
    assert sent["text"] == s["long"] and sent["recipientMessageId"] == answer_id

    # session/load: every child's transcript under its id, messages whole
    replay = s["replay"]
    assert set(replay["sessions"]) == {root, *children}
    assert "session_message" in replay["kinds"]
    assert "session_message_chunk" not in replay["kinds"]
    [again] = [m for m in replay["messages"][root].values() if m.get("senderSessionId") == writer]
    assert again["text"] == s["long"] and again["chunks"] == 0
