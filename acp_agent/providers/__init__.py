"""Model providers: the seam (:mod:`.base`), the families (:mod:`.registry`) and the
resilient wrapper every model request goes through (:mod:`.resilient`).

Importing this package imports no provider implementation and no SDK.
"""

from __future__ import annotations

from .registry import FAMILIES, Endpoint, ProviderSpec, check, make_provider, missing_key, spec

__all__ = [
    "FAMILIES",
    "Endpoint",
    "ProviderSpec",
    "check",
    "make_provider",
    "missing_key",
    "spec",
]
