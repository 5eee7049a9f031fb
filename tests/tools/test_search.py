"""list_directory / glob / grep: local walks, never the editor's fs methods."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
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


def git_repo(path: Path) -> Path:
    """``path`` made a git repository (as ``git init`` leaves it: ``.git/info/exclude``)."""
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=home_env(path.parent))
    return path


def home_env(where: Path) -> dict[str, str]:
    """Commands' environment with a home of the test's own (no global git excludes of the
    machine's user leak in): ``where/home``."""
    home = where / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


def context(client: Any, cwd: Path) -> Any:
    ctx = client.context(str(cwd))
    ctx.env = home_env(cwd.parent)
    return ctx


def dated(root: Path, *rels: str) -> None:
    """Give ``rels`` (files under ``root``) modification times, the first the newest."""
    for age, rel in enumerate(rels):
        os.utime(root / rel, (1_700_000_000 - age * 60,) * 2)


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


async def test_glob_recursive_skips_vcs_dirs_newest_first(tree: Path, fake: MakeClient) -> None:
    client = fake(read=True, terminal=True)
    ctx = context(client, tree)
    dated(tree, "src/pkg/mod.py", "setup.py", "src/pkg/deep/er/x.py", "tests/test_app.py",
          "src/app.py", "node_modules/lib/index.py", ".venv/lib/site.py", "src/pkg/data.txt")
    out = await glob.run({"pattern": "**/*.py"}, ctx)
    # no ignore file here: only the version-control directory is skipped
    assert out.text.splitlines() == ["src/pkg/mod.py", "setup.py", "src/pkg/deep/er/x.py",
                                     "tests/test_app.py", "src/app.py",
                                     "node_modules/lib/index.py", ".venv/lib/site.py"]
    (tree / ".gitignore").write_text("node_modules/\n.venv/\n")
    git_repo(tree)
    ignored = await glob.run({"pattern": "**/*.py"}, ctx)
    assert ignored.text.splitlines() == out.text.splitlines()[:5]
    top = await glob.run({"pattern": "*.py"}, ctx)
    assert top.text == "setup.py"
    braces = await glob.run({"pattern": "src/pkg/*.{py,txt}"}, ctx)
    assert braces.text.splitlines() == ["src/pkg/mod.py", "src/pkg/data.txt"]
    in_path = await glob.run({"pattern": "**/x.py", "path": "src"}, ctx)
    assert in_path.text == "src/pkg/deep/er/x.py"
    dirs = await glob.run({"pattern": "src/*"}, ctx)
    assert sorted(dirs.text.splitlines()) == ["src/app.py", "src/pkg/"]
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
    dated(ws, *(f"g{i}.txt" for i in range(10)))
    ctx = context(fake(), ws)
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
    ctx = context(client, tree)
    out = await grep.run({"pattern": r"TODO fix src/pkg/\w+\.py"}, ctx)
    assert out.text == "src/pkg/mod.py:2: TODO fix src/pkg/mod.py"
    assert wire(out.locations) == [{"path": str(tree / "src/pkg/mod.py"), "line": 2}]
    everything = await grep.run({"pattern": "TODO"}, ctx)
    paths = [line.split(":")[0] for line in everything.text.splitlines()]
    assert paths == sorted(paths)  # in path order
    assert not any(p.startswith(".git/") for p in paths)
    assert ".venv/lib/site.py" in paths and "setup.py" in paths and "src/pkg/data.txt" in paths
    only_py = await grep.run({"pattern": "TODO", "glob": "*.py", "path": "src"}, ctx)
    assert {line.split(":")[0] for line in only_py.text.splitlines()} == {
        "src/pkg/mod.py", "src/pkg/deep/er/x.py"}
    by_path = await grep.run({"pattern": "TODO", "glob": "pkg/*.txt", "path": "src"}, ctx)
    assert by_path.text == "src/pkg/data.txt:2: TODO fix src/pkg/data.txt"
    one_file = await grep.run({"pattern": "^#", "path": "setup.py"}, ctx)
    assert one_file.text == "setup.py:1: # setup.py"
    assert (await grep.run({"pattern": "zzz"}, ctx)).text == "No matches."
    assert client.calls == []
    assert grep.kind == "search"
    assert grep.title({"pattern": "TODO", "path": "src", "glob": "*.py"}, ctx) == (
        "Search `TODO` in src (*.py)")


async def test_grep_errors_binary_and_bounds(ws: Path, fake: MakeClient) -> None:
    ctx = context(fake(), ws)
    with pytest.raises(ToolError, match="invalid regular expression"):
        await grep.run({"pattern": "("}, ctx)
    with pytest.raises(ToolError, match="not found"):
        await grep.run({"pattern": "x", "path": "nope"}, ctx)
    (ws / "bin.dat").write_bytes(b"needle\x00\x01")
    (ws / "many.txt").write_text("".join(f"needle {i} " + "w" * 500 + "\n" for i in range(300)))
    (ws / "huge.txt").write_text("needle " + "h" * 100_000 + "\n")
    out = await grep.run({"pattern": "needle"}, ctx)
    lines = out.text.splitlines()
    assert not any(line.startswith("bin.dat") for line in lines)
    assert lines[0].startswith("huge.txt:1: needle hhh") and lines[0].endswith(
        "… [long line cut]") and len(lines[0]) < 300
    assert len(out.text.encode()) <= budget.SEARCH_MAX_BYTES + 300
    shown = out.raw_output["shown"]
    assert 0 < shown < budget.GREP_MAX_MATCHES and len(lines) == shown + 1  # the byte cap
    assert lines[-1] == (f"[Showing lines 1-{shown} of 301 (301 matching lines in 2 files). "
                         f"Next page: offset={shown}. Or narrow with `glob`, `type`, `path` or "
                         "a more specific pattern.]")
    assert lines[1].startswith("many.txt:1: needle 0 ")
    assert lines[1].endswith("w… [+259 chars]")  # 509 characters cut at 250
    assert len(out.locations or []) == budget.GREP_MAX_LOCATIONS
    assert wire(out.locations)[19] == {"path": str(ws / "many.txt"), "line": 19}
    assert out.raw_output["truncated"] is True


async def test_search_access_outside_roots(ws: Path, fake: MakeClient, tmp_path: Path) -> None:
    outside = tmp_path / "out"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle\n")
    os.symlink(outside, ws / "escape")
    os.symlink(outside / "secret.txt", ws / "link.txt")
    ctx = context(fake(), ws)
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
    # walking the workspace, no link is followed (out of the roots or not)
    assert (await grep.run({"pattern": "needle"}, ctx)).text == "No matches."
    assert "escape" not in (await glob.run({"pattern": "**"}, ctx)).text


# ---------------------------------------------------------------------- totals, limits


async def test_grep_reports_totals(ws: Path, fake: MakeClient,
                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    for name in ("a.txt", "b.txt", "c.txt"):
        (ws / name).write_text("".join(f"hit {i}\nmiss\n" for i in range(100)))
    out = await grep.run({"pattern": "hit", "head_limit": 5}, context(fake(), ws))
    assert out.text.split("\n") == [
        "a.txt:1: hit 0", "a.txt:3: hit 1", "a.txt:5: hit 2", "a.txt:7: hit 3", "a.txt:9: hit 4",
        "[Showing lines 1-5 of 300 (300 matching lines in 3 files). Next page: offset=5. Or "
        "narrow with `glob`, `type`, `path` or a more specific pattern.]"]
    assert out.raw_output == {"mode": "content", "matches": 300, "files": 3, "lines": 300,
                              "offset": 0, "shown": 5, "truncated": True}
    monkeypatch.setattr(search, "GREP_COUNT_LIMIT", 150)
    capped = await grep.run({"pattern": "hit", "head_limit": 5}, context(fake(), ws))
    assert capped.text.split("\n")[-1] == (
        "[Showing lines 1-5 of 150+ (150+ matching lines in 2+ files). Next page: offset=5. "
        "Or narrow with `glob`, `type`, `path` or a more specific pattern.]")


async def test_walk_limit_is_reported(tree: Path, fake: MakeClient,
                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(search, "MAX_WALK_ENTRIES", 4)
    ctx = context(fake(), tree)
    marker = ("[The search stopped after visiting 4 entries, so results are incomplete; "
              "narrow `path`.]")
    found = await glob.run({"pattern": "**/*.py"}, ctx)
    assert found.text.split("\n")[-1] == marker and found.raw_output["truncated"] is True


async def test_grep_decodes_as_read_file_does(ws: Path, fake: MakeClient) -> None:
    (ws / "l1.txt").write_bytes("menu\ncafé crème\n".encode("latin-1"))
    (ws / "crlf.txt").write_bytes(b"one\r\ncaf\xc3\xa9\rmid\r\n")
    out = await grep.run({"pattern": "caf"}, context(fake(), ws))
    # line numbers count \n only, as read_file and edit_file do
    assert out.text.split("\n") == ["crlf.txt:2: café\rmid", "l1.txt:2: café crème"]


# ---------------------------------------------------------------------- ignore rules


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


async def _found(root: Path, fake: MakeClient) -> list[str]:
    """The files grep finds `needle` in (and glob lists them too: the same set)."""
    ctx = context(fake(), root)
    hits = await grep.run({"pattern": "needle", "output_mode": "files_with_matches"}, ctx)
    listed = await glob.run({"pattern": "**/*.txt"}, ctx)
    found = sorted(hits.text.splitlines()) if hits.text != "No matches." else []
    assert sorted(listed.text.splitlines()) == found or not found
    return found


async def test_git_repository_ignore_rules(ws: Path, fake: MakeClient) -> None:
    """.gitignore at every level (negations, directory-only patterns), .git/info/exclude,
    the global excludes file and .ignore are honoured; version-control directories are
    never searched; hidden files are."""
    git_repo(ws)
    home = ws.parent / "home"
    _write(home, {".config/git/ignore": "*.globally-ignored.txt\n"})
    _write(ws, {
        ".gitignore": "venv/\nbuild/\n*.log.txt\n!keep.log.txt\n",
        "src/a.txt": "needle\n", "src/.hidden.txt": "needle\n",
        "venv/lib/site.txt": "needle\n", "build/out.txt": "needle\n",
        "x.log.txt": "needle\n", "keep.log.txt": "needle\n",
        "sub/.gitignore": "local.txt\n!../src\n", "sub/local.txt": "needle\n",
        "sub/deeper/local.txt": "needle\n", "sub/kept.txt": "needle\n",
        "one.globally-ignored.txt": "needle\n",
        "excluded.txt": "needle\n", ".ignore": "only-by-dot-ignore.txt\n",
        "only-by-dot-ignore.txt": "needle\n",
        ".git/found.txt": "needle\n",
    })
    (ws / ".git/info/exclude").write_text("excluded.txt\n")
    assert await _found(ws, fake) == ["keep.log.txt", "src/.hidden.txt", "src/a.txt",
                                      "sub/kept.txt"]
    # a directory named explicitly is searched though it is ignored
    ctx = context(fake(), ws)
    inside = await grep.run({"pattern": "needle", "path": "venv"}, ctx)
    assert inside.text == "venv/lib/site.txt:1: needle"


async def test_plain_directory_ignore_rules(ws: Path, fake: MakeClient) -> None:
    """Outside a git repository .gitignore means nothing (as for git and ripgrep) but
    .ignore still applies, with negations and nesting."""
    _write(ws, {".gitignore": "venv/\n", "venv/site.txt": "needle\n", "a.txt": "needle\n",
                ".ignore": "gen/\n*.tmp.txt\n", "gen/x.txt": "needle\n", "b.tmp.txt": "needle\n",
                "deep/.ignore": "!*.tmp.txt\n", "deep/c.tmp.txt": "needle\n"})
    assert await _found(ws, fake) == ["a.txt", "deep/c.tmp.txt", "venv/site.txt"]


async def test_grep_modes(ws: Path, fake: MakeClient) -> None:
    """content (with context before/after), files_with_matches, count, case folding,
    a file type, a glob, multiline, and paging with head_limit and offset."""
    (ws / "src/app.py").unlink()
    (ws / "README.md").unlink()
    _write(ws, {"m.py": "a\nNeedle one\nb\nc\nd\ne\nneedle two\nf\n",
                "n.js": "needle js\n", "z.py": "x = 1\nneedle z\n"})
    ctx = context(fake(), ws)
    content = await grep.run({"pattern": "needle", "context": 1, "type": "py"}, ctx)
    assert content.text.splitlines() == [
        "m.py-6- e", "m.py:7: needle two", "m.py-8- f", "--", "z.py-1- x = 1", "z.py:2: needle z"]
    before = await grep.run({"pattern": "two", "before": 2, "glob": "*.py"}, ctx)
    assert before.text.splitlines() == ["m.py-5- d", "m.py-6- e", "m.py:7: needle two"]
    after = await grep.run({"pattern": "one", "after": 1, "case_insensitive": True}, ctx)
    assert after.text.splitlines() == ["m.py:2: Needle one", "m.py-3- b"]
    files = await grep.run({"pattern": "needle", "output_mode": "files_with_matches",
                            "case_insensitive": True}, ctx)
    assert files.text.splitlines() == ["m.py", "n.js", "z.py"]
    counts = await grep.run({"pattern": "needle", "output_mode": "count", "glob": "!*.js"}, ctx)
    assert counts.text.splitlines() == ["m.py:1", "z.py:1"]
    spans = await grep.run({"pattern": r"one\nb", "multiline": True}, ctx)
    assert spans.text.splitlines() == ["m.py:2: Needle one", "m.py:3: b"]
    with pytest.raises(ToolError, match="multiline: true"):
        await grep.run({"pattern": r"one\nb"}, ctx)
    code = {"pattern": "e", "glob": "*.{py,js}"}
    page = await grep.run({**code, "head_limit": 2}, ctx)
    assert page.text.splitlines() == [
        "m.py:2: Needle one", "m.py:6: e",
        "[Showing lines 1-2 of 5 (5 matching lines in 3 files). Next page: offset=2. Or "
        "narrow with `glob`, `type`, `path` or a more specific pattern.]"]
    last = await grep.run({**code, "head_limit": 2, "offset": 3}, ctx)
    assert last.text.splitlines() == [
        "n.js:1: needle js", "z.py:2: needle z"]
    assert (await grep.run({**code, "offset": 40}, ctx)).text.startswith(
        "(offset 40 is past the last of 5 lines)")
    with pytest.raises(ToolError, match="unrecognized file type"):
        await grep.run({"pattern": "x", "type": "nosuchtype"}, ctx)
    assert grep.title({"pattern": "x", "glob": "*.py", "type": "py"}, ctx) == (
        "Search `x` (*.py, type py)")


async def test_rg_is_found_or_missing_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    """rg comes with the package (beside the interpreter); a missing one says how to fix."""
    from acp_agent.tools import _rg

    assert Path(_rg.rg_binary()).parent == Path(sys.executable).parent
    _rg.rg_binary.cache_clear()
    monkeypatch.setattr(sysconfig, "get_path", lambda *a: "/nonexistent")
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        with pytest.raises(ToolError, match=r"need ripgrep.*Reinstall acp-agent"):
            _rg.rg_binary()
    finally:
        _rg.rg_binary.cache_clear()


async def test_listing_byte_cap(ws: Path, fake: MakeClient) -> None:
    for i in range(400):
        (ws / (f"{i:03d}" + "n" * 90)).write_text("")
    out = await ls.run({"path": "."}, fake().context(str(ws)))
    assert len(out.text.encode()) <= budget.SEARCH_MAX_BYTES + 100
    shown = out.raw_output["shown"]
    assert shown < 400 and out.text.split("\n")[-1] == (
        f"[Showing {shown} of 402 entries; use glob to find specific names.]")
