"""A session's id: made for a new session, and checked before it names a file in the
store. Light on purpose: ``session/new`` answers with a new id before the rest of the
session machinery is loaded (``handlers.opening``)."""

from __future__ import annotations

import os
import re

_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


def new_session_id() -> str:
    return "sess_" + os.urandom(12).hex()


def valid_id(session_id: str) -> bool:
    """Whether ``session_id`` can name a file in the store (no paths, no dot-files)."""
    return _ID.fullmatch(session_id) is not None
