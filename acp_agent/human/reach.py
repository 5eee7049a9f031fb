"""Is anything there? A TCP connection to a base URL's host and port, made once, quickly,
without retries: what ``run``/``chat`` check before the first prompt (a server that is
not there is a mistake to name at once, status 2) and ``doctor`` reports."""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..providers.registry import endpoint, spec

if TYPE_CHECKING:
    from ..config import Config

DEFAULT_TIMEOUT = 5.0


async def probe(url: str, timeout: float = DEFAULT_TIMEOUT) -> str | None:
    """``None`` when a TCP connection to ``url``'s host and port opens; else why not:
    "connection refused", "unknown host 'x'", "no answer within 5 s"."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "not a URL"
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except socket.gaierror:
        return f"unknown host {host!r}"
    except ConnectionRefusedError:
        return "connection refused"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or str(exc)
    writer.close()
    return None


def model_url(config: Config) -> str | None:
    """Where the configured model's requests go (``None``: not over the network)."""
    family = spec(config.provider)
    if not family.remote:
        return None
    return endpoint(config, family.name).base_url or family.sdk_base_url


def unreachable(family: str, url: str, why: str, source: str) -> str:
    """One line: where, why, and the likely fix."""
    hint = spec(family).unreachable_hint if fatal(why) else None
    return f"cannot connect to {url} ({source}): {why}; " + (
        hint or "is the server running, and is the base URL right?"
    )


def fatal(why: str | None) -> bool:
    """Refused or unknown: nothing will answer (a slow answer may still come)."""
    return why is not None and (why == "connection refused" or why.startswith("unknown host"))
