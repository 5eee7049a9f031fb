"""The ``providers/*`` methods (unstable): the editor's equivalent of ``--base-url``.

- ``providers/list``: every provider family served over the network (the offline model
  runs in-process and is not listed), by its family name (the ``--model`` prefix): the
  protocol it speaks, whether it is required (the configured model's family: it cannot be
  disabled), and its current base URL (any password in it masked). Never a key or a header.
- ``providers/set``: replaces the family's base URL and headers, like ``[<family>]
  base-url``/``headers`` would (timeouts, ``api`` and ``api-key-env`` stay as configured).
  Headers may carry the credentials (``Authorization``, ``x-api-key``, ``api-key``): the
  agent's own key is then not sent. A family disabled before is enabled again.
- ``providers/disable``: the family's models leave the model picker and are refused on
  use; an unknown id is a success (idempotent), the required family ``-32602``.

What is set lives in this process only and is never written anywhere (the RFD: provider
configuration is process-scoped and should not be persisted). It applies to every model
request that starts afterwards: new sessions, and the next turn of open ones (a turn
streaming now finishes where it started). Bad input is ``-32602`` naming the field, never
echoing a header's value.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import msgspec

from .. import log
from ..errors import InvalidParams
from ..protocol import types as t

if TYPE_CHECKING:
    from ..providers import ProviderSpec
    from .runtime import Runtime

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
MAX_URL = 2048


async def list_providers(rt: Runtime, p: t.ListProvidersRequest | None) -> t.ListProvidersResponse:
    from ..providers.registry import base_url, spec

    out = []
    for family in _listed():
        s = spec(family)
        current = None
        if family not in rt.disabled:
            url = base_url(rt.config, family) or s.sdk_base_url or ""
            current = t.ProviderCurrentConfig(api_type=s.protocol, base_url=_masked(url))
        out.append(
            t.ProviderInfo(
                provider_id=family,
                supported=[s.protocol],
                required=family == rt.config.provider,
                current=current,
            )
        )
    return t.ListProvidersResponse(providers=out)


async def set_provider(rt: Runtime, p: t.SetProviderRequest) -> t.SetProviderResponse:
    s = _configurable(p.provider_id)
    if p.api_type != s.protocol:
        raise InvalidParams(
            f"Invalid params: {s.name} speaks {s.protocol!r}, not {p.api_type!r}"
            " - at `$.apiType`"
        )
    _check_url(p.base_url)
    headers = {} if isinstance(p.headers, msgspec.UnsetType) else dict(p.headers)
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise InvalidParams(f"Invalid params: {name!r} is not a header name - at `$.headers`")
        if _BAD_VALUE.search(value):
            raise InvalidParams(
                f"Invalid params: the value of header {name!r} contains a line break or a"
                " control character - at `$.headers`"
            )
    config = rt.config
    settings = msgspec.structs.replace(
        config.provider_settings(s.name), base_url=p.base_url, headers=headers
    )
    rt.config = msgspec.structs.replace(config, providers={**config.providers, s.name: settings})
    rt.disabled.discard(s.name)
    rt.reroute(s.name)
    log.info("provider routed by the client", provider=s.name, base_url=_masked(p.base_url),
             headers=sorted(headers))  # names only  # fmt: skip
    return t.SetProviderResponse()


async def disable_provider(
    rt: Runtime, p: t.DisableProviderRequest
) -> t.DisableProviderResponse:
    if p.provider_id not in _listed():
        return t.DisableProviderResponse()  # unknown: nothing to disable
    if p.provider_id == rt.config.provider:
        raise InvalidParams(
            f"Invalid params: {p.provider_id!r} is required: it serves the configured model"
            f" {rt.config.model} - at `$.providerId`"
        )
    rt.disabled.add(p.provider_id)
    rt.reroute(p.provider_id)
    log.info("provider disabled by the client", provider=p.provider_id)
    return t.DisableProviderResponse()


def _listed() -> list[str]:
    """The families ``providers/*`` know: those served over the network."""
    from ..providers.registry import FAMILIES, spec

    return [f for f in FAMILIES if spec(f).remote]


def _configurable(provider_id: str) -> ProviderSpec:
    from ..providers.registry import spec

    listed = _listed()
    if provider_id not in listed:
        raise InvalidParams(
            f"Invalid params: unknown provider {provider_id!r}: one of {', '.join(listed)}"
            " - at `$.providerId`"
        )
    return spec(provider_id)


def _check_url(url: str) -> None:
    """An absolute http(s) URL with a host; the URL itself is not echoed (it may hold a
    password)."""
    problem = None
    if len(url) > MAX_URL:
        problem = f"is longer than {MAX_URL} characters"
    elif not url or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        problem = "is empty or contains spaces or control characters"
    else:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 (raises on a port that is not a number in range)
        except ValueError:
            problem = "is not a valid URL"
        else:
            if parts.scheme not in ("http", "https"):
                problem = "must start with http:// or https://"
            elif not parts.hostname:
                problem = "names no host"
    if problem is not None:
        raise InvalidParams(
            f"Invalid params: `baseUrl` {problem} (e.g. https://llm.example.com/v1)"
            " - at `$.baseUrl`"
        )


def _masked(url: str) -> str:
    """``url`` without the password it may carry (``https://user:***@host/v1``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username}:***@{host}").geturl()
