"""Sessions by the thousand, for tools/bench.py (``--only store``): ``session/list`` and
``session/load`` through a fresh agent process per sample, against state directories
built here.

  list      5,000 sessions: the first page, and every page (100 of 50) in turn by cursor;
            100,000 sessions: one page, all projects and one project's (``cwd``). The
            index is current (as another agent process left it); building it from the
            files alone (a first start after an upgrade) is timed on its own.
  load      a 10,000-turn session (thinking, text, a tool call with 60 lines of output,
            a 500-character answer per turn; built with the store API): request ->
            response after the whole replay, and the agent's peak RSS.

Baselines, interleaved: the agent before issue 17 (``--before``: a git revision, run
from an export of it), and one page as the store lists without an index.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROJECTS = 20


def build_sessions(state: str, n: int) -> None:
    """``n`` small sessions written straight to disk (the format the store writes): a
    header, settings, a prompt and its end; two thirds with a meta file, the rest never
    prompted (listed from their log). ``PROJECTS`` projects (``/work/p0``...)."""
    from acp_agent.protocol import types as t
    from acp_agent.sessions.records import (
        Header,
        Meta,
        Prompt,
        Settings,
        TurnEnd,
        encode,
        encode_meta,
    )

    sessions = os.path.join(state, "sessions")
    os.makedirs(sessions, mode=0o700, exist_ok=True)
    for i in range(n):
        sid = f"sess_{i:08d}"
        cwd = f"/work/p{i % PROJECTS}"
        at = f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00.{i % 1000:03d}Z"
        records = [Header(id=sid, cwd=cwd, created_at=at), Settings(mode="ask", model="offline")]
        prompted = i % 3 != 0
        if prompted:
            blocks: list[t.ContentBlock] = [t.TextContent(text=f"question {i}")]
            records += [Prompt(message_id=f"msg_{i}_1", blocks=blocks, at=at),
                        TurnEnd(stop_reason="end_turn", at=at)]  # fmt: skip
        fd = os.open(os.path.join(sessions, sid + ".jsonl"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"".join(encode(r) for r in records))
        os.close(fd)
        if prompted:
            meta = Meta(id=sid, cwd=cwd, created_at=at, updated_at=at, title=f"question {i}")
            fd = os.open(os.path.join(sessions, sid + ".meta.json"), os.O_WRONLY | os.O_CREAT,
                         0o600)  # fmt: skip
            os.write(fd, encode_meta(meta))
            os.close(fd)


def index_from_scratch(state: str) -> float:
    """Seconds to build the index from the files alone (what a first list does)."""
    from acp_agent.sessions.sessionindex import SessionIndex

    t0 = time.perf_counter()
    SessionIndex(state).page(None, None, 1)
    return time.perf_counter() - t0


def scan_page_ms(state: str) -> float:
    """One page as the store lists without an index (in this process, a fresh store)."""
    from acp_agent.sessions.store import Store

    t0 = time.perf_counter()
    Store(state).page()
    return (time.perf_counter() - t0) * 1000


async def _list_pages(
    launch: Any, state: str, every: bool, cwd: str | None = None
) -> tuple[float, float, int]:
    """(first page ms, all pages ms, sessions) through a fresh agent."""
    a = launch("--state-dir", state)
    await a.start()
    await a.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    params: dict[str, Any] = {} if cwd is None else {"cwd": cwd}
    t0 = time.perf_counter()
    first = 0.0
    seen = 0
    while True:
        reply = await a.request("session/list", params)
        result = reply["result"]
        seen += len(result["sessions"])
        first = first or (time.perf_counter() - t0) * 1000
        if not every or "nextCursor" not in result:
            break
        params = {**params, "cursor": result["nextCursor"]}
    total = (time.perf_counter() - t0) * 1000
    await a.close()
    return first, total, seen


async def bench_list(runs: int, tmp: str, launch: Any, before: Any, median: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n, label in ((5_000, "5k"), (100_000, "100k")):
        state = os.path.join(tmp, f"list-{label}")
        t0 = time.perf_counter()
        build_sessions(state, n)
        out[f"list_{label}_build_files_s"] = time.perf_counter() - t0
        out[f"list_{label}_index_from_scratch_s"] = index_from_scratch(state)
        every = n <= 5_000
        firsts, alls, cwds, scans, old_firsts, old_alls = [], [], [], [], [], []
        for run in range(runs):
            first, total, seen = await _list_pages(launch, state, every)
            assert not every or seen == n, seen
            firsts.append(first)
            alls.append(total)
            cwds.append((await _list_pages(launch, state, False, "/work/p7"))[0])
            scans.append(scan_page_ms(state))
            if before is not None and run == 0:  # slow: once
                first, total, _ = await _list_pages(before, state, every)
                old_firsts.append(first)
                old_alls.append(total)
        out[f"list_{label}_first_page_ms"] = median(firsts)
        if every:
            out[f"list_{label}_all_pages_ms"] = median(alls)
        out[f"list_{label}_one_project_page_ms"] = median(cwds)
        out[f"list_{label}_baseline_scan_page_ms"] = median(scans)
        if old_firsts:
            out[f"list_{label}_before_first_page_ms"] = median(old_firsts)
            if every:
                out[f"list_{label}_before_all_pages_ms"] = median(old_alls)
    return out


async def _load(
    launch: Any, state: str, sid: str, cwd: str, rss: Any
) -> tuple[float, float, int, float]:
    """(ms to the response after the replay, peak RSS MB, updates replayed, ms to the
    first update)."""
    a = launch("--state-dir", state)
    await a.start()
    await a.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    count = 0
    first: list[float] = []

    def on_update(line: bytes) -> None:
        nonlocal count
        count += 1
        if not first:
            first.append(time.perf_counter())

    a.on_update = on_update
    t0 = time.perf_counter()
    result = await a.request("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    elapsed = (time.perf_counter() - t0) * 1000
    peak = rss(a.proc.pid)
    assert "result" in result, result
    await a.close()
    return elapsed, peak, count, ((first[0] - t0) * 1000) if first else float("nan")


async def bench_load(
    runs: int, tmp: str, launch: Any, before: Any, median: Any, rss: Any, turns: int
) -> dict[str, Any]:
    """The agent (and the one ``before``) against the floor (tools/minimal_load.py:
    decode the log, encode its updates), in turn."""
    from acp_agent.sessions.store import Store
    from tests.test_session_store import build_session

    state = os.path.join(tmp, f"load-{turns}")
    sid = f"sess_bench_load_{turns}"
    build_session(Store(state), sid, turns, cwd=tmp)
    size = os.path.getsize(os.path.join(state, "sessions", sid + ".jsonl"))

    def floor(*extra: str) -> Any:
        agent = launch(*extra)
        agent.args = (sys.executable, str(ROOT / "tools/minimal_load.py"), state)
        return agent

    seen: dict[str, list[tuple[float, float, int, float]]] = {"": [], "floor_": []}
    if before is not None:
        seen["before_"] = []
    for run in range(runs):
        order = list(seen)[:: 1 if run % 2 else -1]
        for name in order:
            who = {"": launch, "floor_": floor, "before_": before}[name]
            seen[name].append(await _load(who, state, sid, tmp, rss))
    key = f"load_{turns // 1000}k_turns"
    out: dict[str, Any] = {f"{key}_log_mb": size / 1e6,
                           f"{key}_replayed_updates": seen[""][0][2]}  # fmt: skip
    for name, samples in seen.items():
        out[f"{key}_{name}ms"] = median([s[0] for s in samples])
        out[f"{key}_{name}peak_rss_mb"] = median([s[1] for s in samples])
        out[f"{key}_{name}first_update_ms"] = median([s[3] for s in samples])
    out[f"{key}_over_floor"] = median(
        [x[0] / y[0] for x, y in zip(seen[""], seen["floor_"], strict=True)]
    )
    if before is not None:
        out[f"{key}_before_over_floor"] = median(
            [x[0] / y[0] for x, y in zip(seen["before_"], seen["floor_"], strict=True)]
        )
    return out
