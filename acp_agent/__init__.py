"""acp-agent: a reference Agent Client Protocol agent."""

from ._version import __version__

__all__ = ["__version__"]
