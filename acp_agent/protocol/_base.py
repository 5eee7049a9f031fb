"""Hand-written base of the generated ACP wire types (``types.py``, see tools/gen_protocol.py)."""

# No ``from __future__ import annotations``: every wire type inherits ``meta``, and an
# annotation kept as text is compiled again for each type a decoder is made for.
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["UNSET", "UnsetType", "Wire"]


class Wire(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Every ACP object: camelCase on the wire, UNSET fields omitted, ``_meta`` allowed."""

    meta: dict[str, Any] | UnsetType | None = msgspec.field(default=UNSET, name="_meta")
