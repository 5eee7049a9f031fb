"""A small MCP server written with the official SDK (``MCPServer``), for the hub tests.

``python demo.py [--name NAME] [--pid-file PATH] [--wait-for PATH]`` serves it over
stdio; the HTTP and SSE tests mount :func:`build_server`'s apps in-process on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import base64
import os
import time
from pathlib import Path

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

#: A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def build_server(name: str = "demo") -> MCPServer:
    server = MCPServer(name, log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True),
                 description="Echo the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> str:
        return str(a + b)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True), description="Delete a thing.")
    def delete_thing(thing: str) -> str:
        return f"deleted {thing}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                             open_world_hint=False))
    def remember(fact: str) -> str:
        return f"remembered {fact}"

    @server.tool(description="A picture and a caption.", structured_output=False)
    def picture() -> list[object]:
        return [TextContent(text="a tiny picture"), Image(data=PNG, format="png")]

    @server.tool(description="Resources: one embedded, one linked.", structured_output=False)
    def resources() -> list[object]:
        return [
            EmbeddedResource(resource=TextResourceContents(
                uri="file:///notes.txt", mime_type="text/plain", text="note body")),
            ResourceLink(name="spec", uri="https://example.com/spec.md",
                         description="The spec", mime_type="text/markdown"),
        ]

    @server.tool(description="Always fails.")
    def fail() -> str:
        raise ToolError("it broke")

    @server.tool(description="Sleep, then answer (creating the file `started` first, if given).")
    async def slow(seconds: float, started: str = "") -> str:
        if started:
            Path(started).touch()
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(description="Exit the server process abruptly.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="The server's process id.")
    def pid() -> str:
        return str(os.getpid())

    @server.tool(description="An environment variable (empty if unset).")
    def getenv(name: str) -> str:
        return os.environ.get(name, "")

    @server.tool(description="The server's working directory.")
    def cwd() -> str:
        return os.getcwd()

    @server.prompt(description="Greet someone.")
    def greet(name: str) -> str:
        return f"Please greet {name} warmly."

    @server.prompt(description="Review code.")
    def review(code: str, language: str = "python") -> str:
        return f"Review this {language} code:\n{code}"

    @server.prompt(title="Standup")
    def standup() -> list[dict[str, object]]:
        return [
            {"role": "user", "content": "What did I do yesterday?"},
            {"role": "assistant", "content": "You fixed the parser."},
        ]

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="demo")
    parser.add_argument("--pid-file")
    parser.add_argument("--wait-for", metavar="PATH", help="serve once this file exists")
    args = parser.parse_args()
    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write(str(os.getpid()))
    while args.wait_for and not os.path.exists(args.wait_for):
        time.sleep(0.01)
    build_server(args.name).run("stdio")


if __name__ == "__main__":
    main()
