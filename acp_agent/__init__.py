"""acp-agent: a reference Agent Client Protocol agent."""

import threading

from ._version import __version__

__all__ = ["IMPORTING", "__version__"]

#: Held by every import of the package's late stages and of the SDKs done off the event
#: loop (the warm-up thread, a request's worker thread, the MCP SDK's loader): one such
#: import at a time. Two threads importing at once can each hold a module's import lock
#: the other needs, and Python then fails one of them (``_DeadlockError``: seen with the
#: turn stage's ``importlib.resources`` against the Anthropic SDK's). Taken before any
#: other lock. Here, in the package every layer may import.
IMPORTING = threading.RLock()
