"""A signal ends the agent as the end of stdin does: an editor that quits sends SIGTERM
(Neovim's CodeCompanion does), a closed terminal SIGHUP, and a pipeline's Ctrl-C SIGINT.
The running turn ends, its command's whole process group is killed, the session is
written whole, and the exit status is 0."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from .harness import AgentProcess
from .limits import WAIT, eventually
from .procs import alive, group_gone
from .schema_check import SchemaChecker
from .test_sessions import load, started, text_block


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
async def test_a_signal_during_a_command_ends_everything_and_keeps_the_session(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path, sig: signal.Signals,
) -> None:
    pid_file = Path(workspace) / "pid"
    # the command and a child of its own, both in the command's process group
    command = (f"sleep 37 & echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; wait")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(
        [[{"tool_call": {"name": "run_command", "arguments": {"command": command}}}]]))
    env = {"ACP_AGENT_OFFLINE_SCRIPT": str(script)}
    after = tmp_path / "after.json"
    after.write_text(json.dumps([[{"text": "still here"}]]))
    args = ("--state-dir", state_dir, "--mode", "bypass")
    first = AgentProcess(checker, *args, env=env)
    async with first:
        await started(first)
        sid = await first.new_session(workspace)
        prompting = first.start_request(
            "session/prompt", {"sessionId": sid, "prompt": [text_block("sleep")]})
        await eventually(pid_file.exists, "the command runs")
        group = int(pid_file.read_text())
        assert alive(group)
        assert first.proc is not None
        first.proc.send_signal(sig)
        assert await first.close(timeout=WAIT) == 0, first.stderr.decode()
        await group_gone(group)  # the shell and its sleep: no orphan left
        response = await prompting  # every prompt is answered
        assert response["result"]["stopReason"] == "cancelled"
    assert b"Traceback" not in first.stderr

    second = AgentProcess(checker, *args, env={"ACP_AGENT_OFFLINE_SCRIPT": str(after)})
    async with second:
        await started(second)
        _, replayed = await load(second, sid, workspace)
        prompts = [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
        (call,) = [u for u in replayed if u["sessionUpdate"] == "tool_call"]
        assert prompts[0]["content"]["text"] == "sleep" and call["toolCallId"] == "call_1"
        assert (await second.prompt(sid, "again"))["stopReason"] == "end_turn"

