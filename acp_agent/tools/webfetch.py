"""web_fetch: read a web page (documentation, an issue, a changelog) as Markdown.

The page is fetched with httpx (redirects followed by hand, at most
:data:`MAX_REDIRECTS`), its HTML converted to Markdown by ``markdownify`` (on
BeautifulSoup's standard-library parser; measured on a 1.5 MB HTML page, a loaded
two-core machine: markdownify 2.7 s, html-to-markdown (Rust) 0.6 s, html2text 1.4 s
but GPL; documentation pages are tens to hundreds of KB, converted in a worker thread,
so the well-kept pure-Python library wins), cut to ``[limits] web-max-chars``.

Where it may go: each host is resolved first and every address it resolves to checked;
a private, loopback, link-local (or otherwise non-public) address is refused unless
``[web] allow-private = true``; the connection is then made to the checked address (the
URL's host kept for the ``Host`` header, TLS's server name and certificate check), so a
second resolution cannot lead elsewhere; every redirect is checked the same way. No
proxy from the environment is used (it would resolve the name itself). It asks
permission like a read outside the roots; "always" covers one host
(``permissions.Scope`` ``host``). Offered only when ``[web] enabled`` (the default).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from msgspec import Meta

from .._version import __version__
from ..errors import ToolError
from .base import Arguments, BuiltinTool, CallInfo, ToolContext, ToolKind, ToolOutput

MAX_REDIRECTS = 5
_REDIRECTS = {301, 302, 303, 307, 308}
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not public either

Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(frozen=True, slots=True)
class WebSettings:
    """``[web]`` and the web limits of ``[limits]``."""

    allow_private: bool = False
    timeout: float = 30.0
    max_bytes: int = 5_000_000
    max_chars: int = 50_000


@dataclass(frozen=True, slots=True)
class Page:
    url: str
    status: int
    content_type: str
    body: bytes
    cut: bool
    """The body went on past ``max_bytes``."""


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast
                or ip.is_reserved or ip.is_unspecified or ip in _SHARED)  # fmt: skip


async def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (a literal address as itself)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ToolError(f"cannot resolve {host}: {exc.strerror or exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def fetch(url: str, settings: WebSettings, *, resolver: Resolver = resolve,
                transport: Any = None) -> Page:  # fmt: skip
    """GET ``url``, following redirects; every hop's addresses checked first. The whole
    fetch, redirects and a page that trickles in included, takes at most
    ``settings.timeout`` seconds."""
    try:
        async with asyncio.timeout(settings.timeout):
            return await _fetch(url, settings, resolver, transport)
    except TimeoutError:
        raise ToolError(
            f"cannot fetch {url}: no whole page within {settings.timeout:g} s"
            " (`[limits] web-timeout`)") from None


async def _fetch(url: str, settings: WebSettings, resolver: Resolver, transport: Any) -> Page:
    # only when the tool runs: httpx and markdownify stay out of every other turn
    import httpx

    current = httpx.URL(url)
    async with httpx.AsyncClient(
        timeout=settings.timeout, trust_env=False, follow_redirects=False, transport=transport,
        headers={"User-Agent": f"acp-agent/{__version__} (web_fetch)",
                 "Accept": "text/html,text/markdown,text/plain,*/*;q=0.5"},
    ) as client:  # fmt: skip
        for _ in range(MAX_REDIRECTS + 1):
            target, headers, extensions = await _pinned(current, settings, resolver)
            request = client.build_request("GET", target, headers=headers,
                                           extensions=extensions)  # fmt: skip
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise ToolError(f"cannot fetch {current}: {exc}") from None
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    current = current.join(location)
                    continue
                body, cut = await _read(response, settings.max_bytes)
            finally:
                await response.aclose()
            content_type = response.headers.get("content-type", "")
            return Page(str(current), response.status_code, content_type, body, cut)
    raise ToolError(f"more than {MAX_REDIRECTS} redirects from {url}; stopped at {current}")


async def _pinned(url: Any, settings: WebSettings, resolver: Resolver
                  ) -> tuple[Any, dict[str, str], dict[str, Any]]:  # fmt: skip
    """The request for ``url`` made to its checked address: the URL with that address as
    its host, the ``Host`` header and TLS server name of the original."""
    if url.scheme not in ("http", "https") or not url.host:
        raise ToolError(f"only http and https URLs can be fetched, not {url}")
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = await resolver(url.host, port)
    if not addresses:
        raise ToolError(f"{url.host} resolves to no address")
    if not settings.allow_private:
        for address in addresses:
            if not is_public(address):
                raise ToolError(
                    f"refused: {url.host} resolves to {address}, a private, loopback or "
                    "link-local address (set `[web] allow-private = true` to allow it)")
    address = addresses[0]
    host_header = url.host if url.port is None else f"{url.host}:{url.port}"
    pinned = url.copy_with(host=address)
    extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
    return pinned, {"Host": host_header}, extensions


async def _read(response: Any, limit: int) -> tuple[bytes, bool]:
    """The body, decoded (gzip, deflate: what the request said it accepts), cut at
    ``limit`` decoded bytes: a small compressed page that expands past it is cut too."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), True
    return bytes(body), False


# ---------------------------------------------------------------------- to text

_TEXT = re.compile(r"^(text/|application/(json|xml|javascript|x-yaml|yaml|toml)|[^;]*\+(json|xml))")


def readable(page: Page) -> tuple[str, str]:
    """(the page as text for the model, what it was converted from)."""
    kind = page.content_type.split(";")[0].strip().lower()
    charset = re.search(r"charset=([\w-]+)", page.content_type, re.IGNORECASE)
    try:
        text = page.body.decode(charset.group(1) if charset else "utf-8", "replace")
    except LookupError:
        text = page.body.decode("utf-8", "replace")
    if kind in ("text/html", "application/xhtml+xml") or (not kind and "<html" in text[:500]):
        return to_markdown(text), "HTML converted to Markdown"
    if _TEXT.match(kind) or not kind:
        return text, "text"
    raise ToolError(f"{page.url} is {kind} ({len(page.body):,} bytes): not text; web_fetch "
                    "reads web pages and text only.")  # fmt: skip


def to_markdown(html: str) -> str:
    # only when the tool runs: httpx and markdownify stay out of every other turn
    import markdownify

    text = markdownify.markdownify(html, heading_style="ATX")  # scripts and styles dropped
    return re.sub(r"\n{3,}", "\n\n", str(text)).strip()


# ---------------------------------------------------------------------- the tool


class WebFetchArgs(Arguments):
    url: Annotated[str, Meta(min_length=1, description="An http(s) URL.")]


class WebFetch(BuiltinTool[WebFetchArgs]):
    name = "web_fetch"
    kind: ToolKind = "fetch"
    arguments = WebFetchArgs
    description = (
        "Fetch a web page (http or https; redirects followed) and return it as Markdown "
        "(HTML converted; other text as is), with its final URL and content type, cut at "
        "the configured size. The user is asked first, as for a read outside the "
        "workspace (\"always\" covers one host). Private, loopback and link-local addresses "
        "are refused unless the configuration allows them."
    )

    def describe(self, args: WebFetchArgs, ctx: ToolContext) -> CallInfo:
        # only when the tool runs: httpx and markdownify stay out of every other turn
        import httpx

        try:
            url = httpx.URL(args.url.strip())
        except httpx.InvalidURL as exc:
            raise ToolError(f"invalid URL {args.url!r}: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ToolError(f"only http and https URLs can be fetched, not {args.url!r}")
        return CallInfo(f"Fetch {url}", "read", host=url.host)

    async def run(self, args: WebFetchArgs, ctx: ToolContext) -> ToolOutput:
        settings = ctx.web
        if settings is None:
            raise ToolError("web access is off (`[web] enabled = false`)")
        page = await fetch(args.url.strip(), settings)
        text, source = await asyncio.to_thread(readable, page)
        total = len(text)
        notes: list[str] = []
        if total > settings.max_chars:
            text = text[: settings.max_chars]
            notes.append(f"[Cut at {settings.max_chars:,} of {total:,} characters.]")
        if page.cut:
            notes.append(f"[The page was longer than {settings.max_bytes:,} bytes; the rest "
                         "was not fetched.]")  # fmt: skip
        status = "" if page.status < 400 else f"\nStatus: {page.status} (an error page)"
        head = f"URL: {page.url}\nContent-Type: {page.content_type or 'unknown'}{status}\n\n"
        return ToolOutput(
            text=head + text + ("\n\n" + "\n".join(notes) if notes else ""),
            raw_output={"url": page.url, "status": page.status, "contentType": page.content_type,
                        "bytes": len(page.body), "characters": total, "converted": source,
                        "truncated": bool(notes)},
            is_error=page.status >= 400,
        )
