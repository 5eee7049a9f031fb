"""Interop: steering (``_session/steering``, issue 28) through the official TypeScript SDK
client, as the orchestrators that steer claude-agent-acp and codex-acp call it.

``ts_steering.mjs`` reads the capability from the ``initialize`` result's ``_meta``, then
steers an idle session with ``promptRequired``, a turn whose tool call waits for its
permission answer, an idle session again (a turn starts), with an unknown idle
behaviour, prompts (queued behind the turn the steer started) and loads the session.
Each raw agent line is replayed here through the schema ``checker``. A missing node or SDK
fails the test, it never skips it.
"""

from __future__ import annotations

from pathlib import Path

from ..schema_check import SchemaChecker
from .test_ts_sdk import run_client_script

CLIENT = Path(__file__).resolve().parent / "ts_steering.mjs"


def test_ts_sdk_steering(checker: SchemaChecker, tmp_path: Path, state_dir: str) -> None:
    s = run_client_script(checker, tmp_path, state_dir, CLIENT)
    assert s["advertised"] == {"supported": True, "idleBehaviors": ["promptRequired"]}
    assert s["outcomes"] == {
        "idle": {"outcome": "promptRequired", "reason": "noRunningTurn"},
        "running": {"outcome": "injected"},
        "started": {"outcome": "startedNewTurn"},
        "unknownIdle": -32602,
    }
    assert s["stopReasons"] == ["end_turn", "end_turn"]
    live = [(kind, text) for kind, _, text in s["live"]]
    assert live == [
        ("tool_call", ""), ("user_message_chunk", "briefly please"),
        ("agent_message_chunk", "Briefly: hi."),
        ("user_message_chunk", "one more thing"), ("agent_message_chunk", "Started by a steer."),
        ("agent_message_chunk", "Done."),
    ]  # fmt: skip
    steer_id = s["live"][1][1]
    assert steer_id not in {m[1] for m in s["live"] if m is not s["live"][1]}
    replayed = [(kind, mid, text) for kind, mid, text in s["replayed"] if kind != "tool_call"]
    assert replayed[:3] == [
        ("user_message_chunk", replayed[0][1], "run it"),
        ("user_message_chunk", steer_id, "briefly please"),
        ("agent_message_chunk", s["live"][2][1], "Briefly: hi."),
    ]
    assert [text for _, _, text in replayed[3:]] == [
        "one more thing", "Started by a steer.", "that is all", "Done."]
    assert s["agentExit"] == {"code": 0, "signal": None}
