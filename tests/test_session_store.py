"""The session store and replay in process: records, coalescing, torn lines, ownership,
restoring the model's history, materializing the transcript, listing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from acp_agent import log
from acp_agent.conversation import (
    AssistantMessage,
    ImagePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from acp_agent.protocol import UNSET
from acp_agent.protocol import types as t
from acp_agent.sessions.ids import valid_id
from acp_agent.sessions.records import (
    AddMessage,
    Header,
    Prompt,
    Record,
    Settings,
    TruncateHistory,
    TurnEnd,
    Update,
    UsageTotals,
    encode,
    now_iso,
    parse,
)
from acp_agent.sessions.replay import INTERRUPTED, restore
from acp_agent.sessions.session import Session, make_title
from acp_agent.sessions.store import FLUSH_CHARS, Store
from acp_agent.sessions.transcript import transcript

from .limits import eventually

CWD = "/work/project"


def header(sid: str = "sess_1", cwd: str = CWD) -> Header:
    return Header(id=sid, cwd=cwd, created_at=now_iso())


def chunk(
    text: str, mid: str = "m1", thought: bool = False
) -> t.AgentMessageChunk | t.AgentThoughtChunk:
    cls = t.AgentThoughtChunk if thought else t.AgentMessageChunk
    return cls(content=t.TextContent(text=text), message_id=mid)


def records_of(store: Store, sid: str = "sess_1") -> list[Record]:
    return store.read(sid)


def build_session(store: Store, sid: str, turns: int, cwd: str = CWD) -> None:
    """A realistic log of ``turns`` turns: thinking, text, a tool call with its result."""
    answer = "The function parses the configuration and validates every key. " * 8
    output = "\n".join(f"line {i}: some source code here" for i in range(60))
    writer = store.create(header(sid, cwd), [Settings(mode="ask", model="offline")])
    for n in range(turns):
        call_id, tool_id = f"c{n}", f"call_{n + 1}"
        writer.append(
            Prompt(
                message_id=f"msg_u_{n}", blocks=[t.TextContent(text=f"question {n}")], at=now_iso()
            )
        )
        writer.append(AddMessage(message=UserMessage([TextPart(f"question {n}")])))
        writer.chunk(chunk("Let me look at the file first.", f"msg_t_{n}", thought=True))
        writer.chunk(chunk("Reading it. ", f"msg_a_{n}"))
        call = ToolCallPart(call_id, "read_file", {"path": "src/config.py"})
        writer.append(
            AddMessage(
                message=AssistantMessage(
                    [ThinkingPart("Let me look at the file first."), TextPart("Reading it. "), call]
                )
            )
        )
        writer.append(
            Update(
                update=t.ToolCall(
                    tool_call_id=tool_id,
                    title="Read src/config.py",
                    kind="read",
                    status="pending",
                    raw_input={"path": "src/config.py"},
                )
            )
        )
        writer.append(
            Update(update=t.ToolCallUpdateSessionUpdate(tool_call_id=tool_id, status="in_progress"))
        )
        writer.append(
            Update(
                update=t.ToolCallUpdateSessionUpdate(
                    tool_call_id=tool_id,
                    status="completed",
                    content=[t.Content(content=t.TextContent(text=output))],
                    raw_output={"output": output},
                )
            )
        )
        writer.append(
            AddMessage(message=ToolResultMessage(call_id, "read_file", [TextPart(output)]))
        )
        for piece in answer.split(". "):
            writer.chunk(chunk(piece + ". ", f"msg_b_{n}"))
        writer.append(AddMessage(message=AssistantMessage([TextPart(answer)])))
        writer.append(
            UsageTotals(
                context_tokens=1000 + n, input_tokens=900 * (n + 1), output_tokens=100 * (n + 1)
            )
        )
        writer.append(TurnEnd(stop_reason="end_turn", at=now_iso()))
    writer.close()
    store.writer.wait()  # on disk for whoever reads it next (another process, too)


class TestWriter:
    def test_chunks_coalesce_per_message(self, state_dir: str) -> None:
        """A thousand chunks of one message are a few records of at most FLUSH_CHARS (plus
        one chunk) each; a new id or kind starts another."""
        store = Store(state_dir)
        writer = store.create(header())
        for i in range(3):
            writer.chunk(chunk(f"t{i} ", "m0", thought=True))
        for i in range(1000):
            writer.chunk(chunk(f"w{i} "))
        writer.append(Update(update=t.ToolCall(tool_call_id="call_1", title="x")))
        writer.chunk(chunk("after", "m2"))
        writer.chunk(
            t.AgentMessageChunk(
                content=t.ImageContent(data="AA==", mime_type="image/png"), message_id="m2"
            )
        )
        writer.close()
        updates = [r.update for r in records_of(store) if isinstance(r, Update)]
        words = "".join(f"w{i} " for i in range(1000))
        pieces = [u for u in updates if isinstance(u, t.AgentMessageChunk) and u.message_id == "m1"]
        texts = [p.content.text for p in pieces]  # type: ignore[union-attr]
        assert "".join(texts) == words and len(texts) == 2
        assert all(len(text) <= FLUSH_CHARS + len("w999 ") for text in texts)
        updates = [u for u in updates if u not in pieces[1:]]
        pieces[0].content.text = words  # type: ignore[union-attr]
        assert updates == [
            chunk("t0 t1 t2 ", "m0", thought=True),
            chunk(words),
            t.ToolCall(tool_call_id="call_1", title="x"),
            chunk("after", "m2"),
            t.AgentMessageChunk(
                content=t.ImageContent(data="AA==", mime_type="image/png"), message_id="m2"
            ),
        ]

    async def test_streaming_chunks_are_flushed_by_a_timer(self, state_dir: str) -> None:
        """A chunk is buffered, not written at once; a timer (FLUSH_INTERVAL) writes it
        while the message still streams."""
        store = Store(state_dir)
        writer = store.create(header())
        writer.chunk(chunk("streaming "))
        path = Path(store.log_path("sess_1"))
        assert b"streaming" not in path.read_bytes()
        await eventually(lambda: b"streaming" in path.read_bytes(), "the chunk is flushed")
        writer.chunk(chunk("more"))  # the same message goes on in a new record
        writer.close()
        assert transcript(records_of(store)) == [chunk("streaming more")]

    def test_a_torn_tail_is_skipped_and_the_next_record_starts_a_new_line(
        self, state_dir: str, tmp_path: Path
    ) -> None:
        store = Store(state_dir)
        writer = store.create(header())
        writer.append(Settings(mode="plan", model="offline"))
        writer.close()
        store.writer.wait()
        with open(store.log_path("sess_1"), "ab") as fh:
            fh.write(b'{"r":"settings","mode":"by')  # killed mid-write
        logfile = tmp_path / "agent.log"
        log.configure("warning", str(logfile))
        try:
            reopened, records = store.open("sess_1")
            assert reopened is not None
            assert [type(r) for r in records] == [Header, Settings]
            reopened.append(Settings(mode="bypass", model="offline"))
            reopened.close()
            assert restore(store.read("sess_1")).mode == "bypass"
        finally:
            log.configure("warning")
        assert "torn line" in logfile.read_text()

    def test_garbage_lines_are_skipped(self) -> None:
        good: list[Record] = [header(), Settings(mode="ask", model="offline")]
        data = encode(good[0]) + b"\x00\x00garbage\xff\n" + b'{"r":"unknown"}\n' + encode(good[1])
        assert parse(data) == good

    def test_one_owner_at_a_time(self, state_dir: str) -> None:
        """A second open (another process, or here another descriptor) gets no writer."""
        store = Store(state_dir)
        writer = store.create(header())
        writer.append(Settings(mode="plan", model="offline"))
        other, records = store.open("sess_1")
        assert other is None and len(records) == 2
        writer.close()
        mine, _ = store.open("sess_1")
        assert mine is not None
        mine.close()

    def test_unknown_and_invalid_ids(self, state_dir: str) -> None:
        store = Store(state_dir)
        for sid in ("sess_nope", "../x", ".hidden", "", "a/b"):
            with pytest.raises(FileNotFoundError):
                store.open(sid)
            store.delete(sid)  # fine
        assert valid_id("sess_0123abc") and not valid_id("..")


class TestRestore:
    def test_history_comes_back_as_the_session_held_it(self, state_dir: str) -> None:
        store = Store(state_dir)
        session = Session("sess_1", CWD, _no_emit)
        session.log = store.create(header())
        session.add_message(UserMessage([TextPart("one")]))
        session.add_message(AssistantMessage([TextPart("refused")]))
        session.truncate_history(0)
        session.add_message(UserMessage([TextPart("two")]))
        call = ToolCallPart("c1", "read_file", {"path": "a"})
        session.add_message(AssistantMessage([call]))
        session.add_message(ToolResultMessage("c1", "read_file", [TextPart("contents")]))
        session.set_mode("plan")
        session.close()
        assert restore(store.read("sess_1")).history == session.history
        state = restore(store.read("sess_1"))
        assert state.history == [
            UserMessage([TextPart("two")]),
            AssistantMessage([call]),
            ToolResultMessage("c1", "read_file", [TextPart("contents")]),
        ]
        assert state.mode == "plan"

    def test_a_compacted_history(self, state_dir: str) -> None:
        store = Store(state_dir)
        session = Session("sess_1", CWD, _no_emit)
        session.log = store.create(header())
        for i in range(3):
            session.add_message(UserMessage([TextPart(f"q{i}")]))
        session.replace_history([UserMessage([TextPart("summary")])])
        session.add_message(UserMessage([TextPart("next")]))
        session.close()
        assert restore(store.read("sess_1")).history == [
            UserMessage([TextPart("summary")]),
            UserMessage([TextPart("next")]),
        ]

    def test_dangling_tool_calls_get_a_result_where_they_were(self) -> None:
        """A crash mid-tool-call leaves calls without results; they are closed in log
        order, so later truncations still line up."""
        a, b = ToolCallPart("a", "run", {}), ToolCallPart("b", "run", {})
        records: list[Record] = [
            header(),
            AddMessage(message=UserMessage([TextPart("go")])),
            AddMessage(message=AssistantMessage([a, b])),
            AddMessage(message=ToolResultMessage("a", "run", [TextPart("ok")])),
            # killed here; the next process goes on:
            AddMessage(message=UserMessage([TextPart("again")])),
            AddMessage(message=AssistantMessage([TextPart("no")])),
            TruncateHistory(length=4),  # the refusal of "again"
            AddMessage(message=UserMessage([TextPart("third")])),
            AddMessage(message=AssistantMessage([ToolCallPart("c", "run", {})])),
        ]
        history = restore(records).history
        interrupted: list[TextPart | ImagePart] = [TextPart(INTERRUPTED)]
        assert history == [
            UserMessage([TextPart("go")]),
            AssistantMessage([a, b]),
            ToolResultMessage("a", "run", [TextPart("ok")]),
            ToolResultMessage("b", "run", interrupted, True),
            UserMessage([TextPart("third")]),
            AssistantMessage([ToolCallPart("c", "run", {})]),
            ToolResultMessage("c", "run", interrupted, True),
        ]

    def test_state(self, state_dir: str) -> None:
        store = Store(state_dir)
        build_session(store, "sess_1", 3)
        state = restore(store.read("sess_1"))
        assert len(state.history) == 3 * 4 and state.cwd == CWD
        assert (state.mode, state.model, state.first_prompt) == ("ask", "offline", "question 0")
        assert state.usage.input_tokens == 2700 and state.usage.context_tokens == 1002
        assert state.next_tool_id == 4 and state.next_message_id == 3

    def test_ids_are_never_reused_after_a_crash(self) -> None:
        """A message streaming when the process died may be missing from the log (its
        chunks were buffered): its id is skipped too."""
        records: list[Record] = [
            header(),
            Prompt(message_id="msg_x_1", blocks=[t.TextContent(text="hi")], at=now_iso()),
            Update(update=chunk("thinking", "msg_x_2", thought=True)),
            Update(update=t.ToolCall(tool_call_id="call_7", title="x")),
        ]
        state = restore(records)
        assert (state.next_message_id, state.next_tool_id) == (4, 8)
        state = restore([*records, TurnEnd(stop_reason="end_turn", at=now_iso())])
        assert state.next_message_id == 3

    def test_a_thousand_turns(self, state_dir: str) -> None:
        """Big sessions load completely (the timing is in the report, not asserted)."""
        store = Store(state_dir)
        build_session(store, "sess_big", 1000)
        writer, records = store.open("sess_big")
        assert writer is not None
        writer.close()
        assert len(restore(records).history) == 4000
        updates = transcript(records)
        assert sum(isinstance(u, t.ToolCall) for u in updates) == 1000
        assert sum(isinstance(u, t.UserMessageChunk) for u in updates) == 1000


class TestTranscript:
    def test_tool_calls_are_materialized(self) -> None:
        records: list[Record] = [
            header(),
            Prompt(
                message_id="u1",
                blocks=[t.TextContent(text="hi"), t.ResourceLink(uri="file:///a", name="a")],
                at=now_iso(),
            ),
            Update(
                update=t.ToolCall(
                    tool_call_id="call_1",
                    title="Run",
                    status="pending",
                    raw_input={"command": "ls"},
                )
            ),
            Update(
                update=t.ToolCallUpdateSessionUpdate(tool_call_id="call_1", status="in_progress")
            ),
            Update(
                update=t.ToolCallUpdateSessionUpdate(
                    tool_call_id="call_1",
                    status="completed",
                    title="Ran ls",
                    content=[t.Content(content=t.TextContent(text="a b"))],
                    raw_output={"output": "a b"},
                    locations=[t.ToolCallLocation(path="/a")],
                )
            ),
            Update(update=t.UsageUpdate(used=5, size=10)),
            Update(
                update=t.Plan(entries=[t.PlanEntry(content="x", priority="high", status="pending")])
            ),
            TurnEnd(stop_reason="end_turn", at=now_iso()),
        ]
        assert transcript(records) == [
            t.UserMessageChunk(content=t.TextContent(text="hi"), message_id="u1"),
            t.UserMessageChunk(content=t.ResourceLink(uri="file:///a", name="a"), message_id="u1"),
            t.ToolCall(
                tool_call_id="call_1",
                title="Ran ls",
                status="completed",
                raw_input={"command": "ls"},
                raw_output={"output": "a b"},
                content=[t.Content(content=t.TextContent(text="a b"))],
                locations=[t.ToolCallLocation(path="/a")],
            ),
            t.Plan(entries=[t.PlanEntry(content="x", priority="high", status="pending")]),
        ]

    def test_an_interrupted_turn_fails_its_running_tool_calls(self) -> None:
        records: list[Record] = [
            header(),
            Prompt(message_id="u1", blocks=[t.TextContent(text="go")], at=now_iso()),
            Update(update=t.ToolCall(tool_call_id="call_1", title="Run", status="pending")),
            Update(
                update=t.ToolCallUpdateSessionUpdate(tool_call_id="call_1", status="in_progress")
            ),
        ]
        (_, call) = transcript(records)
        assert isinstance(call, t.ToolCall) and call.status == "failed"
        assert call.raw_output == {"error": INTERRUPTED}
        (_, call) = transcript(records, live=True)  # another process may still be running it
        assert isinstance(call, t.ToolCall) and call.status == "in_progress"

    def test_terminals_become_their_output(self) -> None:
        """A terminal id means nothing to the next connection: its output is shown instead."""
        done = t.ToolCallUpdateSessionUpdate(
            tool_call_id="call_1",
            status="completed",
            content=[t.Terminal(terminal_id="term_1"), _text("exit 0")],
            raw_output={"output": "hi\n", "exitCode": 0},
        )
        records: list[Record] = [
            header(),
            Update(update=t.ToolCall(tool_call_id="call_1", title="Run", status="pending")),
            Update(update=done),
        ]
        (call,) = transcript(records)
        assert isinstance(call, t.ToolCall)
        assert call.content == [_text("```\nhi\n```"), _text("exit 0")]

    def test_draft_updates_take_the_form_the_client_takes(self) -> None:
        """Recorded with every capability, loaded by a client with none: each update in
        its fallback form, as it would have been shown live (and the reverse)."""
        entry = t.PlanEntry(content="step", priority="high", status="pending")
        plan = t.PlanUpdate(plan=t.PlanItems(plan_id="p", entries=[entry]))
        document = t.PlanUpdate(plan=t.PlanMarkdown(plan_id="d", content="# Plan\n- [x] done"))
        prose = t.PlanUpdate(plan=t.PlanMarkdown(plan_id="d", content="Just prose."))
        removed = t.PlanRemoved(plan_id="p")
        summary: list[t.ContentBlock] = [t.TextContent(text="We did things.")]
        compaction = t.CompactionUpdate(compaction_id="c", status="completed", summary=summary)
        failed = t.CompactionUpdate(compaction_id="f", status="failed", error="overloaded")
        notice = t.Notice(severity="info", title="hello")
        child = t.SubagentUpdate(session_id="sess_child", title="x")
        recorded = (plan, document, prose, removed, compaction, failed, notice, child)
        records: list[Record] = [header(), *(Update(update=u) for u in recorded)]
        plain = t.ClientCapabilities()
        everything = t.ClientCapabilities(
            plan=t.PlanCapabilities(),
            subagents=t.SubagentCapabilities(),
            session=t.ClientSessionCapabilities(
                compaction=t.CompactionCapabilities(), notices=t.NoticeCapabilities()
            ),
        )
        assert transcript(records, everything) == [
            plan, document, prose, removed, compaction, failed, child]
        compacted = ("_The earlier conversation was compacted into this summary:_\n\n"
                     "We did things.\n")
        assert transcript(records, plain) == [
            t.Plan(entries=[entry]),
            t.Plan(entries=[t.PlanEntry(content="done", priority="medium", status="completed")]),
            t.AgentMessageChunk(content=t.TextContent(text="Just prose.\n")),
            t.Plan(entries=[]),
            t.AgentMessageChunk(content=t.TextContent(text=compacted), message_id="c"),
            t.AgentMessageChunk(
                content=t.TextContent(
                    text="_Compaction failed: overloaded. The history is unchanged._\n"),
                message_id="f"),
        ]

    def test_a_compaction_is_one_update(self) -> None:
        compaction = t.ClientCapabilities(
            session=t.ClientSessionCapabilities(compaction=t.CompactionCapabilities())
        )
        records: list[Record] = [
            header(),
            Update(update=chunk("before")),
            Update(update=t.CompactionUpdate(compaction_id="k1", status="in_progress")),
            Update(
                update=t.CompactionSummaryChunk(
                    compaction_id="k1", content=t.TextContent(text="We did ")
                )
            ),
            Update(
                update=t.CompactionSummaryChunk(
                    compaction_id="k1", content=t.TextContent(text="things.")
                )
            ),
            Update(update=t.CompactionUpdate(compaction_id="k1", status="completed")),
            Update(update=chunk("after", "m2")),
        ]
        assert transcript(records, compaction) == [
            chunk("before"),
            t.CompactionUpdate(
                compaction_id="k1",
                status="completed",
                summary=[t.TextContent(text="We did things.")],
            ),
            chunk("after", "m2"),
        ]
        plain = t.ClientCapabilities()
        text = "_The earlier conversation was compacted into this summary:_\n\nWe did things.\n"
        assert transcript(records, plain) == [
            chunk("before"),
            t.AgentMessageChunk(content=t.TextContent(text=text), message_id="k1"),
            chunk("after", "m2"),
        ]

    def test_the_latest_session_info_comes_last(self) -> None:
        records: list[Record] = [
            header(),
            Update(update=t.SessionInfoUpdate(title="first", updated_at="2025-01-01T00:00:00Z")),
            Update(update=chunk("a")),
            Update(update=t.SessionInfoUpdate(updated_at="2025-01-02T00:00:00Z")),
            Update(update=chunk("b")),
        ]
        assert transcript(records) == [
            chunk("ab"),
            t.SessionInfoUpdate(title="first", updated_at="2025-01-02T00:00:00Z"),
        ]


class TestList:
    def test_the_log_stands_in_for_a_missing_index_entry(self, state_dir: str) -> None:
        store = Store(state_dir)
        build_session(store, "sess_1", 1)
        writer = store.create(header("sess_2", "/other"))
        writer.append(Update(update=t.SessionInfoUpdate(title="named")))
        writer.close()
        store.writer.wait()
        os.unlink(store.meta_path("sess_2"))
        with open(store.meta_path("sess_1"), "wb") as fh:
            fh.write(b"{torn")
        metas, cursor = store.page()
        assert {m.id: m.title for m in metas} == {"sess_1": None, "sess_2": "named"}
        assert cursor is None
        assert [m.id for m in store.page(cwd="/other")[0]] == ["sess_2"]

    def test_delete_removes_the_files(self, state_dir: str) -> None:
        store = Store(state_dir)
        build_session(store, "sess_1", 1)
        store.delete("sess_1")
        assert os.listdir(store.root) == [] and store.page() == ([], None)

    def test_a_deleted_session_stays_deleted(self, state_dir: str) -> None:
        """An owner (maybe another process) does not bring a deleted index entry back."""
        store = Store(state_dir)
        writer = store.create(header())
        store.delete("sess_1")
        writer.touch(title="late")
        writer.close()
        assert os.listdir(store.root) == []


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("fix the bug", "fix the bug"),
        ("\n\n  fix   the\tbug  \nand more", "fix the bug"),
        ("word " * 30, "word word word word word word word word word word word…"),
        ("x" * 100, "x" * 59 + "…"),
    ],
)
def test_titles(text: str, title: str) -> None:
    assert make_title(text) == title
    assert len(make_title(text)) <= 60


def _text(text: str) -> t.Content:
    return t.Content(content=t.TextContent(text=text))


async def _no_emit(session_id: str, update: Any) -> None:
    return None


def test_unset_is_falsy() -> None:
    assert not UNSET  # replay relies on it for "no raw output yet"
