"""The client's catalogue of sessions end to end over stdio (issue 16): ``session/set_title``,
``session/status``, ``session/archive`` / ``unarchive`` and ``session/list``'s ``archived``
filter; durable across processes and index rebuilds; archiving a session mid-turn."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .harness import AgentProcess, ResponseError
from .schema_check import SchemaChecker
from .test_sessions import load, mid_turn, text_block

Script = list[list[dict[str, Any]]]
Make = Callable[..., AgentProcess]
HANG: Script = [[{"text": "start "}, {"hang": True}]]


@pytest.fixture
def make(checker: SchemaChecker, state_dir: str, tmp_path: Path) -> Make:
    """An agent on the shared state dir; ``script`` drives its offline model."""
    count = iter(range(1000))

    def make_agent(script: Script | None = None) -> AgentProcess:
        env = {}
        if script is not None:
            path = tmp_path / f"script{next(count)}.json"
            path.write_text(json.dumps(script))
            env["ACP_AGENT_OFFLINE_SCRIPT"] = str(path)
        return AgentProcess(checker, "--state-dir", state_dir, env=env)

    return make_agent


async def started(agent: AgentProcess) -> AgentProcess:
    await agent.initialize()
    return agent


async def listed(agent: AgentProcess, **params: Any) -> list[dict[str, Any]]:
    """Every page of ``session/list`` with ``params``."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await agent.request("session/list", {**params, **({"cursor": cursor} if cursor
                                                                  else {})})  # fmt: skip
        out += page["sessions"]
        cursor = page.get("nextCursor")
        if cursor is None:
            return out


async def ids(agent: AgentProcess, **params: Any) -> list[str]:
    return [s["sessionId"] for s in await listed(agent, **params)]


async def error(agent: AgentProcess, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await agent.request_raw(method, params)
    assert "error" in response, (method, params, response)
    return response["error"]  # type: ignore[no-any-return]


async def status(agent: AgentProcess, sid: str) -> str:
    return str((await agent.request("session/status", {"sessionId": sid}))["status"])


def files(state_dir: str) -> dict[str, tuple[int, int]]:
    """Every file of the state directory (sessions and index): its mtime and size."""
    out = {}
    for root, _, names in os.walk(state_dir):
        for name in names:
            info = os.stat(os.path.join(root, name))
            out[os.path.join(root, name)] = (info.st_mtime_ns, info.st_size)
    return out


def meta_file(state_dir: str, sid: str) -> dict[str, Any]:
    """The entry a meta file holds: its last line (a turn's end appends one)."""
    text = (Path(state_dir) / "sessions" / f"{sid}.meta.json").read_text()
    return json.loads(text.splitlines()[-1])  # type: ignore[no-any-return]


class TestSetTitle:
    async def test_normalised_stored_and_shown(self, make: Make, workspace: str) -> None:
        """The stored title is normalised and answered; the open session hears of it; the
        list shows it; empty titles are -32602, unknown sessions -32002."""
        async with make() as agent:
            await started(agent)
            sid = await agent.new_session(workspace)
            result = await agent.request(
                "session/set_title", {"sessionId": sid, "title": "  Fix\n\n the \t bug\x00 "}
            )
            assert result == {"title": "Fix the bug"}
            (info,) = agent.updates_of(sid, "session_info_update")
            assert info["title"] == "Fix the bug" and info["updatedAt"]
            (entry,) = await listed(agent)
            assert entry["title"] == "Fix the bug" and entry["updatedAt"] == info["updatedAt"]
            long = "word " * 39 + "abcd efgh" + "x" * 300  # the 200th character is a space
            result = await agent.request("session/set_title", {"sessionId": sid, "title": long})
            assert result["title"] == "word " * 39 + "abcd"  # cut at 200, no trailing space
            cut = await agent.request("session/set_title", {"sessionId": sid, "title": "é" * 500})
            assert cut["title"] == "é" * 200
            for empty in ("", "   ", "\n\t\r", "\x00\x1f"):
                problem = await error(agent, "session/set_title",
                                      {"sessionId": sid, "title": empty})  # fmt: skip
                assert problem["code"] == -32602 and "title" in problem["message"]
            for unknown in ("sess_nope", "../sessions/x"):
                problem = await error(agent, "session/set_title",
                                      {"sessionId": unknown, "title": "x"})  # fmt: skip
                assert problem["code"] == -32002 and problem["data"] == {"sessionId": unknown}
            (entry,) = await listed(agent)
            assert entry["title"] == "é" * 200

    async def test_the_agent_never_renames_it(
        self, make: Make, workspace: str, state_dir: str
    ) -> None:
        """After a client's title, the first prompt names nothing, in this process or
        after a reload in another; load replays the client's title."""
        async with make([[{"text": "one"}], [{"text": "two"}]]) as first:
            await started(first)
            sid = await first.new_session(workspace)
            await first.request("session/set_title", {"sessionId": sid, "title": "Mine"})
            assert (await first.prompt(sid, "an auto title would come from this"))[
                "stopReason"] == "end_turn"  # fmt: skip
            assert [u["title"] for u in first.updates_of(sid, "session_info_update")] == ["Mine"]
            (entry,) = await listed(first)
            assert entry["title"] == "Mine"
        assert meta_file(state_dir, sid)["titled_by_client"] is True
        async with make([[{"text": "three"}]]) as second:
            await started(second)
            _, replayed = await load(second, sid, workspace)
            assert [u.get("title") for u in replayed
                    if u["sessionUpdate"] == "session_info_update"] == ["Mine"]  # fmt: skip
            await second.prompt(sid, "again")
            (entry,) = await listed(second)
            assert entry["title"] == "Mine"

    async def test_a_stored_session_is_titled_without_opening_it(
        self, make: Make, workspace: str, state_dir: str
    ) -> None:
        """A session only on disk: titled in its log and meta file, not loaded; one that
        another process has open is refused (that process owns its log)."""
        async with make([[{"text": "hi"}]]) as first:
            await started(first)
            sid = await first.new_session(workspace)
            await first.prompt(sid, "hello there")
            owned = await first.new_session(workspace)
            await first.request("session/close", {"sessionId": sid})
            async with make() as second:
                await started(second)
                result = await second.request(
                    "session/set_title", {"sessionId": sid, "title": "Renamed"}
                )
                assert result == {"title": "Renamed"}
                assert second.updates_of(sid) == []  # not open there: nothing to tell
                assert await status(second, sid) == "saved"
                problem = await error(second, "session/set_title",
                                      {"sessionId": owned, "title": "x"})  # fmt: skip
                assert problem["code"] == -32600 and problem["data"] == {"sessionId": owned}
                entries = {s["sessionId"]: s for s in await listed(second)}
                assert entries[sid]["title"] == "Renamed" and "title" not in entries[owned]
        assert meta_file(state_dir, sid)["title"] == "Renamed"
        log = (Path(state_dir) / "sessions" / f"{sid}.jsonl").read_text().splitlines()
        assert json.loads(log[-1]) == {"r": "client_title", "title": "Renamed",
                                       "at": json.loads(log[-1])["at"]}  # fmt: skip


class TestStatus:
    async def test_open_saved_unknown_and_no_side_effects(
        self, make: Make, workspace: str, state_dir: str
    ) -> None:
        """"open" in this process's memory, "saved" when only stored, -32002 otherwise;
        asking changes no file, no list order, and loads nothing."""
        async with make([[{"text": "a"}], [{"text": "b"}]]) as agent:
            await started(agent)
            kept = await agent.new_session(workspace)
            closed = await agent.new_session(workspace)
            await agent.prompt(closed, "first")
            await agent.prompt(kept, "second")
            await agent.request("session/close", {"sessionId": closed})
            order = await ids(agent, archived="include")
            before = files(state_dir)
            for _ in range(3):
                assert await status(agent, kept) == "open"
                assert await status(agent, closed) == "saved"
            for unknown in ("sess_nope", "../sessions/x", ""):
                problem = await error(agent, "session/status", {"sessionId": unknown})
                assert problem["code"] == -32002 and problem["data"] == {"sessionId": unknown}
            assert files(state_dir) == before
            assert await ids(agent, archived="include") == order
            problem = await error(agent, "session/prompt",
                                  {"sessionId": closed, "prompt": [text_block("x")]})  # fmt: skip
            assert problem["code"] == -32002  # still not open: status loaded nothing
            async with make() as other:
                await started(other)
                assert await status(other, kept) == "saved"  # open in another process only


class TestArchive:
    async def test_archive_hides_keeps_and_unarchives(self, make: Make, workspace: str,
                                                      tmp_path: Path) -> None:  # fmt: skip
        elsewhere = str(tmp_path)
        async with make() as agent:
            await started(agent)
            a, b, c = [await agent.new_session(workspace) for _ in range(3)]
            d = await agent.new_session(elsewhere)
            everything = await ids(agent)
            assert set(everything) == {a, b, c, d}
            assert await agent.request("session/archive", {"sessionId": b}) == {}
            assert await agent.request("session/archive", {"sessionId": d}) == {}
            assert await ids(agent) == [s for s in everything if s not in (b, d)]
            assert await ids(agent, archived="exclude") == await ids(agent)
            assert await ids(agent, archived=None) == await ids(agent)
            assert await ids(agent, archived="include") == everything
            assert await ids(agent, archived="only") == [s for s in everything if s in (b, d)]
            assert await ids(agent, archived="only", cwd=workspace) == [b]
            assert await ids(agent, archived="exclude", cwd=elsewhere) == []
            flags = {s["sessionId"]: s["archived"] for s in await listed(agent, archived="include")}
            assert flags == {a: False, b: True, c: False, d: True}
            assert await status(agent, b) == "saved"  # archived: closed, kept
            assert await agent.request("session/archive", {"sessionId": b}) == {}  # again
            assert await agent.request("session/unarchive", {"sessionId": a}) == {}  # never was
            assert await agent.request("session/unarchive", {"sessionId": b}) == {}
            assert await status(agent, b) == "saved"  # unarchive never loads
            assert set(await ids(agent)) == {a, b, c}
            for method in ("session/archive", "session/unarchive"):
                for unknown in ("sess_nope", "../x"):
                    problem = await error(agent, method, {"sessionId": unknown})
                    assert problem["code"] == -32002 and problem["data"] == {"sessionId": unknown}
            bad: Any
            for bad in ("_custom", "all", "", "EXCLUDE", 1, True, []):
                problem = await error(agent, "session/list", {"archived": bad})
                assert problem["code"] == -32602, bad

    async def test_archive_cancels_a_running_turn(self, make: Make, workspace: str) -> None:
        """Archiving mid-turn: the prompt ends cancelled, the session is freed like a
        closed one, and the default list leaves it out."""
        async with make(HANG) as agent:
            await started(agent)
            sid, turn = await mid_turn(agent, workspace)
            assert await agent.request("session/archive", {"sessionId": sid}) == {}
            assert (await turn)["result"]["stopReason"] == "cancelled"
            assert await ids(agent) == []
            assert await ids(agent, archived="only") == [sid]
            assert await status(agent, sid) == "saved"
            problem = await error(agent, "session/prompt",
                                  {"sessionId": sid, "prompt": [text_block("x")]})  # fmt: skip
            assert problem["code"] == -32002

    async def test_pages_with_the_filter(self, make: Make, state_dir: str) -> None:
        """The filter applies before pagination: every page full, cursors carry on."""
        from acp_agent.sessions.records import Archived, Header
        from acp_agent.sessions.store import Store

        store = Store(state_dir)
        for i in range(160):
            stamp = f"2025-01-01T0{i // 60}:{i % 60:02d}:00.000Z"
            writer = store.create(Header(id=f"sess_{i:04d}", cwd="/a" if i % 2 else "/b",
                                         created_at=stamp))  # fmt: skip
            writer.touch(updated_at=stamp, title=f"session {i}")
            if i % 3 == 0:
                writer.amend(Archived(archived=True, at=stamp))
            writer.close()
        store.writer.close()
        newest_first = [f"sess_{i:04d}" for i in reversed(range(160))]
        async with make() as agent:
            await started(agent)
            cases: list[tuple[str | None, str | None, Callable[[int], bool]]] = [
                (None, None, lambda i: i % 3 != 0),
                ("only", None, lambda i: i % 3 == 0),
                ("include", None, lambda i: True),
                ("only", "/a", lambda i: i % 3 == 0 and i % 2 == 1),
                ("exclude", "/b", lambda i: i % 3 != 0 and i % 2 == 0),
            ]
            for archived, cwd, keep in cases:
                params: dict[str, Any] = {} if archived is None else {"archived": archived}
                if cwd:
                    params["cwd"] = cwd
                first = await agent.request("session/list", params)
                want = [s for s in newest_first if keep(int(s[5:]))]
                assert len(first["sessions"]) == min(50, len(want)), params
                got = await listed(agent, **params)
                assert [s["sessionId"] for s in got] == want, params
                assert all(s["archived"] == (int(s["sessionId"][5:]) % 3 == 0) for s in got)

    async def test_durable_across_processes_and_rebuilt_indexes(
        self, make: Make, workspace: str, state_dir: str
    ) -> None:
        """Titles and archive flags survive a new process, a deleted index (rebuilt from
        the meta files) and deleted meta files (rebuilt from the logs); an archived session
        loads and stays archived, forks unarchived, and deletes."""
        async with make([[{"text": "hi"}]]) as first:
            await started(first)
            sid = await first.new_session(workspace)
            await first.prompt(sid, "hello")
            plain = await first.new_session(workspace)
            await first.request("session/set_title", {"sessionId": sid, "title": "Kept title"})
            await first.request("session/archive", {"sessionId": sid})
        want = {sid: ("Kept title", True), plain: (None, False)}

        async def check(agent: AgentProcess) -> None:
            got = {s["sessionId"]: (s.get("title"), s["archived"])
                   for s in await listed(agent, archived="include")}  # fmt: skip
            assert got == want
            assert await ids(agent) == [plain]

        index = Path(state_dir) / "sessions-index"
        metas = list((Path(state_dir) / "sessions").glob("*.meta.json"))
        for damage in ("none", "index deleted", "index and meta files deleted"):
            if damage != "none":
                shutil.rmtree(index)
            if damage == "index and meta files deleted":
                for path in metas:
                    path.unlink()
            async with make() as agent:
                await started(agent)
                await check(agent)
        shutil.rmtree(index)
        async with make([[{"text": "again"}]]) as agent:
            await started(agent)
            _, replayed = await load(agent, sid, workspace)
            assert [u["title"] for u in replayed
                    if u["sessionUpdate"] == "session_info_update"] == ["Kept title"]  # fmt: skip
            assert await status(agent, sid) == "open"
            assert (await agent.prompt(sid, "more"))["stopReason"] == "end_turn"
            await check(agent)  # loaded and prompted: still archived, still titled
            fork = (await agent.request("session/fork", {"sessionId": sid, "cwd": workspace,
                                                         "mcpServers": []}))["sessionId"]
            await agent.prompt(fork, "in the fork")
            assert set(await ids(agent)) == {plain, fork}
            assert await agent.request("session/delete", {"sessionId": sid}) == {}
            assert sid not in await ids(agent, archived="include")
            with pytest.raises(ResponseError):
                await agent.request("session/unarchive", {"sessionId": sid})


async def test_a_title_set_during_the_first_turn_stays(make: Make, workspace: str) -> None:
    """A title set while the first turn runs: the turn's end names nothing over it."""
    async with make([[{"text": "x"}]] * 3) as agent:
        await started(agent)
        sid = await agent.new_session(workspace)
        results = await asyncio.gather(
            agent.prompt(sid, "one"),
            agent.request("session/set_title", {"sessionId": sid, "title": "T"}),
            agent.request("session/status", {"sessionId": sid}),
        )
        assert results[1] == {"title": "T"} and results[2] == {"status": "open"}
        (entry,) = await listed(agent)
        assert entry["title"] == "T"
