"""What the model is told: the system prompt of a session's requests.

``system-prompt`` in the configuration replaces the built-in text (``{cwd}`` is the
session's directory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .session import Session

SYSTEM_PROMPT = """\
You are acp-agent, a coding agent working inside the user's editor through the Agent \
Client Protocol. The workspace root is {cwd}. Use the tools to read, search and change \
files and to run commands; paths may be relative to the workspace root. Keep the user \
informed: publish a plan with update_plan for multi-step work and keep it current. \
Be concise."""


def system_prompt(session: Session, override: str | None = None) -> str:
    return (override or SYSTEM_PROMPT).replace("{cwd}", session.cwd)
