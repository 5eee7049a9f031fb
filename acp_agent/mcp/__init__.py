"""MCP servers for a session: :class:`McpHub` connects the servers the editor passes in
``session/new`` and offers their tools and prompts.

Importing this package does not import the MCP SDK; the hub loads it (in a worker thread)
only when a session has servers to start.
"""

from __future__ import annotations

from ._acp import AcpRequest, deliver
from .hub import McpHub, McpPrompt, OnChange, OnProblem, PromptArgument, PromptError

__all__ = [
    "AcpRequest", "McpHub", "McpPrompt", "OnChange", "OnProblem", "PromptArgument", "PromptError",
    "deliver",
]
