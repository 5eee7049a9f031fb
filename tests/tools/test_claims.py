"""Every tool description says only what the tool does: each claim kept in a description
(quoted here exactly) is checked against what the tool then does; claims that were false
are gone."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from acp_agent.errors import ToolError
from acp_agent.tools import CODEX, builtin_tools, usershell
from acp_agent.tools.base import ToolContext

from .fake_client import FakeClient
from .raw import Raw

Check = Callable[[Path, ToolContext], Awaitable[None]]


def tool(name: str) -> Raw:
    found = builtin_tools(style="standard").get(name) or builtin_tools(style="codex").get(name)
    assert found is not None, name
    return Raw(found)


async def grep_skips_big_files(ws: Path, ctx: ToolContext) -> None:
    (ws / "big.txt").write_bytes(b"needle\n" + b"x" * 11_000_000)
    (ws / "small.txt").write_text("needle\n")
    out = await tool("grep").run({"pattern": "needle", "output_mode": "files_with_matches"}, ctx)
    assert out.text == "small.txt"


async def grep_searches_hidden_files(ws: Path, ctx: ToolContext) -> None:
    (ws / ".github").mkdir()
    (ws / ".github" / "ci.yml").write_text("needle\n")
    assert (await tool("grep").run({"pattern": "needle"}, ctx)).text == ".github/ci.yml:1: needle"


async def grep_pages(ws: Path, ctx: ToolContext) -> None:
    (ws / "many.txt").write_text("needle " + "w" * 300 + "\n" * 1 + "needle\n" * 250)
    out = await tool("grep").run({"pattern": "needle"}, ctx)
    lines = out.text.splitlines()
    assert len(lines) == 201 and lines[0].endswith("w… [+57 chars]") and "offset=200" in lines[-1]


async def glob_newest_first(ws: Path, ctx: ToolContext) -> None:
    for age, name in enumerate(["new.py", "mid.py", "old.py"]):
        (ws / name).write_text("")
        os.utime(ws / name, (1_700_000_000 - age, 1_700_000_000 - age))
    out = await tool("glob").run({"pattern": "*.py"}, ctx)
    assert out.text.splitlines() == ["new.py", "mid.py", "old.py"]


async def command_in_the_named_shell_with_empty_stdin(ws: Path, ctx: ToolContext) -> None:
    out = await tool("run_command").run({"command": "cat; echo $0; [[ 1 ]] && echo ok"}, ctx)
    assert out.text == f"{usershell.user_shell().path}\nok\n\nExit code: 0"


async def command_times_out_as_an_error(ws: Path, ctx: ToolContext) -> None:
    out = await tool("run_command").run({"command": "sleep 5", "timeout_ms": 200}, ctx)
    assert out.is_error and "Timed out after 0.2 s" in out.text


async def list_sorted_dirs_marked(ws: Path, ctx: ToolContext) -> None:
    (ws / "b").mkdir()
    (ws / "a.txt").write_text("")
    out = await tool("list_directory").run({"path": "."}, ctx)
    assert out.text.splitlines() == ["README.md", "a.txt", "b/", "src/"]


async def write_creates_parents_utf8(ws: Path, ctx: ToolContext) -> None:
    await tool("write_file").run({"path": "new/dir/f.txt", "content": "é\n"}, ctx)
    assert (ws / "new/dir/f.txt").read_bytes() == "é\n".encode()


async def edit_keeps_encoding_and_endings(ws: Path, ctx: ToolContext) -> None:
    (ws / "l1.txt").write_bytes("caf\xe9\r\nx\r\n".encode("latin-1"))
    await tool("edit_file").run({"path": "l1.txt", "old_string": "x", "new_string": "y"}, ctx)
    assert (ws / "l1.txt").read_bytes() == "caf\xe9\r\ny\r\n".encode("latin-1")


async def move_refuses_to_replace(ws: Path, ctx: ToolContext) -> None:
    (ws / "a").write_text("a")
    (ws / "b").write_text("b")
    with pytest.raises(ToolError, match="exists; set overwrite"):
        await tool("move_file").run({"source": "a", "destination": "b"}, ctx)


async def patch_changes_nothing_on_a_bad_hunk(ws: Path, ctx: ToolContext) -> None:
    patch = ("*** Begin Patch\n*** Add File: n.txt\n+n\n*** Update File: README.md\n@@\n"
             "-nope\n+x\n*** End Patch")  # fmt: skip
    raw = tool("apply_patch")
    with pytest.raises(ToolError, match=r"README\.md, hunk 1: these lines"):
        args = raw.tool.parse({"input": patch})
        await raw.tool.prepare(args, ctx)
    assert not (ws / "n.txt").exists()


async def fetch_refuses_private_addresses(ws: Path, ctx: ToolContext) -> None:
    from acp_agent.tools.webfetch import WebSettings

    ctx.web = WebSettings()
    with pytest.raises(ToolError, match="private, loopback or link-local"):
        await tool("web_fetch").run({"url": "http://127.0.0.1:9/"}, ctx)


CLAIMS: list[tuple[str, str, Check]] = [
    ("grep", "files over 10 MB", grep_skips_big_files),
    ("grep", "hidden files are searched", grep_searches_hidden_files),
    ("grep", "at most `head_limit` lines (default 200), each cut at 250 characters; the last "
             "line says how many more there are and the `offset` of the next page", grep_pages),
    ("glob", "Newest first (last modified)", glob_newest_first),
    ("run_command", "(not interactive: stdin is empty;",
     command_in_the_named_shell_with_empty_stdin),
    ("run_command", "a command that times out or is killed is an error",
     command_times_out_as_an_error),
    ("list_directory", "sorted (at most 500); directories end with `/`", list_sorted_dirs_marked),
    ("write_file", "written as UTF-8 (parent directories are created)", write_creates_parents_utf8),
    ("edit_file", "The file's encoding and line endings are kept", edit_keeps_encoding_and_endings),
    ("move_file", "Refuses to replace an existing path unless overwrite is true",
     move_refuses_to_replace),
    ("apply_patch", "if a hunk does not match, nothing is changed and the error names the file "
                    "and the hunk", patch_changes_nothing_on_a_bad_hunk),
    ("web_fetch", "Private, loopback and link-local addresses are refused",
     fetch_refuses_private_addresses),
]  # fmt: skip


@pytest.mark.parametrize(("name", "claim", "check"), CLAIMS, ids=[f"{c[0]}:{c[1][:30]}"
                                                                   for c in CLAIMS])
async def test_a_claim_holds(name: str, claim: str, check: Check, ws: Path) -> None:
    description = " ".join(tool(name).spec.description.split())
    assert claim in description
    client = FakeClient()
    try:
        await check(ws, client.context(str(ws)))
    finally:
        await client.close()


def test_the_false_claims_are_gone() -> None:
    """What the descriptions used to say and the tools did not do."""
    texts: list[Any] = [t.spec.description for t in builtin_tools().tools()]
    texts += [t.spec.description for t in builtin_tools(style="codex").tools()]
    joined = " ".join(texts)
    for gone in ("Skips .git, node_modules and .venv", "`sh -c`", "Python regular expression",
                 "30 KB", "Output is capped at"):
        assert gone not in joined, gone
    assert "patch.ApplyPatch" in CODEX
