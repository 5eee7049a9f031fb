"""The TLS context every SDK client of the process shares, built once, beside the SDK's
import.

An httpx client builds a TLS context when it is created, whatever its URL's scheme (for
``http://`` too) and once per transport (a proxy from the environment adds one): loading
the system's trust store takes 15-20 ms here, and the first SDK client of a process took
31 ms to build, 17 ms of it that. The loading runs in OpenSSL without the GIL, so
:func:`start` builds the context in a thread of its own while the warm-up thread imports
the SDK (measured: ``import openai`` with the context built beside it, 287 ms; one after
the other, 308 ms), and the providers hand it to their SDK clients
(``DefaultAsyncHttpxClient(verify=...)``, the SDKs' own defaults otherwise). The context
is httpcore's default, as the client would have built it (``SSL_CERT_FILE`` and
``SSL_CERT_DIR`` honoured).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from .. import log

if TYPE_CHECKING:
    import ssl

_context: Future[ssl.SSLContext] | None = None
_lock = threading.Lock()


def start() -> None:
    """Start building the shared context in a thread of its own (once)."""
    global _context
    with _lock:
        if _context is not None:
            return
        _context = Future()
    threading.Thread(target=_build, args=(_context,), name="tls-context", daemon=True).start()


def context() -> ssl.SSLContext | None:
    """The shared context (built now if :func:`start` was not called); ``None`` if it
    could not be built (each SDK client then builds its own, and says what is wrong)."""
    start()
    assert _context is not None
    try:
        return _context.result()
    except Exception as exc:
        log.debug("no shared TLS context", error=repr(exc))
        return None


def http_client(sdk: Any) -> Any:
    """An httpx client for an SDK client of ``sdk`` (the ``openai`` or ``anthropic``
    module) with the shared context and the SDK's own defaults; ``None``: the SDK's."""
    shared = context()
    return None if shared is None else sdk.DefaultAsyncHttpxClient(verify=shared)


def _build(future: Future[ssl.SSLContext]) -> None:
    try:
        from httpcore2 import default_ssl_context

        future.set_result(default_ssl_context())
    except Exception as exc:
        future.set_exception(exc)
