"""ACP wire types. The generated types live in ``acp_agent.protocol.types``."""

from ._base import UNSET, UnsetType, Wire

__all__ = ["UNSET", "UnsetType", "Wire"]
