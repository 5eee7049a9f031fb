"""list_directory / glob / grep: local walks, never the editor's fs methods."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from acp_agent.errors import ToolError
from acp_agent.tools import budget, search
from acp_agent.tools._common import glob_regex, split_glob
from acp_agent.tools.search import Glob, Grep, ListDirectory

from .fake_client import MakeClient, wire
from .raw import Raw

ls, glob, grep = Raw(ListDirectory()), Raw(Glob()), Raw(Grep())


@pytest.fixture
def tree(ws: Path) -> Path:
    for rel in ["src/pkg/mod.py", "src/pkg/data.txt", "tests/test_app.py", "setup.py",
                ".git/config.py", "node_modules/lib/index.py", ".venv/lib/site.py",
                "src/pkg/deep/er/x.py"]:
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# {rel}\nTODO fix {rel}\n")
    return ws


# ---------------------------------------------------------------------- list_directory


async def test_list_directory(tree: Path, fake: MakeClient) -> None:
    client = fake(read=True, write=True, terminal=True)
    ctx = client.context(str(tree))
    out = await ls.run({"path": "."}, ctx)
    assert out.text.splitlines() == [".git/", ".venv/", "README.md", "node_modules/",
                                     "setup.py", "src/", "tests/"]
    sub = await ls.run({"path": "src/pkg"}, ctx)
    assert sub.text.splitlines() == ["data.txt", "deep/", "mod.py"]
    assert client.calls == []
    assert ls.title({"path": "src/pkg"}, ctx) == "List src/pkg"
    assert ls.kind == "read"
    assert ls.access({"path": "src"}, ctx) == ("read", [str(tree / "src")])
    with pytest.raises(ToolError, match="not a directory"):
        await ls.run({"path": "setup.py"}, ctx)
    with pytest.raises(ToolError, match="not found"):
        await ls.run({"path": "nope"}, ctx)
    (tree / "empty").mkdir()
    assert (await ls.run({"path": "empty"}, ctx)).text == "(empty directory)"


async def test_list_directory_bounded(
    ws: Path, fake: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "LIST_MAX_ENTRIES", 5)
    for i in range(12):
        (ws / f"f{i:02d}").write_text("")
    out = await ls.run({"path": "."}, fake().context(str(ws)))
    lines = out.text.splitlines()
    assert lines[:5] == ["README.md", "f00", "f01", "f02", "f03"]
    assert lines[-1] == "[Showing 5 of 14 entries; use glob to find specific names.]"
    assert out.raw_output == {"path": str(ws), "entries": 14, "shown": 5}


# ---------------------------------------------------------------------- glob


async def test_glob_recursive_skips_vendor_dirs(tree: Path, fake: MakeClient) -> None:
    client = fake(read=True, terminal=True)
    ctx = client.context(str(tree))
    out = await glob.run({"pattern": "**/*.py"}, ctx)
    assert out.text.splitlines() == ["setup.py", "src/app.py", "src/pkg/deep/er/x.py",
                                     "src/pkg/mod.py", "tests/test_app.py"]
    top = await glob.run({"pattern": "*.py"}, ctx)
    assert top.text == "setup.py"
    braces = await glob.run({"pattern": "src/pkg/*.{py,txt}"}, ctx)
    assert braces.text.splitlines() == ["src/pkg/data.txt", "src/pkg/mod.py"]
    in_path = await glob.run({"pattern": "**/x.py", "path": "src"}, ctx)
    assert in_path.text == "src/pkg/deep/er/x.py"
    dirs = await glob.run({"pattern": "src/*"}, ctx)
    assert dirs.text.splitlines() == ["src/app.py", "src/pkg/"]
    none = await glob.run({"pattern": "**/*.rs"}, ctx)
    assert none.text.startswith("No files match")
    assert client.calls == []
    assert glob.kind == "search"
    assert glob.title({"pattern": "**/*.py", "path": "src"}, ctx) == "Find `**/*.py` in src"
    assert glob.access({"pattern": "src/**/*.py"}, ctx) == ("read", [str(tree / "src")])
    assert glob.access({"pattern": "../**"}, ctx) == ("read", [str(tree.parent)])


async def test_glob_bounded_and_errors(
    ws: Path, fake: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "GLOB_MAX_PATHS", 3)
    for i in range(10):
        (ws / f"g{i}.txt").write_text("")
    ctx = fake().context(str(ws))
    out = await glob.run({"pattern": "*.txt"}, ctx)
    assert out.text.splitlines() == [
        "g0.txt", "g1.txt", "g2.txt",
        "[Showing 3 of 10 paths; narrow the pattern or `path`.]"]
    with pytest.raises(ToolError, match="not found"):
        await glob.run({"pattern": "*", "path": "nope"}, ctx)


def test_glob_regex() -> None:
    r = glob_regex("**/*.py")
    assert r.match("a.py") and r.match("a/b/c.py") and not r.match("a/b/c.pyc")
    r = glob_regex("src/**")
    assert r.match("src/a") and r.match("src/a/b") and not r.match("srcx/a")
    r = glob_regex("a/**/b/[!x]?.t*")
    assert r.match("a/b/yz.txt") and r.match("a/1/2/b/yz.t") and not r.match("a/b/xz.txt")
    assert not glob_regex("*.py").match("dir/a.py")
    assert split_glob("/w", "src/**/*.py") == ("/w/src", "**/*.py")
    assert split_glob("/w", "/abs/dir/*.py") == ("/abs/dir", "*.py")


# ---------------------------------------------------------------------- grep


async def test_grep_format_locations_no_client(tree: Path, fake: MakeClient) -> None:
    client = fake(read=True, write=True, terminal=True)
    ctx = client.context(str(tree))
    out = await grep.run({"pattern": r"TODO fix src/pkg/\w+\.py"}, ctx)
    assert out.text == "src/pkg/mod.py:2: TODO fix src/pkg/mod.py"
    assert wire(out.locations) == [{"path": str(tree / "src/pkg/mod.py"), "line": 2}]
    everything = await grep.run({"pattern": "TODO"}, ctx)
    paths = [line.split(":")[0] for line in everything.text.splitlines()]
    assert not any(p.startswith((".git", "node_modules", ".venv")) for p in paths)
    assert "setup.py" in paths and "src/pkg/data.txt" in paths
    only_py = await grep.run({"pattern": "TODO", "glob": "*.py", "path": "src"}, ctx)
    assert {line.split(":")[0] for line in only_py.text.splitlines()} == {
        "src/pkg/mod.py", "src/pkg/deep/er/x.py"}
    by_path = await grep.run({"pattern": "TODO", "glob": "pkg/*.txt", "path": "src"}, ctx)
    assert by_path.text == "src/pkg/data.txt:2: TODO fix src/pkg/data.txt"
    one_file = await grep.run({"pattern": "^#", "path": "setup.py"}, ctx)
    assert one_file.text == "setup.py:1: # setup.py"
    assert (await grep.run({"pattern": "zzz"}, ctx)).text.startswith("No matches")
    assert client.calls == []
    assert grep.kind == "search"
    assert grep.title({"pattern": "TODO", "path": "src", "glob": "*.py"}, ctx) == (
        "Search `TODO` in src (*.py)")


async def test_grep_errors_binary_and_bounds(ws: Path, fake: MakeClient) -> None:
    ctx = fake().context(str(ws))
    with pytest.raises(ToolError, match="invalid regular expression"):
        await grep.run({"pattern": "("}, ctx)
    with pytest.raises(ToolError, match="not found"):
        await grep.run({"pattern": "x", "path": "nope"}, ctx)
    (ws / "bin.dat").write_bytes(b"needle\x00\x01")
    (ws / "many.txt").write_text("".join(f"needle {i} " + "w" * 500 + "\n" for i in range(300)))
    out = await grep.run({"pattern": "needle"}, ctx)
    lines = out.text.splitlines()
    assert not any(line.startswith("bin.dat") for line in lines)
    assert len(out.text.encode()) <= budget.SEARCH_MAX_BYTES + 200
    shown = out.raw_output["shown"]
    assert 0 < shown < budget.GREP_MAX_MATCHES and len(lines) == shown + 1  # the byte cap
    assert lines[-1] == (f"[Showing {shown} of 300 matches in 1 file; narrow with `glob` or "
                         "`path`, or a more specific pattern.]")
    assert lines[0].startswith("many.txt:1: needle 0 ")
    assert lines[0].endswith("w… [+259 chars]")  # 509 characters cut at 250
    assert len(out.locations or []) == budget.GREP_MAX_LOCATIONS
    assert wire(out.locations)[19] == {"path": str(ws / "many.txt"), "line": 20}
    assert out.raw_output["truncated"] is True


async def test_search_access_outside_roots(ws: Path, fake: MakeClient, tmp_path: Path) -> None:
    outside = tmp_path / "out"
    outside.mkdir()
    os.symlink(outside, ws / "escape")
    ctx = fake().context(str(ws))
    cases: list[tuple[Raw, dict[str, Any]]] = [
        (ls, {"path": "escape"}),
        (glob, {"pattern": "*", "path": "escape"}),
        (grep, {"pattern": "x", "path": "escape"}),
        (grep, {"pattern": "x", "path": str(outside)}),
        (ls, {"path": ".."}),
    ]
    for tool, args in cases:
        _, paths = tool.access(args, ctx)
        assert paths and not all(ctx.inside_roots(p) for p in paths), (tool.spec.name, args)
    _, paths = grep.access({"pattern": "x"}, ctx)
    assert paths == [str(ws)] and ctx.inside_roots(paths[0])


# ---------------------------------------------------------------------- totals, limits


async def test_grep_reports_totals(ws: Path, fake: MakeClient,
                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(search, "GREP_MAX_MATCHES", 5)
    for name in ("a.txt", "b.txt", "c.txt"):
        (ws / name).write_text("".join(f"hit {i}\nmiss\n" for i in range(100)))
    out = await grep.run({"pattern": "hit"}, fake().context(str(ws)))
    assert out.text.split("\n") == [
        "a.txt:1: hit 0", "a.txt:3: hit 1", "a.txt:5: hit 2", "a.txt:7: hit 3", "a.txt:9: hit 4",
        "[Showing 5 of 300 matches in 3 files; narrow with `glob` or `path`, or a more specific "
        "pattern.]"]
    assert out.raw_output == {"matches": 300, "files": 3, "searched": 5, "shown": 5,
                              "truncated": True}  # README.md and src/app.py too
    monkeypatch.setattr(search, "GREP_COUNT_LIMIT", 150)
    capped = await grep.run({"pattern": "hit"}, fake().context(str(ws)))
    assert capped.text.split("\n")[-1] == (
        "[Showing 5 of 150+ matches in 2+ files; narrow with `glob` or `path`, or a more "
        "specific pattern.]")


async def test_walk_limit_is_reported(tree: Path, fake: MakeClient,
                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(search, "MAX_WALK_ENTRIES", 4)
    ctx = fake().context(str(tree))
    marker = ("[The search stopped after visiting 4 entries, so results are incomplete; "
              "narrow `path`.]")
    found = await glob.run({"pattern": "**/*.py"}, ctx)
    assert found.text.split("\n")[-1] == marker and found.raw_output["truncated"] is True
    hits = await grep.run({"pattern": "TODO"}, ctx)
    assert hits.text.split("\n")[-1] == marker


async def test_grep_decodes_as_read_file_does(ws: Path, fake: MakeClient) -> None:
    (ws / "l1.txt").write_bytes("menu\ncafé crème\n".encode("latin-1"))
    (ws / "crlf.txt").write_bytes(b"one\r\ncaf\xc3\xa9\rmid\r\n")
    out = await grep.run({"pattern": "caf"}, fake().context(str(ws)))
    # line numbers count \n only, as read_file and edit_file do
    assert out.text.split("\n") == ["crlf.txt:2: café\rmid", "l1.txt:2: café crème"]


async def test_listing_byte_cap(ws: Path, fake: MakeClient) -> None:
    for i in range(400):
        (ws / (f"{i:03d}" + "n" * 90)).write_text("")
    out = await ls.run({"path": "."}, fake().context(str(ws)))
    assert len(out.text.encode()) <= budget.SEARCH_MAX_BYTES + 100
    shown = out.raw_output["shown"]
    assert shown < 400 and out.text.split("\n")[-1] == (
        f"[Showing {shown} of 402 entries; use glob to find specific names.]")
