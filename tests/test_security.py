"""Issue 12, security: no answer widens a permission, links never lead out of what was
checked, secrets never reach children, state is private, answers are never lost."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from acp_agent.config import from_mapping
from acp_agent.engine.childenv import child_environ
from acp_agent.engine.permissions import Rules, Scope
from acp_agent.errors import RemoteError, ToolError
from acp_agent.protocol import types as t
from acp_agent.tools.files import WriteFile
from acp_agent.tools.search import Grep

from .engine_world import World
from .fakes.provider import calls, text
from .tools.fake_client import FakeClient
from .tools.raw import Raw


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    (d / "src" / "deep").mkdir(parents=True)
    (d / "docs").mkdir()
    return d


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("TOP SECRET\n")
    return d


def write(path: Path | str, content: str = "x") -> Any:
    return calls(("write_file", {"path": str(path), "content": content}))


def run(command: str) -> Any:
    return calls(("run_command", {"command": command}))


def labels(options: list[t.PermissionOption]) -> dict[str, str]:
    return {o.option_id: o.name for o in options}


class TestAlwaysCoversExactlyWhatWasApproved:
    async def test_edits_in_a_directory_and_nothing_else(self, ws: Path, outside: Path) -> None:
        world = World(ws, write("src/a.py"), text("ok"), answers=["allow_always"])
        await world.turn()
        assert labels(world.editor.offered[0])["allow_always"] == "Always allow edits in src/"
        for path in ("src/b.py", "src/deep/c.py"):  # covered: no question
            world.provider.responses += [write(path), text("ok")]
            await world.turn()
        assert len(world.editor.asked) == 1
        for path in ("docs/d.md", "e.py", str(outside / "secret.txt")):  # not covered: asks
            world.editor.answers.append("reject_once")
            world.provider.responses += [write(path), text("ok")]
            await world.turn()
        assert len(world.editor.asked) == 4
        assert (outside / "secret.txt").read_text() == "TOP SECRET\n"

    async def test_paths_outside_the_roots_are_never_offered_always(
        self, ws: Path, outside: Path
    ) -> None:
        read = calls(("read_file", {"path": str(outside / "secret.txt")}))
        world = World(ws, read, text("ok"), read, text("ok"), answers=["allow_once", "reject_once"])
        await world.turn()
        await world.turn()
        assert len(world.editor.asked) == 2  # asked again: nothing remembered
        assert set(labels(world.editor.offered[0])) == {"allow_once", "reject_once"}

    async def test_an_always_answer_the_editor_was_not_offered_is_refused(
        self, ws: Path, outside: Path
    ) -> None:
        """Answering "allow_always" to a question without that option runs nothing."""
        target = outside / "secret.txt"
        world = World(ws, write(target, "pwned"), text("ok"), answers=["allow_always"])
        await world.turn()
        (result,) = world.results()
        assert result.is_error and "not offered" in result.parts[0].text  # type: ignore[union-attr]
        assert target.read_text() == "TOP SECRET\n"
        assert world.rules.allowed == set()

    @pytest.mark.parametrize("answer", ["allow_everything", "allow", "ALLOW_ONCE", ""])
    async def test_an_option_id_never_offered_is_a_rejection(self, ws: Path, answer: str) -> None:
        world = World(ws, run("echo hi > made.txt"), text("ok"), answers=[answer])
        assert (await world.turn())[0] == "end_turn"
        (result,) = world.results()
        assert result.is_error and "not offered" in result.parts[0].text  # type: ignore[union-attr]
        assert not (ws / "made.txt").exists()
        assert list(world.final_status().values()) == ["failed"]

    async def test_commands_exactly_as_approved(self, ws: Path) -> None:
        world = World(ws, run("echo one"), text("ok"), answers=["allow_always"])
        await world.turn()
        assert labels(world.editor.offered[0])["allow_always"] == "Always allow `echo one`"
        world.provider.responses += [run("echo   'one'"), text("ok")]  # the same argv: covered
        await world.turn()
        assert len(world.editor.asked) == 1
        for command in ("echo two", "echo one two", "env echo one", "sh -c 'echo one'",
                        "sudo echo one", "timeout 5 echo one", "X=1 echo one",
                        "echo one && rm -rf ~", "echo one; id", "echo $(id)"):  # fmt: skip
            world.editor.answers.append("reject_once")
            world.provider.responses += [run(command), text("ok")]
            await world.turn()
        assert len(world.editor.asked) == 11

    async def test_always_reject_is_scoped_too(self, ws: Path) -> None:
        world = World(ws, run("rm -rf build"), text("ok"), run("rm -rf build"), text("ok"),
                      run("ls"), text("ok"), answers=["reject_always", "allow_once"])  # fmt: skip
        for _ in range(3):
            await world.turn()
        assert len(world.editor.asked) == 2  # the second rm refused without asking; ls asked
        results = [r.parts[0].text for r in world.results()]  # type: ignore[union-attr]
        assert "rejected this kind of call" in results[1]

    def test_scopes_match_only_below_their_directory(self, ws: Path) -> None:
        base = os.path.realpath(ws / "src")
        rule = Scope("files", f"write:{base}", "edits in src/")
        assert rule.covers(rule.key)
        assert Scope("files", f"write:{base}/deep", "").covers(rule.key)
        assert not Scope("files", f"write:{base}2", "").covers(rule.key)  # src2 is not src
        assert not Scope("files", f"read:{base}", "").covers(rule.key)
        assert not Scope("command", f"{base}\0ls", "").covers(rule.key)


class TestAnswersThatAreNotAnswers:
    async def test_an_error_answer_is_a_rejection_and_the_turn_goes_on(self, ws: Path) -> None:
        world = World(ws, run("touch made"), text("done"),
                      answers=[RemoteError(-32603, "client blew up")])  # fmt: skip
        assert (await world.turn())[0] == "end_turn"
        (result,) = world.results()
        assert "could not ask" in result.parts[0].text  # type: ignore[union-attr]
        assert list(world.final_status().values()) == ["failed"]
        assert not (ws / "made").exists()


class TestRememberedAnswersOnDisk:
    def test_private_files_and_old_broad_answers_dropped(self, tmp_path: Path, ws: Path) -> None:
        rules = Rules.for_project(str(tmp_path / "state"), str(ws))
        assert rules.path is not None
        scope = Scope("command", f"{ws}\0ls", "`ls`")
        rules.remember(scope, "allow_always")
        assert stat.S_IMODE(os.stat(rules.path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(rules.path)).st_mode) == 0o700
        assert Rules.for_project(str(tmp_path / "state"), str(ws)).lookup(scope) == "allow"
        # a file of the old format (whole tools allowed) is not trusted
        with open(rules.path, "w") as fh:
            json.dump({"allowed": ["write_file", "run_command:rm"], "rejected": []}, fh)
        assert Rules.for_project(str(tmp_path / "state"), str(ws)).allowed == set()

    def test_concurrent_writers_lose_no_answer(self, tmp_path: Path, ws: Path) -> None:
        """Two processes' rule sets on one file, remembering at the same time (merged under
        a lock; without it, each save replaced the other's)."""
        state = str(tmp_path / "state")
        first, second = Rules.for_project(state, str(ws)), Rules.for_project(state, str(ws))

        def remember(rules: Rules, prefix: str) -> None:
            for i in range(40):
                rules.remember(Scope("command", f"{ws}\0{prefix} {i}", ""), "allow_always")

        threads = [threading.Thread(target=remember, args=(r, p))
                   for r, p in ((first, "a"), (second, "b"))]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        merged = Rules.for_project(state, str(ws)).allowed
        assert len(merged) == 80


class TestLinks:
    async def test_grep_never_follows_a_link_out_of_the_roots(
        self, ws: Path, outside: Path
    ) -> None:
        (ws / "src" / "a.py").write_text("SECRET = 'not here'\n")
        os.symlink(outside / "secret.txt", ws / "src" / "leak.txt")
        os.symlink(ws / "src" / "a.py", ws / "docs" / "alias.py")  # inside -> inside: fine
        out = await Raw(Grep()).run({"pattern": "SECRET"}, FakeClient().context(str(ws)))
        assert "TOP SECRET" not in out.text
        assert "src/a.py:1" in out.text and "docs/alias.py:1" in out.text

    async def test_a_file_swapped_for_a_link_after_the_check_is_not_written(
        self, ws: Path, outside: Path
    ) -> None:
        tool = WriteFile()
        ctx = FakeClient().context(str(ws))
        args = tool.parse({"path": "src/target.txt", "content": "pwned"})
        (ws / "src" / "target.txt").write_text("mine")
        info = tool.describe(args, ctx)
        assert all(ctx.inside_roots(ctx.check(p)) for p in info.paths)  # what accept-edits sees
        os.unlink(ws / "src" / "target.txt")
        os.symlink(outside / "secret.txt", ws / "src" / "target.txt")
        with pytest.raises(ToolError, match="symbolic link"):
            await tool.run(args, ctx)
        assert (outside / "secret.txt").read_text() == "TOP SECRET\n"

    async def test_a_directory_swapped_for_a_link_after_the_check_is_not_written(
        self, ws: Path, outside: Path
    ) -> None:
        tool = WriteFile()
        ctx = FakeClient().context(str(ws))
        args = tool.parse({"path": "src/deep/secret.txt", "content": "pwned"})
        info = tool.describe(args, ctx)
        assert all(ctx.inside_roots(ctx.check(p)) for p in info.paths)
        os.rmdir(ws / "src" / "deep")
        os.symlink(outside, ws / "src" / "deep")
        with pytest.raises(ToolError, match="changed since it was checked"):
            await tool.run(args, ctx)
        assert (outside / "secret.txt").read_text() == "TOP SECRET\n"

    async def test_accept_edits_races_never_write_outside(self, ws: Path, outside: Path) -> None:
        """A thread flips the target between a file and a link to the secret while the
        agent writes it again and again (accept-edits: no question between check and
        write). The secret is never touched."""
        target = ws / "src" / "race.txt"
        target.write_text("start")
        stop = threading.Event()

        def flip() -> None:
            while not stop.is_set():
                try:
                    os.unlink(target)
                    os.symlink(outside / "secret.txt", target)
                    os.unlink(target)
                    target.write_text("file again")
                except OSError:
                    pass

        world = World(ws, mode="accept-edits", answers=["reject_once"] * 60)  # asked: a no
        for _ in range(60):
            world.provider.responses += [write("src/race.txt", "pwned"), text("ok")]
        flipper = threading.Thread(target=flip)
        flipper.start()
        try:
            for _ in range(60):
                await world.turn()
        finally:
            stop.set()
            flipper.join()
        assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
        for question in world.editor.asked:  # asked when a link was there at the check
            assert str(outside / "secret.txt") in question.title  # type: ignore[operator]


class TestChildren:
    def test_commands_get_no_keys(self) -> None:
        config = from_mapping({"keep-env": ["CI_API_KEY"],
                               "anthropic": {"api-key-env": "CORP_CLAUDE"}})  # fmt: skip
        env = child_environ(config, {
            "PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "k1", "ANTHROPIC_API_KEY": "k2",
            "ANTHROPIC_AUTH_TOKEN": "k3", "OPENROUTER_API_KEY": "k4", "CORP_CLAUDE": "k5",
            "GITHUB_AUTH_TOKEN": "k6", "some_api_key": "k7", "CI_API_KEY": "kept",
        })  # fmt: skip
        assert env == {"PATH": "/bin", "HOME": "/h", "CI_API_KEY": "kept"}

    async def test_a_command_run_for_the_model_cannot_read_the_key(self, ws: Path) -> None:
        world = World(ws, run("echo key=${OPENAI_API_KEY:-none}"), text("ok"), mode="bypass")
        world.env = child_environ(from_mapping({}), {**os.environ, "OPENAI_API_KEY": "sk-live"})
        await world.turn()
        (result,) = world.results()
        assert "key=none" in result.parts[0].text  # type: ignore[union-attr]
