"""``acp-agent serve``: the agent as a network service (see the package's docstring).

Closed by default: it will not start without a token (``ACP_AGENT_SERVE_TOKEN`` or
``--token-file``, at least 16 characters) unless told ``--insecure-no-auth`` on a
loopback address. The token is removed from the environment once read, so no tool,
terminal or MCP server the agent starts inherits it. A problem with the command line is
one line on stderr naming the flag and the fix, and exit status 2.

The ASGI server is hypercorn (HTTP/1.1, HTTP/2 over TLS by ALPN or cleartext, and
WebSocket, all from one well-kept pure-Python package built on h11, h2 and wsproto);
uvicorn, already installed with the MCP SDK, speaks no HTTP/2, which the RFD requires
of Streamable HTTP. Measured once (2026-12-04, the same app, one connection streaming the
offline model, the server's CPU per chunk): hypercorn 16.5 µs over WebSocket and 6.3 µs
over Streamable HTTP, uvicorn 12.9 and 7.2. What it costs per message against stdio:
``tools/bench.py --only serve`` (README). Its import stays here, off the way to a stdio
``initialize``.

SIGTERM (or SIGINT) drains: new connections are refused (``/healthz`` says ``draining``),
every running turn is cancelled and answered, every connection ended (WebSockets closed
1001), every session released and on disk, the logs flushed; then the process exits 0
(130 after SIGINT).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import signal
import socket
import sys
import threading
from typing import Any

from ..transports.hub import Limits, Settings

TOKEN_ENV = "ACP_AGENT_SERVE_TOKEN"
MIN_TOKEN = 16
DEFAULT_LISTEN = "127.0.0.1:8765"


class Refused(Exception):
    """The command line cannot be served; the message says why and what to do."""


def build_parser() -> argparse.ArgumentParser:
    from .flags import agent_flags

    p = argparse.ArgumentParser(
        prog="acp-agent serve",
        description="Serve the agent over the network at /acp: Streamable HTTP (POST, GET"
        " event streams, DELETE) and WebSocket, as the ACP transport RFD describes them."
        " The workspace is this machine's file system: a session's cwd must exist here, and"
        " tools run here.",
        epilog=f"The token: ${TOKEN_ENV} or --token-file; clients send `Authorization:"
        " Bearer <token>`. GET /healthz answers without it (container health checks).",
    )
    s = p.add_argument_group("serving")
    s.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                   help=f"address to listen on (default {DEFAULT_LISTEN}; [::1]:PORT for IPv6;"
                   " 0.0.0.0:8765 in a container)")  # fmt: skip
    s.add_argument("--token-file", metavar="FILE",
                   help=f"file holding the bearer token (default: ${TOKEN_ENV})")  # fmt: skip
    s.add_argument("--insecure-no-auth", action="store_true",
                   help="accept requests without a token (loopback addresses only)")  # fmt: skip
    s.add_argument("--allow-origin", metavar="ORIGIN", action="append", default=[],
                   help="a browser origin allowed to connect, e.g. https://ide.example.com"
                   " (repeatable; browsers are refused otherwise)")  # fmt: skip
    s.add_argument("--tls-cert", metavar="FILE", help="certificate chain (PEM) for HTTPS/WSS")
    s.add_argument("--tls-key", metavar="FILE", help="private key (PEM) of --tls-cert")
    s.add_argument("--client-fs", action="store_true",
                   help="the client shares this machine's file system: use its fs/* and"
                   " terminal/* methods and terminal login when it offers them")  # fmt: skip
    d = Limits()
    s.add_argument("--max-connections", type=_positive, default=d.max_connections,
                   metavar="N", help=f"ACP connections at once (default {d.max_connections})")
    s.add_argument("--max-message-bytes", type=_positive, default=d.max_message_bytes,
                   metavar="N", help=f"largest message a client may send (default"
                   f" {d.max_message_bytes})")  # fmt: skip
    s.add_argument("--idle-timeout", type=_seconds, default=d.idle_timeout, metavar="S",
                   help="end an HTTP connection with no stream open and no request for S"
                   f" seconds (default {d.idle_timeout:g})")  # fmt: skip
    s.add_argument("--stall-timeout", type=_seconds, default=d.stall_timeout, metavar="S",
                   help="end a connection whose client reads nothing of what waits for it"
                   f" for S seconds (default {d.stall_timeout:g})")  # fmt: skip
    agent_flags(p)
    return p


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise Refused(f"--listen {text!r}: write HOST:PORT, e.g. 127.0.0.1:8765 or [::1]:8765")
    return host.removeprefix("[").removesuffix("]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(args: argparse.Namespace, environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The token from ``--token-file`` or the environment (removed from it either way)."""
    from_env = environ.pop(TOKEN_ENV, None)
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                token = fh.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise Refused(f"--token-file {args.token_file}: {reason}") from None
        where = f"--token-file {args.token_file}"
    else:
        token, where = (from_env or "").strip(), f"${TOKEN_ENV}"
        if from_env is None:
            return None
    if len(token) < MIN_TOKEN or any(c.isspace() for c in token):
        raise Refused(f"{where}: the token must be at least {MIN_TOKEN} characters without"
                      " spaces, e.g. the output of `openssl rand -hex 32`")  # fmt: skip
    return token


def settings(args: argparse.Namespace, environ: Any = os.environ) -> tuple[Settings, str, int]:
    """What the flags say, checked (raises :class:`Refused`)."""
    host, port = parse_listen(args.listen)
    token = read_token(args, environ)
    if token is not None and args.insecure_no_auth:
        raise Refused("--insecure-no-auth and a token: drop one of them")
    if token is None and not args.insecure_no_auth:
        raise Refused(f"no token: set ${TOKEN_ENV} or --token-file FILE (clients send"
                      " `Authorization: Bearer <token>`), or --insecure-no-auth on a loopback"
                      " address")  # fmt: skip
    if args.insecure_no_auth and not is_loopback(host):
        raise Refused(f"--insecure-no-auth is allowed on loopback addresses only (127.0.0.1,"
                      f" ::1, localhost), not {host}; set a token instead")  # fmt: skip
    if bool(args.tls_cert) != bool(args.tls_key):
        raise Refused("--tls-cert and --tls-key go together")
    for flag, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path and not os.access(path, os.R_OK):
            raise Refused(f"{flag} {path}: cannot be read")
    limits = Limits(max_connections=args.max_connections,
                    max_message_bytes=args.max_message_bytes,
                    idle_timeout=args.idle_timeout, stall_timeout=args.stall_timeout)  # fmt: skip
    origins = frozenset(args.allow_origin)
    serving = Settings(token=token, allow_origins=origins, client_fs=args.client_fs,
                       limits=limits)  # fmt: skip
    return serving, host, port


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(256)
    except OSError as exc:
        sock.close()
        raise Refused(f"--listen {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def main(command: str, argv: list[str]) -> int:
    """Run ``serve`` (``command``) with ``argv``: its own flags and the agent's."""
    from .. import log
    from ..config import ConfigError
    from .flags import load_config

    args = build_parser().parse_args(argv)
    try:
        cfg = load_config(args)
        serving, host, port = settings(args)
        log.configure(cfg.log_level, cfg.log_file)
        sock = listen(host, port)
    except (ConfigError, Refused) as exc:
        sys.stderr.write(f"acp-agent serve: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"acp-agent serve: log file {cfg.log_file}: {exc.strerror}\n")
        return 2
    loop = asyncio.new_event_loop()
    code = loop.run_until_complete(run(cfg, serving, sock, args))
    # Not a normal exit: a worker thread may still be importing or reading; everything
    # the connections wrote is on disk (Hub.drain) and the log is line-buffered.
    sys.stderr.flush()
    os._exit(code)


async def run(cfg: Any, serving: Settings, sock: socket.socket, args: argparse.Namespace) -> int:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config as HyperConfig

    from ..transports.app import App
    from ..transports.hub import Hub

    hub = Hub(cfg, serving)
    app = App(hub)
    hc = HyperConfig()
    address = sock.getsockname()
    hc.bind = [f"fd://{sock.detach()}"]  # hypercorn's socket now
    if args.tls_cert:
        hc.certfile, hc.keyfile = args.tls_cert, args.tls_key
    hc.accesslog = None
    hc.errorlog = cfg.log_file or "-"
    hc.loglevel = "DEBUG" if cfg.log_level == "debug" else "WARNING"
    hc.websocket_max_message_size = serving.limits.max_message_bytes
    hc.keep_alive_timeout = 75.0  # behind a balancer, idle keep-alives outlive its own
    hc.graceful_timeout = 5.0
    stop = asyncio.Event()
    why: list[int] = []
    loop = asyncio.get_running_loop()

    def stopping(code: int) -> None:
        why.append(code)
        stop.set()

    for sig, code in ((signal.SIGTERM, 0), (signal.SIGINT, 130)):
        loop.add_signal_handler(sig, stopping, code)

    async def drained() -> None:
        await stop.wait()
        await hub.drain()  # before the listener closes: nothing waits on a stream

    threading.Thread(target=hub.warm, name="warm-up", daemon=True).start()
    scheme = "https" if args.tls_cert else "http"
    host = f"[{address[0]}]" if ":" in address[0] else address[0]
    sys.stderr.write(f"acp-agent serve: listening on {scheme}://{host}:{address[1]}/acp"
                     " (Streamable HTTP and WebSocket)\n")  # fmt: skip
    sys.stderr.flush()
    # hypercorn 0.18 raises InvalidStateError when a socket outlived its grace (a client
    # that reads nothing): every connection was drained already.
    with contextlib.suppress(asyncio.InvalidStateError):
        await serve(app, hc, shutdown_trigger=drained)  # type: ignore[arg-type]
    return why[0] if why else 0
