"""``/undo``: the workspace put back byte for byte (modes kept) after a turn that writes,
edits, moves, deletes and runs a command; repeated; a file the user changed since (kept
unless confirmed); across a kill -9 and a reload; after a compaction; a subagent's
changes; the size cap; refused while a turn runs. On the scripted offline model, with a
real git for the workspace snapshot."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from .harness import AgentProcess, Scripted
from .limits import eventually


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_call": {"name": name, "arguments": arguments}}


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def files_of(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (but ``.git``): its bytes and mode."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and ".git" not in path.parts:
            out[str(path.relative_to(root))] = (path.read_bytes(), mode_of(path))
    return out


def said(agent: AgentProcess, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates_of(sid, "agent_message_chunk"))


async def start(agent: AgentProcess, workspace: str, caps: dict[str, Any] | None = None) -> str:
    await agent.initialize(caps or {})
    return await agent.new_session(workspace)


THE_TURN = [
    [call("write_file", path="new.txt", content="brand new\n"),
     call("edit_file", path="private.txt", old_string="secret", new_string="public"),
     call("move_file", source="old.txt", destination="sub/dir/moved.txt"),
     call("run_command", command="rm gone.bin && printf 'made' > made.sh && chmod 755 made.sh")],
    [{"text": "All done."}],
]  # fmt: skip


def lay_out(ws: Path) -> None:
    (ws / "private.txt").write_bytes(b"a secret\r\nline two\r\n")  # CRLF kept as it was
    (ws / "private.txt").chmod(0o600)
    (ws / "old.txt").write_text("to be moved\n")
    (ws / "tool.sh").write_text("#!/bin/sh\n")
    (ws / "tool.sh").chmod(0o750)
    (ws / "gone.bin").write_bytes(bytes(range(256)) * 4)  # binary, small


async def test_undo_puts_back_every_change_of_the_turn(scripted: Scripted, workspace: str) -> None:
    ws = Path(workspace)
    lay_out(ws)
    before = files_of(ws)
    agent = scripted(THE_TURN, "--mode", "bypass")
    async with agent:
        sid = await start(agent, workspace)
        await agent.prompt(sid, "change things")
        assert (ws / "made.sh").exists() and not (ws / "gone.bin").exists()
        assert (ws / "sub" / "dir" / "moved.txt").exists()
        calls_before = len(agent.tool_calls(sid))
        result = await agent.prompt(sid, "/undo")
        assert result["stopReason"] == "end_turn"
        assert files_of(ws) == before  # bytes and modes
        assert not (ws / "sub").exists()  # the directories the move made went too
        reports = agent.tool_calls(sid)[calls_before:]
        by_path = {r["locations"][0]["path"]: r for r in reports}
        assert set(by_path) == {str(ws / p) for p in
                                ("new.txt", "private.txt", "old.txt", "sub/dir/moved.txt",
                                 "made.sh", "gone.bin")}  # fmt: skip
        assert all(r["status"] == "completed" for r in reports)
        edit = by_path[str(ws / "private.txt")]["content"][0]
        assert edit == {"type": "diff", "path": str(ws / "private.txt"),
                        "oldText": "a public\r\nline two\r\n",
                        "newText": "a secret\r\nline two\r\n"}
        removed = by_path[str(ws / "new.txt")]
        assert removed["kind"] == "delete"
        assert removed["content"][0]["oldText"] == "brand new\n"
        summary = "Undid the changes of \u201cchange things\u201d: 6 file(s) put back"
        assert summary in said(agent, sid)
        assert "Nothing to undo" not in said(agent, sid)
        await agent.prompt(sid, "/undo")
        assert "Nothing to undo" in said(agent, sid)


async def test_repeated_undo_goes_one_turn_further_back(scripted: Scripted, workspace: str) -> None:
    ws = Path(workspace)
    script = [
        [call("edit_file", path="hello.txt", old_string="hello", new_string="one")],
        [{"text": "first"}],
        [call("edit_file", path="hello.txt", old_string="one", new_string="two"),
         call("write_file", path="second.txt", content="2")],
        [{"text": "second"}],
        [{"text": "just talking"}],  # a turn that changes nothing is not undone
    ]  # fmt: skip
    async with scripted(script, "--mode", "bypass") as agent:
        sid = await start(agent, workspace)
        await agent.prompt(sid, "first")
        await agent.prompt(sid, "second")
        await agent.prompt(sid, "third")
        await agent.prompt(sid, "/undo")
        assert (ws / "hello.txt").read_text() == "one\nworld\n"
        assert not (ws / "second.txt").exists()
        await agent.prompt(sid, "/undo")
        assert (ws / "hello.txt").read_text() == "hello\nworld\n"
        assert "\u201cfirst\u201d" in said(agent, sid)


async def test_a_file_the_user_changed_since_is_kept_unless_confirmed(
    scripted: Scripted, workspace: str, state_dir: str
) -> None:
    ws = Path(workspace)
    script = [
        [call("write_file", path="a.txt", content="agent a\n"),
         call("write_file", path="b.txt", content="agent b\n")],
        [{"text": "ok"}],
        [call("write_file", path="a.txt", content="agent a\n"),
         call("write_file", path="b.txt", content="agent b\n")],
        [{"text": "ok"}],
    ]  # fmt: skip
    async with scripted(script, "--mode", "bypass") as agent:
        asked: list[dict[str, Any]] = []

        def keep(params: dict[str, Any]) -> dict[str, Any]:
            asked.append(params)
            option = next(o for o in params["options"] if o["kind"] == "reject_once")
            return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

        agent.handlers["session/request_permission"] = keep
        sid = await start(agent, workspace)
        await agent.prompt(sid, "write")
        (ws / "a.txt").write_text("the user's a\n")
        await agent.prompt(sid, "/undo")
        assert (ws / "a.txt").read_text() == "the user's a\n"  # kept: not confirmed
        assert not (ws / "b.txt").exists()  # put back (it did not exist)
        assert len(asked) == 1 and "a.txt" in asked[0]["toolCall"]["title"] + str(asked[0])
        kept = [c for c in agent.tool_calls(sid) if c["title"] == "Kept a.txt"]
        assert kept and kept[0]["status"] == "failed"
        assert "kept as they are now, changed since: a.txt" in said(agent, sid)
        # with a form: the user picks the file to put back
        forms: list[dict[str, Any]] = []

        def overwrite(params: dict[str, Any]) -> dict[str, Any]:
            forms.append(params)
            return {"action": "accept", "content": {"overwrite": [str(ws / "a.txt")]}}

    async with scripted(script[2:], "--mode", "bypass") as agent:
        agent.handlers["elicitation/create"] = overwrite
        (ws / "a.txt").unlink()
        sid = await start(agent, workspace, {"elicitation": {"form": {}}})
        await agent.prompt(sid, "write again")
        (ws / "a.txt").write_text("edited again by the user\n")
        await agent.prompt(sid, "/undo")
        assert len(forms) == 1 and forms[0]["mode"] == "form"
        field = forms[0]["requestedSchema"]["properties"]["overwrite"]
        assert field["items"]["anyOf"] == [{"const": str(ws / "a.txt"), "title": "a.txt"}]
        assert not (ws / "a.txt").exists()  # put back: it did not exist before


async def test_undo_after_a_kill_and_a_reload(
    scripted: Scripted, workspace: str
) -> None:
    ws = Path(workspace)
    script = [[call("edit_file", path="hello.txt", old_string="hello", new_string="bye"),
               call("run_command", command="printf x > by-command.txt")],
              [{"text": "ok"}]]  # fmt: skip
    agent = scripted(script, "--mode", "bypass")
    async with agent:
        sid = await start(agent, workspace)
        await agent.prompt(sid, "change")
        agent.kill()
        await agent.proc.wait()  # type: ignore[union-attr]
    assert (ws / "hello.txt").read_text() == "bye\nworld\n"
    async with scripted([], "--mode", "bypass") as again:
        await again.initialize({})
        await again.request("session/load", {"sessionId": sid, "cwd": workspace,
                                             "mcpServers": []})  # fmt: skip
        await again.prompt(sid, "/undo")
        assert (ws / "hello.txt").read_text() == "hello\nworld\n"
        assert not (ws / "by-command.txt").exists()


async def test_undo_of_a_turn_cut_short_by_a_kill(scripted: Scripted, workspace: str) -> None:
    """Killed mid-turn, after an edit and before the turn's end: what the edit changed
    was recorded before it happened, so /undo can still put it back (it asks first: what
    the cut-short turn left is not known)."""
    ws = Path(workspace)
    script = [[call("edit_file", path="hello.txt", old_string="hello", new_string="bye")],
              [{"hang": True}]]  # fmt: skip
    agent = scripted(script, "--mode", "bypass")
    async with agent:
        sid = await start(agent, workspace)
        turn = agent.start_request("session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "change"}]})  # fmt: skip
        await agent.wait_for(lambda: any(c.get("status") == "completed"
                                         for c in agent.tool_calls(sid)))  # fmt: skip
        agent.kill()
        await agent.proc.wait()  # type: ignore[union-attr]
        turn.cancel()
    assert (ws / "hello.txt").read_text() == "bye\nworld\n"
    again = scripted([], "--mode", "bypass")
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "overwrite"}}

    again.handlers["session/request_permission"] = answer
    async with again:
        await again.initialize({})
        await again.request("session/load", {"sessionId": sid, "cwd": workspace,
                                             "mcpServers": []})  # fmt: skip
        await again.prompt(sid, "/undo")
    assert (ws / "hello.txt").read_text() == "hello\nworld\n"
    (question,) = asked
    text = question["toolCall"]["content"][0]["content"]["text"]
    assert "hello.txt" in text and "cut short" in text


async def test_undo_after_compaction_and_a_subagents_changes(
    scripted: Scripted, workspace: str
) -> None:
    ws = Path(workspace)
    spawn = call("spawn_agent", title="Writer", description="Writes.", prompt="write it")
    script = [
        [spawn],
        [call("write_file", path="child.txt", content="by the child\n")],  # the child's turn
        [{"text": "child done"}],
        [{"text": "parent done"}],
        [{"text": "## Summary\n- a child wrote child.txt"}],  # /compact
    ]
    async with scripted(script, "--mode", "bypass") as agent:
        sid = await start(agent, workspace)
        await agent.prompt(sid, "delegate")
        assert (ws / "child.txt").exists()
        await agent.prompt(sid, "/compact")
        assert agent.updates_of(sid, "agent_message_chunk")
        await agent.prompt(sid, "/undo")
        assert not (ws / "child.txt").exists()


async def test_the_size_caps_are_honoured_and_told(scripted: Scripted, workspace: str) -> None:
    ws = Path(workspace)
    for name in ("one", "two", "three"):
        (ws / f"{name}.txt").write_text(name * 1000)  # distinct: kept bytes are shared
    script = []
    for name in ("one", "two", "three"):
        script += [[call("write_file", path=f"{name}.txt", content="new")], [{"text": "ok"}]]
    config = "[checkpoints]\nmax-file-size = 8192\nmax-size = 9000\nsnapshot = false\n"
    async with scripted(script, "--mode", "bypass", config=config) as agent:
        sid = await start(agent, workspace, {"session": {"notices": {}}})
        for name in ("one", "two", "three"):
            await agent.prompt(sid, f"write {name}")
        notices = [n for n in agent.updates_of(sid, "notice")
                   if n["title"] == "Older turns can no longer be undone"]  # fmt: skip
        assert len(notices) == 1
        assert "max-size (9,000 bytes): the oldest 1 turn(s)" in notices[0]["description"]
        await agent.prompt(sid, "/undo")
        await agent.prompt(sid, "/undo")
        assert (ws / "three.txt").read_text() == "three" * 1000
        assert (ws / "two.txt").read_text() == "two" * 1000
        await agent.prompt(sid, "/undo")  # the first turn was let go
        assert (ws / "one.txt").read_text() == "new" and "Nothing to undo" in said(agent, sid)
    big = [[call("write_file", path="big.txt", content="again")], [{"text": "ok"}]]
    (ws / "big.txt").write_text("y" * 9000)
    async with scripted(big, "--mode", "bypass", config=config) as agent:
        sid = await start(agent, workspace)
        await agent.prompt(sid, "shrink big")
        await agent.prompt(sid, "/undo")
        failed = [c for c in agent.tool_calls(sid) if c["title"] == "Not restorable: big.txt"]
        assert failed and failed[0]["status"] == "failed"
        assert "8.8 KB, kept by its hash only" in str(failed[0]["content"])
        assert (ws / "big.txt").read_text() == "again"


async def test_undo_is_refused_while_a_turn_runs(
    scripted: Scripted, workspace: str, tmp_path: Path
) -> None:
    mark = tmp_path / "started"
    script = [[{"mark": str(mark)}, {"hang": True}]]
    async with scripted(script) as agent:
        sid = await start(agent, workspace)
        running = agent.start_request("session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})  # fmt: skip
        await eventually(mark.exists, "the command ran")
        for command in ("/undo", "/rewind 1"):
            response = await agent.request_raw("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": command}]})  # fmt: skip
            assert response["error"]["code"] == -32600
            assert "a turn is running" in response["error"]["message"]
        await agent.notify("session/cancel", {"sessionId": sid})
        assert (await running)["result"]["stopReason"] == "cancelled"


async def test_a_directory_turned_into_a_link_out_of_the_roots_is_not_followed(
    scripted: Scripted, workspace: str, tmp_path: Path
) -> None:
    ws = Path(workspace)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("outside, not ours")
    (ws / "sub").mkdir()
    (ws / "sub" / "f.txt").write_text("before")
    script = [[call("write_file", path="sub/f.txt", content="agent")], [{"text": "ok"}]]
    config = "[checkpoints]\nsnapshot = false\n"
    async with scripted(script, "--mode", "bypass", config=config) as agent:
        sid = await start(agent, workspace)
        await agent.prompt(sid, "write")
        (ws / "sub" / "f.txt").unlink()
        (ws / "sub").rmdir()
        (ws / "sub").symlink_to(outside)
        await agent.prompt(sid, "/undo")  # the harness says yes to overwriting
        assert (outside / "f.txt").read_text() == "outside, not ours"
        failed = [c for c in agent.tool_calls(sid) if c["title"] == "Not restored: sub/f.txt"]
        assert failed and "outside the session's roots" in str(failed[0]["content"])


async def test_undo_after_a_commit_leaves_the_repository_alone(
    scripted: Scripted, workspace: str
) -> None:
    """A turn that commits: `/undo` puts the files back, never the repository's `.git`
    (its index, refs and logs stay as the commit left them); ignored folders are not
    the turn's either."""
    import subprocess

    ws = Path(workspace)
    git = ["git", "-C", workspace, "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", workspace], check=True)
    (ws / ".gitignore").write_text("node_modules/\n")
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "dep.js").write_text("dep\n")
    (ws / "app.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    script = [
        [call("run_command", command="echo 'x = 2' > app.py && git -c user.name=t "
              "-c user.email=t@t commit -qam second && echo more >> node_modules/dep.js")],
        [{"text": "Committed."}],
    ]  # fmt: skip
    async with scripted(script, "--mode", "bypass") as agent:
        sid = await start(agent, workspace)
        await agent.prompt(sid, "commit it")
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
        git_files = {p: p.read_bytes() for p in (ws / ".git").rglob("*") if p.is_file()}
        await agent.prompt(sid, "/undo")
        assert (ws / "app.py").read_text() == "x = 1\n"  # the file put back
        assert (ws / "node_modules" / "dep.js").read_text() == "dep\nmore\n"  # ignored: kept
        assert subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout == head  # fmt: skip
        now = {p: p.read_bytes() for p in (ws / ".git").rglob("*") if p.is_file()}
        assert now == git_files  # nothing of .git rewritten
        paths = {r["locations"][0]["path"] for r in agent.tool_calls(sid)
                 if r.get("locations") and r.get("kind") != "execute"}  # fmt: skip
        assert paths == {str(ws / "app.py")}
