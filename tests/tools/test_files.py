"""read_file / write_file / edit_file: local and through the editor's fs methods."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_agent.errors import RemoteError, ToolError
from acp_agent.tools.files import EditFile, ReadFile, WriteFile

from ..schema_check import validate_def
from .fake_client import MakeClient, wire
from .raw import Raw

read, write, edit = Raw(ReadFile()), Raw(WriteFile()), Raw(EditFile())


# ---------------------------------------------------------------------- read_file


async def test_read_local_numbered_no_client_calls(ws: Path, fake: MakeClient) -> None:
    client = fake()
    ctx = client.context(str(ws))
    out = await read.run({"path": "src/app.py"}, ctx)
    assert out.text.splitlines()[0] == "     1\timport os"
    assert "     5\t    return os.getcwd()" in out.text
    assert client.calls == []
    abs_path = str(ws / "src" / "app.py")
    assert wire(out.locations) == [{"path": abs_path, "line": 1}]
    assert read.title({"path": "src/app.py"}, ctx) == "Read src/app.py"
    assert read.title({"path": "src/app.py", "offset": 3, "limit": 2}, ctx) == (
        "Read src/app.py (lines 3-4)")
    assert read.kind == "read"
    assert read.access({"path": "src/app.py"}, ctx) == ("read", [abs_path])


async def test_read_offset_limit_local(ws: Path, fake: MakeClient) -> None:
    (ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    ctx = fake().context(str(ws))
    out = await read.run({"path": "n.txt", "offset": 4, "limit": 3}, ctx)
    assert out.text.splitlines()[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "offset=7" in out.text  # the file continues
    assert wire(out.locations) == [{"path": str(ws / "n.txt"), "line": 4}]
    tail = await read.run({"path": "n.txt", "offset": 9}, ctx)
    assert tail.text == "     9\tline 9\n    10\tline 10"
    past = await read.run({"path": "n.txt", "offset": 50}, ctx)
    assert "past the end" in past.text


async def test_read_through_editor_buffer_wins(ws: Path, fake: MakeClient) -> None:
    abs_path = str(ws / "src" / "app.py")
    client = fake(read=True, files={abs_path: "unsaved 1\nunsaved 2\nunsaved 3\n"})
    ctx = client.context(str(ws))
    out = await read.run({"path": "src/app.py", "offset": 2, "limit": 1}, ctx)
    assert out.text == ("     2\tunsaved 2\n"
                        "[Line 2 shown. Call read_file with offset=3 to continue.]")
    method, params = client.calls[0]
    assert method == "fs/read_text_file"
    # one line more than shown: the editor's answer says whether the file goes on
    assert wire(params) == {"sessionId": "sess-1", "path": abs_path, "line": 2, "limit": 2}
    full = await read.run({"path": "src/app.py"}, ctx)
    assert wire(client.calls[1][1]) == {"sessionId": "sess-1", "path": abs_path, "limit": 2001}
    assert full.text.count("\n") == 2 and full.raw_output["totalLines"] == 3


async def test_read_relative_to_session_cwd_not_process_cwd(
    ws: Path, fake: MakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "src").mkdir(parents=True)
    (elsewhere / "src" / "app.py").write_text("WRONG FILE\n")
    monkeypatch.chdir(elsewhere)
    client = fake(read=True, files={str(ws / "src" / "app.py"): "right\n"})
    out = await read.run({"path": "src/app.py"}, client.context(str(ws)))
    assert out.text == "     1\tright"
    assert client.calls[0][1].path == str(ws / "src" / "app.py")
    local = await read.run({"path": "./src/../src/app.py"}, fake().context(str(ws)))
    assert "import os" in local.text


async def test_read_errors(ws: Path, fake: MakeClient) -> None:
    ctx = fake().context(str(ws))
    with pytest.raises(ToolError, match="not found"):
        await read.run({"path": "nope.txt"}, ctx)
    with pytest.raises(ToolError, match="directory"):
        await read.run({"path": "src"}, ctx)
    with pytest.raises(ToolError, match="path"):
        read.title({}, ctx)
    with pytest.raises(ToolError, match="offset"):
        await read.run({"path": "README.md", "offset": 0}, ctx)
    editor = fake(read=True)
    with pytest.raises(ToolError, match="editor could not read"):
        await read.run({"path": "README.md"}, editor.context(str(ws)))


async def test_read_empty(ws: Path, fake: MakeClient) -> None:
    (ws / "e.txt").write_text("")
    assert (await read.run({"path": "e.txt"}, fake().context(str(ws)))).text == "(empty file)"


# ---------------------------------------------------------------------- write_file


async def test_write_new_and_existing_locally(ws: Path, fake: MakeClient) -> None:
    client = fake()
    ctx = client.context(str(ws))
    out = await write.run({"path": "new/dir/x.txt", "content": "a\nb\n"}, ctx)
    target = ws / "new" / "dir" / "x.txt"
    assert target.read_text() == "a\nb\n"
    assert out.text.startswith("Created new/dir/x.txt")
    assert wire(out.content) == [
        {"type": "diff", "path": str(target), "oldText": None, "newText": "a\nb\n"}]
    assert validate_def("ToolCallContent", wire(out.content)[0]) == []
    out2 = await write.run({"path": str(target), "content": "c\n"}, ctx)
    assert wire(out2.content)[0]["oldText"] == "a\nb\n"
    assert wire(out2.content)[0]["newText"] == "c\n"
    assert client.calls == []
    assert write.title({"path": "new/dir/x.txt", "content": ""}, ctx) == "Write new/dir/x.txt"
    assert write.kind == "edit"
    assert write.access({"path": "x", "content": ""}, ctx) == ("write", [str(ws / "x")])
    with pytest.raises(ToolError, match="directory"):
        await write.run({"path": "src", "content": "x"}, ctx)


@pytest.mark.parametrize("write_result", [None, {}])
async def test_write_through_editor(ws: Path, fake: MakeClient, write_result: object) -> None:
    abs_path = str(ws / "src" / "app.py")
    client = fake(read=True, write=True, files={abs_path: "buffer\n"}, write_result=write_result)
    ctx = client.context(str(ws))
    out = await write.run({"path": "src/app.py", "content": "new\n"}, ctx)
    assert client.methods == ["fs/read_text_file", "fs/write_text_file"]
    assert wire(client.calls[1][1]) == {"sessionId": "sess-1", "path": abs_path, "content": "new\n"}
    assert client.files[abs_path] == "new\n"
    assert (ws / "src" / "app.py").read_text().startswith("import os")  # disk untouched
    assert wire(out.content)[0]["oldText"] == "buffer\n"
    created = await write.run({"path": "fresh.txt", "content": "f"}, ctx)
    assert wire(created.content)[0]["oldText"] is None
    assert not (ws / "fresh.txt").exists()


async def test_write_only_capability_reads_old_text_from_disk(ws: Path, fake: MakeClient) -> None:
    client = fake(write=True)
    out = await write.run({"path": "README.md", "content": "x"}, client.context(str(ws)))
    assert client.methods == ["fs/write_text_file"]
    assert wire(out.content)[0]["oldText"] == "# Demo\nhello world\n"


async def test_write_editor_error_is_a_tool_error(ws: Path, fake: MakeClient) -> None:
    client = fake(write=True)
    client.fail["fs/write_text_file"] = RemoteError(-32603, "disk full")
    with pytest.raises(ToolError, match="disk full"):
        await write.run({"path": "a.txt", "content": "x"}, client.context(str(ws)))


# ---------------------------------------------------------------------- edit_file


async def test_edit_unique_replacement(ws: Path, fake: MakeClient) -> None:
    client = fake()
    ctx = client.context(str(ws))
    args = {"path": "src/app.py", "old_string": "return os.getcwd()", "new_string": "return 42"}
    out = await edit.run(args, ctx)
    abs_path = str(ws / "src" / "app.py")
    new = "import os\n\n\ndef main():\n    return 42\n"
    assert (ws / "src" / "app.py").read_text() == new
    assert wire(out.locations) == [{"path": abs_path, "line": 5}]
    assert wire(out.content) == [{"type": "diff", "path": abs_path, "oldText":
                                  "import os\n\n\ndef main():\n    return os.getcwd()\n",
                                  "newText": new}]
    assert "line 5" in out.text and "     5\t    return 42" in out.text
    assert client.calls == []
    assert edit.title(args, ctx) == "Edit src/app.py"
    assert edit.kind == "edit"
    assert wire(edit.locations(args, ctx)) == [{"path": abs_path}]


async def test_edit_not_found_ambiguous_replace_all(ws: Path, fake: MakeClient) -> None:
    (ws / "d.txt").write_text("foo\nbar\nfoo\n")
    ctx = fake().context(str(ws))
    with pytest.raises(ToolError, match="not found"):
        await edit.run({"path": "d.txt", "old_string": "baz", "new_string": "x"}, ctx)
    with pytest.raises(ToolError, match="2 times"):
        await edit.run({"path": "d.txt", "old_string": "foo", "new_string": "x"}, ctx)
    assert (ws / "d.txt").read_text() == "foo\nbar\nfoo\n"
    with pytest.raises(ToolError, match="identical"):
        await edit.run({"path": "d.txt", "old_string": "foo", "new_string": "foo"}, ctx)
    with pytest.raises(ToolError, match="not found"):
        await edit.run({"path": "missing.txt", "old_string": "a", "new_string": "b"}, ctx)
    out = await edit.run({"path": "d.txt", "old_string": "foo", "new_string": "qux",
                          "replace_all": True}, ctx)
    assert (ws / "d.txt").read_text() == "qux\nbar\nqux\n"
    assert out.raw_output["replacements"] == 2
    assert wire(out.locations) == [{"path": str(ws / "d.txt"), "line": 1}]
    one = await edit.run({"path": "d.txt", "old_string": "bar\nqux", "new_string": "B"}, ctx)
    assert (ws / "d.txt").read_text() == "qux\nB\n"
    assert wire(one.locations)[0]["line"] == 2


async def test_edit_through_editor_both_ways(ws: Path, fake: MakeClient) -> None:
    abs_path = str(ws / "src" / "app.py")
    client = fake(read=True, write=True, files={abs_path: "a = 1\nb = 2\n"})
    out = await edit.run({"path": "src/app.py", "old_string": "b = 2", "new_string": "b = 3"},
                         client.context(str(ws)))
    assert client.methods == ["fs/read_text_file", "fs/write_text_file"]
    assert client.files[abs_path] == "a = 1\nb = 3\n"
    assert (ws / "src" / "app.py").read_text().startswith("import os")
    assert wire(out.locations)[0]["line"] == 2


async def test_edit_crlf_file(ws: Path, fake: MakeClient) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await edit.run({"path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2"},
                   fake().context(str(ws)))
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


# ---------------------------------------------------------------------- path escapes


ARGS: dict[str, dict[str, str]] = {
    "read_file": {},
    "write_file": {"content": "x"},
    "edit_file": {"old_string": "a", "new_string": "b"},
}


@pytest.mark.parametrize("tool", [read, write, edit], ids=lambda x: x.spec.name)
async def test_access_paths_and_escapes(
    ws: Path, fake: MakeClient, tmp_path: Path, tool: Raw
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    os.symlink(outside / "secret.txt", ws / "link.txt")
    os.symlink(outside, ws / "linkdir")
    ctx = fake().context(str(ws))
    cases = {
        "src/app.py": True,
        "../outside/secret.txt": False,
        str(outside / "secret.txt"): False,
        "link.txt": False,
        "linkdir/secret.txt": False,
        "src/../../ws/README.md": True,
    }
    for path, inside in cases.items():
        _, paths = tool.access({"path": path, **ARGS[tool.spec.name]}, ctx)
        assert len(paths) == 1 and os.path.isabs(paths[0])
        assert all(ctx.inside_roots(p) for p in paths) is inside, path
    _, paths = tool.access({"path": "../outside/secret.txt", **ARGS[tool.spec.name]}, ctx)
    assert paths == [str(outside / "secret.txt")]
