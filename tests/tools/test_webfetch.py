"""web_fetch against a local HTTP server: HTML to Markdown, redirects, the size caps, the
refusal of private addresses (after resolution, on every redirect), what it asks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from acp_agent.errors import ToolError
from acp_agent.tools import webfetch
from acp_agent.tools.webfetch import WebFetch, WebSettings, fetch, is_public

from ..fakes.web_server import WebServer
from .fake_client import MakeClient
from .raw import Raw

web = Raw(WebFetch())
HTML = (b"<html><head><title>Doc</title><script>track()</script><style>p{}</style></head>"
        b"<body><h1>Install</h1><p>Run <code>pip install x</code> then <a href='/next'>go on"
        b"</a>.</p><ul><li>one</li><li>two</li></ul></body></html>")  # fmt: skip
OPEN = WebSettings(allow_private=True, timeout=10.0)


@pytest.fixture
async def site() -> AsyncIterator[WebServer]:
    async with WebServer() as server:
        server.routes.update({
            "/doc": (200, {"content-type": "text/html; charset=utf-8"}, HTML),
            "/moved": (302, {"location": "/doc"}, b""),
            "/loop": (302, {"location": "/loop"}, b""),
            "/big": (200, {"content-type": "text/plain"}, b"x" * 300_000),
            "/bin": (200, {"content-type": "application/octet-stream"}, b"\x00\x01"),
            "/json": (200, {"content-type": "application/json"}, b'{"a": 1}'),
            "/gone": (404, {"content-type": "text/plain"}, b"no such page"),
            "/plain": (200, {"content-type": "text/html"}, HTML),
            "/slow": (200, {"content-type": "text/plain"}, b""),
        })  # fmt: skip
        server.plain.add("/plain")
        server.trickle.add("/slow")
        yield server


def context(fake: MakeClient, ws: Path, settings: WebSettings | None = OPEN) -> Any:
    ctx = fake().context(str(ws))
    ctx.web = settings
    return ctx


async def test_html_becomes_markdown_with_the_final_url(
    site: WebServer, fake: MakeClient, ws: Path
) -> None:
    out = await web.run({"url": f"{site.url}/moved"}, context(fake, ws))
    assert out.text == (
        f"URL: {site.url}/doc\nContent-Type: text/html; charset=utf-8\n\nDoc\n\n# Install\n\nRun "
        "`pip install x` then [go on](/next).\n\n* one\n* two")
    assert [r.path for r in site.requests] == ["/moved", "/doc"]
    assert all(r.host == f"127.0.0.1:{site.port}" for r in site.requests)
    assert out.raw_output["converted"] == "HTML converted to Markdown" and not out.is_error
    assert "gzip" in site.requests[-1].accept_encoding  # so the page came gzipped, decoded
    plain = await web.run({"url": f"{site.url}/plain"}, context(fake, ws))
    assert plain.text.split("\n\n", 1)[1] == out.text.split("\n\n", 1)[1]
    assert (await web.run({"url": f"{site.url}/json"}, context(fake, ws))).text.endswith(
        '{"a": 1}')


async def test_sizes_redirects_and_content_are_bounded(
    site: WebServer, fake: MakeClient, ws: Path
) -> None:
    small = WebSettings(allow_private=True, timeout=10.0, max_bytes=100_000, max_chars=1_000)
    out = await web.run({"url": f"{site.url}/big"}, context(fake, ws, small))
    assert out.text.endswith("x" * 1_000 + "\n\n[Cut at 1,000 of 100,000 characters.]\n"
                             "[The page was longer than 100,000 bytes; the rest was not "
                             "fetched.]")  # fmt: skip
    with pytest.raises(ToolError, match="more than 5 redirects"):
        await web.run({"url": f"{site.url}/loop"}, context(fake, ws))
    with pytest.raises(ToolError, match=r"application/octet-stream .* not text"):
        await web.run({"url": f"{site.url}/bin"}, context(fake, ws))
    slow = WebSettings(allow_private=True, timeout=0.5)  # each byte in time, never the page
    with pytest.raises(ToolError, match=r"no whole page within 0.5 s \(`\[limits\] web-timeout`\)"):
        await web.run({"url": f"{site.url}/slow"}, context(fake, ws, slow))
    missing = await web.run({"url": f"{site.url}/gone"}, context(fake, ws))
    assert missing.is_error and "Status: 404 (an error page)" in missing.text
    with pytest.raises(ToolError, match="only http and https"):
        web.describe({"url": "file:///etc/passwd"}, context(fake, ws))
    with pytest.raises(ToolError, match="web access is off"):
        await web.run({"url": f"{site.url}/doc"}, context(fake, ws, None))


async def test_private_addresses_are_refused_before_connecting(
    site: WebServer, fake: MakeClient, ws: Path
) -> None:
    closed = WebSettings(timeout=10.0)
    for url in (f"{site.url}/doc", f"http://localhost:{site.port}/doc"):
        with pytest.raises(ToolError, match="a private, loopback or link-local address"):
            await web.run({"url": url}, context(fake, ws, closed))
    assert site.requests == []  # nothing reached the server
    assert not is_public("10.1.2.3") and not is_public("169.254.169.254")
    assert not is_public("::ffff:127.0.0.1") and not is_public("100.64.0.1")
    assert is_public("93.184.216.34") and is_public("2606:4700::1111")


async def test_a_redirect_to_a_private_address_is_refused() -> None:
    """Each hop is resolved and checked; the connection goes to the checked address with
    the name as Host (a transport that records what was sent stands in for the net)."""
    names = {"docs.example": ["93.184.216.34"], "internal.example": ["10.0.0.5"]}
    sent: list[tuple[str, str]] = []

    async def resolver(host: str, port: int) -> list[str]:
        return names[host]

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append((str(request.url), request.headers["host"]))
        return httpx.Response(302, headers={"location": "http://internal.example/admin"})

    with pytest.raises(ToolError, match=r"refused: internal\.example resolves to 10\.0\.0\.5"):
        await fetch("http://docs.example/start", WebSettings(), resolver=resolver,
                    transport=httpx.MockTransport(handler))  # fmt: skip
    assert sent == [("http://93.184.216.34/start", "docs.example")]


def test_always_covers_one_host(fake: MakeClient, ws: Path) -> None:
    ctx = context(fake, ws)
    scope = web.scope({"url": "https://Docs.Python.org/3/library/os.html"}, ctx)
    assert scope is not None and (scope.kind, scope.target, scope.label) == (
        "host", "docs.python.org", "fetches from docs.python.org")
    other = web.scope({"url": "https://docs.python.org.evil.example/"}, ctx)
    assert other is not None and not scope.covers(other.key) and not other.covers(scope.key)
    assert web.describe({"url": "https://docs.python.org/x"}, ctx).access == "read"


def test_the_resolver_is_the_systems() -> None:
    assert webfetch.fetch.__kwdefaults__ is not None
    assert webfetch.fetch.__kwdefaults__["resolver"] is webfetch.resolve
