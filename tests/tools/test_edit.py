"""edit_file: encodings kept byte for byte, binary files refused; write_file over files
that were not UTF-8."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_agent.errors import ToolError
from acp_agent.tools.files import EditFile, WriteFile

from .fake_client import FakeClient, wire
from .raw import Raw

Fake = Callable[..., FakeClient]
edit, write = Raw(EditFile()), Raw(WriteFile())


async def run_edit(ws: Path, fake: Fake, name: str, **args: Any) -> str:
    out = await edit.run({"path": name, **args}, fake().context(str(ws)))
    return out.text


async def edit_error(ws: Path, fake: Fake, name: str, **args: Any) -> str:
    before = (ws / name).read_bytes()
    with pytest.raises(ToolError) as err:
        await edit.run({"path": name, **args}, fake().context(str(ws)))
    assert (ws / name).read_bytes() == before  # nothing written
    return err.value.message


# ---------------------------------------------------------------------- binary


async def test_edit_refuses_binary(ws: Path, fake: Fake) -> None:
    (ws / "b.bin").write_bytes(b"ab\0cd")
    message = await edit_error(ws, fake, "b.bin", old_string="ab", new_string="x")
    assert message == "b.bin is a binary file (5 bytes); edit_file edits text only."


# ---------------------------------------------------------------------- encodings kept


async def test_latin1_edit_keeps_every_other_byte(ws: Path, fake: Fake) -> None:
    lines = [f"ligne {i}: café, naïve, façade, {bytes([0xA0 + i % 90]).decode('latin-1')}\n"
             for i in range(1, 41)]
    original = "".join(lines).encode("latin-1")
    (ws / "l1.txt").write_bytes(original)
    text = await run_edit(ws, fake, "l1.txt", old_string="ligne 20: café",
                          new_string="ligne 20: thé")
    after = (ws / "l1.txt").read_bytes()
    index = original.index(b"ligne 20: caf\xe9")
    assert after == original[:index] + b"ligne 20: th\xe9" + original[index + 14 :]
    assert "The file's encoding was kept: latin-1 (not valid UTF-8)." in text
    assert "    20\tligne 20: thé, naïve" in text


async def test_invalid_utf8_bytes_survive_an_edit(ws: Path, fake: Fake) -> None:
    original = "naïve\n".encode() + b"bad \xff\xfe here\n" + "line 3 ✓\n".encode() + b"\x80\n"
    (ws / "m.txt").write_bytes(original)
    text = await run_edit(ws, fake, "m.txt", old_string="line 3", new_string="third line")
    assert (ws / "m.txt").read_bytes() == original.replace(b"line 3", b"third line")
    assert "The file's encoding was kept: UTF-8 with 3 undecodable bytes." in text
    assert "     2\tbad \ufffd\ufffd here" in text  # shown, not written, as U+FFFD


async def test_utf16_edit_round_trip(ws: Path, fake: Fake) -> None:
    (ws / "u.txt").write_bytes(b"\xfe\xff" + "héllo\nwörld\n".encode("utf-16-be"))
    await run_edit(ws, fake, "u.txt", old_string="wörld", new_string="wërld")
    assert (ws / "u.txt").read_bytes() == b"\xfe\xff" + "héllo\nwërld\n".encode("utf-16-be")


async def test_latin1_cannot_hold_the_new_text(ws: Path, fake: Fake) -> None:
    (ws / "l1.txt").write_bytes("prix: 5 EUR\n".encode("latin-1") + b"caf\xe9\n")
    message = await edit_error(ws, fake, "l1.txt", old_string="5 EUR", new_string="5 € or ✓")
    assert message == (
        f"{ws / 'l1.txt'} is latin-1 (not valid UTF-8) text, which cannot hold '€✓' of the new "
        "text; nothing was written. Use characters that encoding has, or rewrite the whole "
        "file with write_file (which writes UTF-8).")


async def test_undecodable_bytes_are_not_sent_through_the_editor(ws: Path, fake: Fake) -> None:
    (ws / "m.txt").write_bytes(b"caf\xc3\xa9 \xff\n")
    client = fake(write=True)  # read from disk, written by the editor: the bytes would go
    with pytest.raises(ToolError, match="editor's write would replace them"):
        await edit.run({"path": "m.txt", "old_string": "caf", "new_string": "CAF"},
                       client.context(str(ws)))
    assert client.calls == [] and (ws / "m.txt").read_bytes() == b"caf\xc3\xa9 \xff\n"


# ---------------------------------------------------------------------- write_file


async def test_write_over_non_utf8_says_what_it_replaced(ws: Path, fake: Fake) -> None:
    ctx = fake().context(str(ws))
    (ws / "l1.txt").write_bytes(b"caf\xe9\n")
    out = await write.run({"path": "l1.txt", "content": "café\n"}, ctx)
    assert (ws / "l1.txt").read_bytes() == "café\n".encode()
    assert out.text == ("Wrote l1.txt (1 line). The old content was latin-1 (not valid "
                        "UTF-8); the new content is UTF-8.")
    assert wire(out.content)[0]["oldText"] == "café\n"
    (ws / "b.bin").write_bytes(b"\0" * 10)
    binary = await write.run({"path": "b.bin", "content": "text\n"}, ctx)
    assert binary.text == "Wrote b.bin (1 line). It replaced a binary file of 10 bytes."
    assert wire(binary.content)[0]["oldText"] == "(binary file, 10 bytes)"
    (ws / "m.txt").write_bytes(b"caf\xc3\xa9 \xff\n")
    mixed = await write.run({"path": "m.txt", "content": "ok\n"}, ctx)
    assert mixed.text == ("Wrote m.txt (1 line). The old content was UTF-8 with 1 "
                          "undecodable byte; the new content is UTF-8.")
    plain = await write.run({"path": "m.txt", "content": "a\nb\n"}, ctx)
    assert plain.text == "Wrote m.txt (2 lines)."
