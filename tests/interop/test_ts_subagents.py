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

from pathlib import Path

from ..schema_check import SchemaChecker
from .test_ts_sdk import run_client_script

CLIENT = Path(__file__).resolve().parent / "ts_subagents.mjs"


def test_ts_sdk_subagents(checker: SchemaChecker, tmp_path: Path, state_dir: str) -> None:
    s = run_client_script(checker, tmp_path, state_dir, CLIENT)
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
