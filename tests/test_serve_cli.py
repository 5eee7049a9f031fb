"""``acp-agent serve`` as a command: closed by default, one clear line for every flag it
refuses, SIGTERM drains, TLS (HTTP/2 by ALPN), and the token never reaches a child."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from acp_agent.cli import serve as command
from acp_agent.cli.serve import Refused, build_parser, is_loopback, parse_listen

from .harness import agent_env
from .limits import WAIT
from .remote import AUTH, TOKEN, HttpClient, ServeProcess, WsClient
from .schema_check import SchemaChecker


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_listen("[::1]:9") == ("::1", 9)
    assert parse_listen("0.0.0.0:0") == ("0.0.0.0", 0)
    for bad in ("8765", "localhost", ":80", "host:99999", "host:http"):
        with pytest.raises(Refused, match="HOST:PORT"):
            parse_listen(bad)
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")


@pytest.mark.parametrize(("argv", "env", "problem"), [
    ((), {}, "no token: set $ACP_AGENT_SERVE_TOKEN or --token-file"),
    ((), {"ACP_AGENT_SERVE_TOKEN": "short"}, "at least 16 characters"),
    ((), {"ACP_AGENT_SERVE_TOKEN": "has a space in it, long enough"}, "without spaces"),
    (("--insecure-no-auth", "--listen", "0.0.0.0:8765"), {}, "loopback addresses only"),
    (("--insecure-no-auth",), {"ACP_AGENT_SERVE_TOKEN": TOKEN}, "drop one of them"),
    (("--tls-cert", "/x.pem"), {"ACP_AGENT_SERVE_TOKEN": TOKEN}, "go together"),
    (("--tls-cert", "/no/cert.pem", "--tls-key", "/no/key.pem"), {"ACP_AGENT_SERVE_TOKEN": TOKEN},
     "--tls-cert /no/cert.pem: cannot be read"),
    (("--token-file", "/no/such/token"), {}, "--token-file /no/such/token: No such file"),
])  # fmt: skip
def test_what_serve_refuses(argv: tuple[str, ...], env: dict[str, str], problem: str) -> None:
    environ = dict(env)
    with pytest.raises(Refused, match=problem.replace("$", r"\$")):
        command.settings(args(*argv), environ)
    assert "ACP_AGENT_SERVE_TOKEN" not in environ  # read once, then gone


def test_the_token_comes_from_a_file_or_the_environment(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"  {TOKEN}\n")
    environ = {"ACP_AGENT_SERVE_TOKEN": "ignored-when-a-file-is-given"}
    settings, host, port = command.settings(args("--token-file", str(token_file)), environ)
    assert settings.token == TOKEN and (host, port) == ("127.0.0.1", 8765)
    assert environ == {}
    settings, *_ = command.settings(args(), {"ACP_AGENT_SERVE_TOKEN": TOKEN})
    assert settings.token == TOKEN
    loose, *_ = command.settings(args("--insecure-no-auth", "--listen", "[::1]:0"), {})
    assert loose.token is None
    limits, *_ = command.settings(args("--max-connections", "3", "--idle-timeout", "2.5",
                                       "--allow-origin", "https://a", "--client-fs"),
                                  {"ACP_AGENT_SERVE_TOKEN": TOKEN})  # fmt: skip
    assert limits.limits.max_connections == 3 and limits.limits.idle_timeout == 2.5
    assert limits.allow_origins == {"https://a"} and limits.client_fs


def run_serve(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "acp_agent", "serve", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=WAIT,
                          env=agent_env(env))  # fmt: skip


def test_serve_will_not_start_open(state_dir: str) -> None:
    done = run_serve("--listen", "127.0.0.1:0", "--state-dir", state_dir)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("acp-agent serve: no token:")
    assert len(done.stderr.splitlines()) == 1
    bad = run_serve("--max-connections", "0")
    assert bad.returncode == 2 and "must be at least 1" in bad.stderr
    help_ = subprocess.run([sys.executable, "-m", "acp_agent", "--help"], capture_output=True,
                           text=True, timeout=WAIT, env=agent_env())  # fmt: skip
    assert "\n  serve " in help_.stdout  # in the table of commands


async def test_a_taken_address_is_one_clear_line(state_dir: str) -> None:
    first = await ServeProcess("--listen", "127.0.0.1:0", "--state-dir", state_dir,
                               env={"ACP_AGENT_SERVE_TOKEN": TOKEN}).start()  # fmt: skip
    try:
        port = first.url.rsplit(":", 1)[1].split("/")[0]
        done = await asyncio.to_thread(run_serve, "--listen", f"127.0.0.1:{port}",
                                       env={"ACP_AGENT_SERVE_TOKEN": TOKEN})  # fmt: skip
        assert done.returncode == 2
        taken = f"acp-agent serve: --listen 127.0.0.1:{port}: Address already in use\n"
        assert done.stderr == taken
    finally:
        await first.close()


@pytest.mark.parametrize("profile", ["ws", "http"])
async def test_sigterm_drains(tmp_path: Path, state_dir: str, workspace: str,
                              checker: SchemaChecker, profile: str) -> None:  # fmt: skip
    script = tmp_path / "script.json"
    script.write_text(json.dumps([[{"text": "partial answer "}, {"hang": True}]]))
    log_file = tmp_path / "serve.log"
    server = await ServeProcess("--listen", "127.0.0.1:0", "--state-dir", state_dir,
                                "--log-level", "info", "--log-file", str(log_file),
                                env={"ACP_AGENT_SERVE_TOKEN": TOKEN,
                                     "ACP_AGENT_OFFLINE_SCRIPT": str(script)}).start()  # fmt: skip
    client = await WsClient(server.url, checker).connect() if profile == "ws" else \
        HttpClient(server.url, checker)
    try:
        await client.initialize()
        sid = await client.new_session(workspace)
        turn = client.start("session/prompt", {"sessionId": sid,
                                               "prompt": [{"type": "text", "text": "go"}]})
        await client.wait_for(lambda: "partial" in client.text(sid))
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        answer = await turn
        assert answer["result"]["stopReason"] == "cancelled"
        assert await server.wait() == 0
        stored = Path(state_dir, "sessions", f"{sid}.jsonl").read_text()
        assert "partial answer" in stored
        logged = log_file.read_text()
        assert "the server is shutting down" in logged  # flushed before the exit
        if isinstance(client, WsClient):
            await client.closed.wait()
            assert client.socket.close_code == 1001
    finally:
        await client.close()
        await server.close()


async def test_tls_serves_http2_and_wss(tmp_path: Path, state_dir: str, workspace: str,
                                       checker: SchemaChecker) -> None:  # fmt: skip
    import ssl

    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.private_key_pem.write_to_path(str(key_file))
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    server = await ServeProcess("--listen", "127.0.0.1:0", "--state-dir", state_dir,
                                "--tls-cert", str(cert_file), "--tls-key", str(key_file),
                                env={"ACP_AGENT_SERVE_TOKEN": TOKEN}).start()  # fmt: skip
    context = ssl.create_default_context()
    ca.configure_trust(context)
    try:
        assert server.url.startswith("https://127.0.0.1:")
        client = HttpClient(server.url, checker, verify=context, http2=True)
        await client.initialize()
        sid = await client.new_session(workspace)
        assert (await client.prompt(sid, "hello"))["stopReason"] == "end_turn"
        async with httpx.AsyncClient(verify=context, http2=True) as http:
            health = await http.get(server.url.replace("/acp", "/healthz"))
            assert health.http_version == "HTTP/2" and health.text == "ok\n"
        await client.close()
        import websockets

        plain = ssl.create_default_context()  # (httpx set ALPN h2 on the other one)
        ca.configure_trust(plain)
        secure = await websockets.connect(server.url.replace("https", "wss", 1),
                                          additional_headers=AUTH, ssl=plain)  # fmt: skip
        assert secure.response is not None and secure.response.headers["acp-connection-id"]
        await secure.close()
    finally:
        await server.close()


async def test_the_token_never_reaches_a_child(tmp_path: Path, state_dir: str, workspace: str,
                                              checker: SchemaChecker) -> None:  # fmt: skip
    out = Path(workspace) / "env.txt"
    call = {"name": "run_command", "arguments": {"command": f"env > {out}"}}
    script = tmp_path / "script.json"
    script.write_text(json.dumps([[{"tool_call": call}], [{"text": "done"}]]))
    server = await ServeProcess("--listen", "127.0.0.1:0", "--state-dir", state_dir,
                                "--mode", "bypass",
                                env={"ACP_AGENT_SERVE_TOKEN": TOKEN,
                                     "ACP_AGENT_OFFLINE_SCRIPT": str(script)}).start()  # fmt: skip
    client = await WsClient(server.url, checker).connect()
    try:
        await client.initialize()
        sid = await client.new_session(workspace)
        assert (await client.prompt(sid, "list the environment"))["stopReason"] == "end_turn"
        environment = out.read_text()
        assert "PATH=" in environment  # the command ran, here
        assert TOKEN not in environment and "ACP_AGENT_SERVE_TOKEN" not in environment
    finally:
        await client.close()
        await server.close()


def test_the_health_check_finds_the_server_in_the_command_line() -> None:
    from acp_agent.transports.health import target

    assert target(["/usr/local/bin/python", "/usr/local/bin/acp-agent"]) is None  # stdio
    assert target(["python", "acp-agent", "--model", "offline"]) is None
    assert target(["python", "acp-agent", "serve"]) == "http://127.0.0.1:8765/healthz"
    assert target(["acp-agent", "serve", "--listen", "0.0.0.0:9000", "--tls-cert", "c.pem"]) == \
        "https://127.0.0.1:9000/healthz"
    assert target(["acp-agent", "serve", "--listen=[::]:80"]) == "http://[::1]:80/healthz"
    assert target(["acp-agent", "serve", "--listen", "10.1.2.3:1"]) == "http://10.1.2.3:1/healthz"


async def test_the_health_check_asks_the_server(tmp_path: Path, state_dir: str) -> None:
    from acp_agent.config import Config
    from acp_agent.transports.health import probe
    from acp_agent.transports.hub import Settings

    from .remote import serving

    async with serving(Config(state_dir=state_dir), Settings(token=TOKEN)) as (url, hub):
        listen = url.removeprefix("http://").removesuffix("/acp")
        argv = ["acp-agent", "serve", "--listen", listen]
        assert await asyncio.to_thread(probe, argv) == 0
        hub.draining = True  # /healthz says 503: unhealthy
        assert await asyncio.to_thread(probe, argv) == 1
        hub.draining = False
    assert await asyncio.to_thread(probe, argv) == 1  # nobody listens
    assert await asyncio.to_thread(probe, ["acp-agent"]) == 0
