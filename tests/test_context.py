"""Making room: old large tool results become stubs, once, recorded, restored."""

from __future__ import annotations

from pathlib import Path

from acp_agent.conversation import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from acp_agent.engine.context import KEEP_RECENT, MIN_CHARS, prunable, prune
from acp_agent.protocol import types as t
from acp_agent.sessions.records import Header
from acp_agent.sessions.replay import restore
from acp_agent.sessions.session import Session
from acp_agent.sessions.store import Store


def exchange(i: int, size: int) -> list[Message]:
    call = ToolCallPart(f"c{i}", "read_file", {"path": f"src/f{i}.py", "offset": 1})
    return [
        AssistantMessage([TextPart(f"reading {i}"), call]),
        ToolResultMessage(f"c{i}", "read_file", [TextPart("x" * size)]),
    ]


async def _emit(session_id: str, update: t.SessionUpdate) -> None:
    return None


def session_with(sizes: list[int]) -> Session:
    session = Session("sess_ctx", "/w", _emit)
    session.history = [UserMessage([TextPart("go")])]
    for i, size in enumerate(sizes):
        session.history += exchange(i, size)
    return session


def texts(session: Session) -> dict[str, str]:
    return {
        m.call_id: m.parts[0].text  # type: ignore[union-attr]
        for m in session.history
        if isinstance(m, ToolResultMessage)
    }


def test_nothing_happens_below_the_threshold() -> None:
    session = session_with([50_000] * 10)
    assert prune(session, window=1_000_000, prune_at=0.6) == 0


def test_old_large_results_become_stubs_and_recent_ones_stay() -> None:
    sizes = [50_000, 100, 50_000, 50_000, 50_000, 50_000, 50_000]  # ~75 k tokens
    session = session_with(sizes)
    before = texts(session)
    # past 60 % of 100 k; the newest whole up to 25 k tokens (two results here)
    assert prune(session, window=100_000, prune_at=0.6) == 4
    after = texts(session)
    assert after["c1"] == before["c1"]  # small: kept
    for i in range(len(sizes) - KEEP_RECENT, len(sizes)):
        assert after[f"c{i}"] == before[f"c{i}"]  # recent: kept
    assert after["c0"] == (
        "[Earlier result of read_file(path='src/f0.py', offset=1): 50,000 characters, "
        "removed to make room in the context. Call the tool again if you need it.]"
    )
    assert prunable(session.history) == []  # stubs are small: nothing left to do


def test_stubs_are_recorded_and_come_back_with_the_session(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    session = session_with([MIN_CHARS * 10] * (KEEP_RECENT + 2))  # ~20 k tokens
    session.log = store.create(Header(id="sess_ctx", cwd="/w", created_at="2026-01-01"))
    from acp_agent.sessions.records import AddMessage

    session.log.extend([AddMessage(message=m) for m in session.history])
    assert prune(session, window=10_000, prune_at=0.5) == 2
    session.close()
    assert restore(store.read("sess_ctx")).history == session.history
