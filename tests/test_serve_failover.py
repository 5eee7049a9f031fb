"""Scale-out, end to end: two ``acp-agent serve`` replicas sharing one state directory
behind a real HAProxy (Debian's) with cookie affinity, driven by the official TypeScript
SDK's Streamable HTTP client keeping its cookies across reconnects.

The replica holding the session is killed (SIGKILL: no drain, no flush) in the middle of
a turn; the client reconnects through the balancer, lands on the other replica, and
``session/load`` replays the conversation up to the last completed turn; the session goes
on there. A missing HAProxy fails the test (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
from pathlib import Path

import pytest

from .interop.test_ts_remote import run_remote
from .limits import WAIT, eventually, limit
from .procs import gone
from .remote import TOKEN, ServeProcess
from .schema_check import SchemaChecker

HAPROXY_CONFIG = """\
global
    maxconn 256
defaults
    mode http
    option http-no-delay
    timeout connect 2s
    timeout check {check}s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
    option redispatch
    retries 3
frontend acp
    bind fd@{fd}
    default_backend agents
backend agents
    balance roundrobin
    cookie ACP_REPLICA insert indirect nocache httponly
    option httpchk GET /healthz
    http-check expect status 200
{servers}
"""


def haproxy() -> str:
    found = shutil.which("haproxy") or shutil.which("/usr/sbin/haproxy")
    if found is None:
        pytest.fail("haproxy is not installed: `apt-get install haproxy` (.ci/run does)",
                    pytrace=False)  # fmt: skip
    return found


async def test_a_replica_dies_and_the_session_goes_on_on_the_other(
    checker: SchemaChecker, tmp_path: Path, state_dir: str
) -> None:
    binary = haproxy()
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        [{"text": "Hello from a replica!"}],
        [{"text": "partial answer "}, {"hang": True}, {"text": "NEVER-REACHED"}],
    ]))  # fmt: skip
    env = {"ACP_AGENT_SERVE_TOKEN": TOKEN, "ACP_AGENT_OFFLINE_SCRIPT": str(script)}
    replicas = {name: ServeProcess("--listen", "127.0.0.1:0", "--state-dir", state_dir, env=env)
                for name in ("r1", "r2")}  # fmt: skip
    front = socket.socket()
    front.bind(("127.0.0.1", 0))
    front.listen(64)
    url = f"http://127.0.0.1:{front.getsockname()[1]}/acp"
    balancer = None
    try:
        for replica in replicas.values():
            await replica.start()
        servers = "\n".join(
            f"    server {name} {r.url.split('//')[1].split('/')[0]} check inter 500ms"
            f" fall 3 rise 1 cookie {name}" for name, r in replicas.items())  # fmt: skip
        config = tmp_path / "haproxy.cfg"
        # a live replica slow to answer a health check on a busy machine is not down (one
        # failed check used to mark it so, and its client was sent to the other); a dead
        # one refuses connections, and `redispatch` moves its clients at once
        config.write_text(HAPROXY_CONFIG.format(fd=front.fileno(), servers=servers,
                                                check=round(limit(10))))  # fmt: skip
        balancer = await asyncio.create_subprocess_exec(
            binary, "-db", "-f", str(config), pass_fds=[front.fileno()],
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)  # fmt: skip
        control = tmp_path / "control"
        control.mkdir()
        workspace = tmp_path / "ws"
        workspace.mkdir()
        client = asyncio.ensure_future(run_remote(
            checker, tmp_path, url, "http", "failover", workspace=str(workspace),
            **{"control-dir": str(control)}))  # fmt: skip
        hanging = control / "hanging"
        await eventually(lambda: hanging.exists() or client.done(), "the second turn hangs")
        if client.done():  # it ended before the turn hung: with what the balancer saw
            balancer.terminate()
            seen = (await balancer.communicate())[1].decode(errors="replace")[-3000:]
            balancer = None
            pytest.fail(f"the client ended early: {client.exception()!r}\nhaproxy:\n{seen}")
        cookie = (control / "cookie").read_text()
        holder = cookie.removeprefix("ACP_REPLICA=")
        assert holder in replicas, cookie
        victim = replicas[holder].proc
        assert victim is not None
        victim.send_signal(signal.SIGKILL)
        await gone(victim.pid)
        (control / "killed").write_text("")
        s = await asyncio.wait_for(client, WAIT * 2)
    finally:
        if balancer is not None:
            balancer.terminate()
            await balancer.wait()
        front.close()
        for replica in replicas.values():
            await replica.close()
    f = s["failover"]
    assert f["first"] == {"stopReason": "end_turn", "text": "Hello from a replica!"}
    survivor = next(name for name in replicas if name != holder)
    assert f["cookieAfter"] == f"ACP_REPLICA={survivor}"  # the balancer moved it
    # everything up to the last completed turn, replayed by the other replica
    assert f["replayedUser"][:1] == ["hello"]
    assert f["replayedAgent"].startswith("Hello from a replica!")
    assert "NEVER-REACHED" not in f["replayedAgent"]
    assert f["after"] == {"stopReason": "end_turn", "text": "Hello from a replica!"}
    assert s["sdkErrors"] == [] or all("ACP" in e for e in s["sdkErrors"])
