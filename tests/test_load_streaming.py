"""``session/load`` streams (issue 17): a log is read a block at a time with the same
records and warnings as reading it whole; its transcript comes in batches, each update as
soon as nothing later in the log can change it, and the batches joined are exactly the
transcript built from the whole log (random logs, odd orders included)."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Literal

import pytest

from acp_agent import log
from acp_agent.protocol import UNSET
from acp_agent.protocol import types as t
from acp_agent.sessions import records
from acp_agent.sessions.records import (
    ChildUpdate,
    Header,
    Prompt,
    Record,
    TurnEnd,
    Update,
    encode,
    parse,
)
from acp_agent.sessions.replay import scan
from acp_agent.sessions.store import Store
from acp_agent.sessions.transcript import (
    Pair,
    Uses,
    load_batches,
    transcript,
    transcript_batches,
    transcripts,
)

from .test_session_store import build_session, header


def random_log(rng: random.Random, length: int) -> list[Record]:
    """Records in any order the writer could leave (and some it would not)."""
    out: list[Record] = [header()]
    ids = [f"call_{i}" for i in range(6)]
    compactions = ["k1", "k2"]
    for n in range(length):
        kind = rng.randrange(18)
        at = f"2025-01-01T00:00:{n:02d}.000Z"
        if kind == 0:
            blocks: list[t.ContentBlock] = [t.TextContent(text=f"q{n}")]
            out.append(Prompt(message_id=f"u{n}", blocks=blocks, at=at))
        elif kind == 1:
            out.append(TurnEnd(stop_reason="end_turn", at=at))
        elif kind in (2, 3, 4):
            cls = t.AgentThoughtChunk if kind == 4 else t.AgentMessageChunk
            mid = rng.choice(["m1", "m2", "m3"])
            out.append(Update(update=cls(content=t.TextContent(text=f"w{n} "), message_id=mid)))
        elif kind == 5:
            started = rng.choice(STARTED)
            call = t.ToolCall(tool_call_id=rng.choice(ids), title=f"T{n}", status=started)
            out.append(Update(update=call))
        elif kind in (6, 7):
            status = rng.choice(STATUSES)
            content: list[t.ToolCallContent] = [t.Terminal(terminal_id="term")]
            if rng.random() < 0.5:
                content = [t.Content(content=t.TextContent(text=f"out{n}"))]
            update = t.ToolCallUpdateSessionUpdate(
                tool_call_id=rng.choice(ids), status=status, content=content,
                raw_output={"output": f"o{n}"} if rng.random() < 0.5 else UNSET,
            )  # fmt: skip
            out.append(Update(update=update))
        elif kind == 8:
            progress = rng.choice(PROGRESS)
            compaction = t.CompactionUpdate(compaction_id=rng.choice(compactions), status=progress)
            out.append(Update(update=compaction))
        elif kind == 9:
            chunk = t.CompactionSummaryChunk(
                compaction_id=rng.choice(compactions), content=t.TextContent(text=f"s{n}")
            )
            out.append(Update(update=chunk))
        elif kind == 10:
            out.append(Update(update=t.SessionInfoUpdate(title=f"title {n}", updated_at=at)))
        elif kind == 11:
            out.append(Update(update=t.UsageUpdate(used=n, size=100)))
        elif kind == 12:
            out.append(Update(update=t.Plan(entries=[])))
        elif kind == 13:
            out.append(Update(update=t.Notice(severity="info", title="n")))
        elif kind == 14:  # a session-directed message, upserted or streamed
            mid = rng.choice(["sm1", "sm2"])
            if rng.random() < 0.5:
                message = t.SessionMessage(message_id=mid, sender_session_id=f"s{n}")
                out.append(Update(update=message))
            else:
                piece = t.SessionMessageChunk(message_id=mid, content=t.TextContent(text=f"c{n}"))
                out.append(Update(update=piece))
        elif kind == 15:  # a subagent announced (some twice, some never)
            out.append(Update(update=t.SubagentUpdate(session_id=rng.choice(CHILDREN))))
        else:  # a subagent's own traffic, kept in this log
            said = t.AgentMessageChunk(content=t.TextContent(text=f"k{n}"), message_id=f"k{n}")
            out.append(ChildUpdate(session_id=rng.choice(CHILDREN), update=said))
    return out


CHILDREN = ["child_a", "child_b", "child_c"]
STARTED: list[Literal["pending", "in_progress"]] = ["pending", "in_progress"]
STATUSES: list[Literal["in_progress", "completed", "failed"]] = [
    "in_progress",
    "completed",
    "failed",
]
PROGRESS: list[Literal["in_progress", "completed"]] = ["in_progress", "completed"]


def streamed(
    records_: list[Record], batch: int, live: bool, caps: t.ClientCapabilities
) -> list[list[Pair]]:
    uses = Uses()
    for _ in uses.tap(records_):
        pass
    return list(
        load_batches("sess", records_, caps, uses.children, live=live, uses=uses, batch=batch)
    )


CAPS = [
    t.ClientCapabilities(),
    t.ClientCapabilities(
        plan=t.PlanCapabilities(),
        session=t.ClientSessionCapabilities(compaction=t.CompactionCapabilities()),
        subagents=t.SubagentCapabilities(),
    ),
]


@pytest.mark.parametrize("seed", range(40))
def test_batches_joined_are_the_transcript(seed: int) -> None:
    rng = random.Random(seed)
    log_ = random_log(rng, rng.randrange(5, 300))
    for caps in CAPS:
        for live in (False, True):
            whole = transcripts("sess", log_, caps, live=live)
            for batch in (0, 1, 7):
                batches = streamed(log_, batch, live, caps)
                assert [u for b in batches for u in b] == whole, (seed, batch, live)


def test_random_logs_do_stream() -> None:
    """Not vacuous: updates leave before the end in most of those logs, children's and
    session-directed messages included."""
    counts = []
    kinds: set[str] = set()
    for seed in range(40):
        rng = random.Random(seed)
        batches = streamed(random_log(rng, rng.randrange(5, 300)), 0, False, CAPS[1])
        counts.append(len(batches))
        for b in batches[:-1]:
            kinds.update(f"{sid == 'sess'}:{type(u).__name__}" for sid, u in b)
    assert sum(counts) > 2 * len(counts)
    assert {"False:AgentMessageChunk", "True:SessionMessage", "True:SubagentUpdate"} <= kinds


def test_a_long_session_is_replayed_as_it_is_read(state_dir: str) -> None:
    """The first batch comes long before the log's end has been read."""
    store = Store(state_dir)
    build_session(store, "sess_long", 300)
    with store.snapshot("sess_long") as snapshot:
        state, uses = scan(snapshot.records())
        read = 0

        def counted() -> object:
            nonlocal read
            for record in snapshot.records():
                read += 1
                yield record

        batches = transcript_batches(counted(), live=False, uses=uses, batch=64)  # type: ignore[arg-type]
        first = next(batches)
        assert first and read < uses.count // 4
        rest = [u for b in batches for u in b]
    assert [*first, *rest] == transcript(store.read("sess_long"))
    assert len(state.history) == 4 * 300


@pytest.mark.parametrize("block", [7, 64, 1000, 1 << 20])
def test_blocks_read_what_the_whole_file_says(
    block: int, state_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Block after block: the same records, the same warnings (garbage, a torn tail)."""
    store = Store(state_dir)
    build_session(store, "sess_1", 5)
    path = store.log_path("sess_1")
    with open(path, "ab") as fh:
        fh.write(b"garbage\n\n" + encode(TurnEnd(stop_reason="x", at="now")))
        fh.write(b'{"r":"turn_end","stop_reason":"cut')  # a torn tail
    data = Path(path).read_bytes()
    logfile = tmp_path / "whole.log"
    log.configure("warning", str(logfile))
    try:
        whole = parse(data, path)
    finally:
        log.configure("warning")
    monkeypatch.setattr(records, "BLOCK", block)
    logfile2 = tmp_path / "blocks.log"
    log.configure("warning", str(logfile2))
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            streamed_records = list(records.read_records(fd, path))
        finally:
            os.close(fd)
    finally:
        log.configure("warning")
    assert streamed_records == whole and isinstance(whole[0], Header)
    warned = [line.split('"timestamp"')[0] for line in logfile.read_text().splitlines()]
    assert [line.split('"timestamp"')[0] for line in logfile2.read_text().splitlines()] == warned
    assert len(warned) == 2 and "torn line" in warned[1] and "bad log line" in warned[0]
