"""The HTTP clients under the SDK clients: one TLS context for all of them, built beside
the SDK's import, and idle connections kept long enough to outlast a person typing.

**The TLS context.** An httpx client builds a TLS context when it is created, whatever
its URL's scheme (for ``http://`` too) and once per transport (a proxy from the
environment adds one): loading the system's trust store takes 15-20 ms here, and the
first SDK client of a process took 31 ms to build, 17 ms of it that. The loading runs in
OpenSSL without the GIL, so :func:`start` builds the context in a thread of its own
while the warm-up thread imports the SDK (measured: ``import openai`` with the context
built beside it, 287 ms; one after the other, 308 ms), and every SDK client gets it
(:func:`http_client`: ``DefaultAsyncHttpxClient(verify=...)``, the SDK's own defaults
otherwise). It is httpcore's default context, as the client would have built it
(``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` honoured).

**Idle connections.** The SDKs keep an idle connection 5 s (httpx's default), so the
connection a session opens ahead of its first prompt (``_sdk.Ahead``) was gone by the
time a person had typed the prompt, and the prompt waited for a new one (TCP and TLS:
one to three round trips to the vendor). :data:`KEEP_IDLE` keeps it 50 s (Go's HTTP
client keeps 90 s), under the idle timeouts of common load balancers and NATs (AWS's
load balancers default to 60 s, NATs to 4-5 min). A connection the server closed
meanwhile is never reused: httpcore sees it readable (closed) and drops it, and a request
that races a closing server fails before anything streamed, which the resilient wrapper
retries.

**Requests in the log.** At the ``debug`` level (``--debug``, ``--log-level debug``) every
HTTP request the SDKs make is logged when its answer's headers arrive: method, URL (no
user or password, no secret query parameter), status, and the milliseconds from sending
to the headers (:func:`log_hooks`); a request that gets no answer is logged by the
provider's error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from threading import Lock, Thread
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .. import log

if TYPE_CHECKING:
    import ssl

KEEP_IDLE = 50.0
"""Seconds an idle connection stays in an SDK client's pool."""

_context: Future[ssl.SSLContext] | None = None
_lock = Lock()


def start() -> None:
    """Start building the shared context in a thread of its own (once). What builds it is
    imported here, in the caller's thread: the thread of its own imports nothing, so it
    never imports beside another thread (``acp_agent.IMPORTING``)."""
    global _context
    future: Future[ssl.SSLContext] = Future()
    with _lock:
        if _context is not None:
            return
        _context = future
    try:
        build = _builder()
    except Exception as exc:  # no SDK HTTP stack to build with: callers go without
        future.set_exception(exc)
        return
    try:
        Thread(target=_build, args=(future, build), name="tls-context", daemon=True).start()
    except Exception as exc:  # no thread to be had: never leave a caller waiting
        future.set_exception(exc)


def context() -> ssl.SSLContext | None:
    """The shared context (built now if :func:`start` was not called); ``None`` if it
    could not be built."""
    start()
    assert _context is not None
    try:
        return _context.result()
    except Exception as exc:
        log.debug("no shared TLS context", error=repr(exc))
        return None


def http_client(sdk: Any) -> Any:
    """An httpx client for an SDK client of ``sdk`` (the ``openai`` or ``anthropic``
    module): the SDK's defaults, with :data:`KEEP_IDLE` and the shared context (if it
    could not be built, the client builds its own, and says what is wrong). ``None``
    (the SDK's own client) for an SDK that does not name its defaults."""
    default = getattr(sdk, "DEFAULT_CONNECTION_LIMITS", None)
    if default is None or not hasattr(sdk, "DefaultAsyncHttpxClient"):
        return None
    limits = type(default)(
        max_connections=default.max_connections,
        max_keepalive_connections=default.max_keepalive_connections,
        keepalive_expiry=KEEP_IDLE,
    )
    shared = context()
    hooks = log_hooks() if log.enabled("debug") else {}
    if shared is None:
        return sdk.DefaultAsyncHttpxClient(limits=limits, event_hooks=hooks)
    return sdk.DefaultAsyncHttpxClient(verify=shared, limits=limits, event_hooks=hooks)


_SECRET = ("key", "token", "secret", "signature", "password", "auth", "sig")


def shown_url(url: str) -> str:
    """``url`` fit for a log: without user and password, secret parameters masked."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    query = [(k, "***" if any(s in k.lower() for s in _SECRET) else v)
             for k, v in parse_qsl(parts.query, keep_blank_values=True)]  # fmt: skip
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*"), ""))


def log_hooks() -> dict[str, list[Any]]:
    """httpx event hooks that log each request with its status and time."""
    async def sent(request: Any) -> None:
        request.extensions["acp_agent_sent"] = time.monotonic()

    async def answered(response: Any) -> None:
        request = response.request
        began = request.extensions.get("acp_agent_sent")
        ms = round((time.monotonic() - began) * 1000, 1) if began is not None else None
        log.debug("model request", method=request.method, url=shown_url(str(request.url)),
                  status=response.status_code, ms=ms)  # fmt: skip

    return {"request": [sent], "response": [answered]}


def _build(future: Future[ssl.SSLContext], build: Callable[[], ssl.SSLContext]) -> None:
    try:
        future.set_result(build())
    except Exception as exc:
        future.set_exception(exc)


def _builder() -> Callable[[], ssl.SSLContext]:
    """What the SDKs' HTTP stack builds its default context with (imported on the first
    SDK client's way: the warm-up's, or a provider's)."""
    try:  # httpx2's, when the SDKs run on it
        from httpcore2 import default_ssl_context
    except ImportError:  # an SDK on classic httpx: what that builds
        import httpx

        return httpx.create_ssl_context
    return default_ssl_context
