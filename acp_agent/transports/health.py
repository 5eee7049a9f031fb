"""The container's health check (the Dockerfile's ``HEALTHCHECK``): exit 0 when healthy.

    python -m acp_agent.transports.health

In the image the agent is process 1. Started as ``acp-agent`` (stdio: an editor's
``docker run -i``) there is nothing to probe, so it is healthy; started as ``acp-agent
serve``, ``GET /healthz`` on the address it listens on (a wildcard address is asked on
loopback; ``https`` when it has ``--tls-cert``, whose certificate names the public host,
so it is not verified here) must answer ``200`` within 3 seconds. Standard library only.
"""

from __future__ import annotations

import ssl
import sys
import urllib.error
import urllib.request

DEFAULT_LISTEN = "127.0.0.1:8765"  # command.DEFAULT_LISTEN (not imported: it is heavier)
WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def target(argv: list[str]) -> str | None:
    """The ``/healthz`` URL of the ``serve`` that ``argv`` runs, or ``None`` (stdio)."""
    if "serve" not in argv:
        return None
    args = argv[argv.index("serve") + 1 :]
    listen, tls = DEFAULT_LISTEN, False
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if not eq and i + 1 < len(args):
            value = args[i + 1]
        if flag == "--listen":
            listen = value
        elif flag == "--tls-cert":
            tls = True
    host, _, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    host = WILDCARDS.get(host, host)
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}/healthz"


def probe(argv: list[str], timeout: float = 3.0) -> int:
    url = target(argv)
    if url is None:
        return 0
    context = ssl._create_unverified_context() if url.startswith("https") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return 0 if response.status == 200 else 1
    except (OSError, urllib.error.URLError) as exc:
        sys.stderr.write(f"unhealthy: {url}: {exc}\n")
        return 1


def main() -> int:
    try:
        with open("/proc/1/cmdline", "rb") as fh:
            argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return 0
    return probe(argv)


if __name__ == "__main__":
    raise SystemExit(main())
