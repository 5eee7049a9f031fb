"""edit_file's matching (exact, then lenient about whitespace when unique), its errors
(counts and line numbers, the nearest candidate), and encodings kept byte for byte;
write_file over files that were not UTF-8."""

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

PY = """\
class Greeter:
    def __init__(self, name):
        self.name = name

    def greet(self):
        if self.name:
            return f"hello {self.name}"
        return "hello"
"""


async def run_edit(ws: Path, fake: Fake, name: str, **args: Any) -> str:
    out = await edit.run({"path": name, **args}, fake().context(str(ws)))
    return out.text


async def edit_error(ws: Path, fake: Fake, name: str, **args: Any) -> str:
    before = (ws / name).read_bytes()
    with pytest.raises(ToolError) as err:
        await edit.run({"path": name, **args}, fake().context(str(ws)))
    assert (ws / name).read_bytes() == before  # nothing written
    return err.value.message


# ---------------------------------------------------------------------- lenient matches


async def test_trailing_whitespace_ignored(ws: Path, fake: Fake) -> None:
    (ws / "t.py").write_text("a = 1   \nb = 2\t\nc = 3\n")
    text = await run_edit(ws, fake, "t.py", old_string="a = 1\nb = 2", new_string="a = 10\nb = 20")
    assert (ws / "t.py").read_text() == "a = 10\nb = 20\nc = 3\n"
    assert text.split("\n")[0] == (
        "Edited t.py: replaced 1 occurrence (first at line 1). old_string matched lines 1-2 "
        "only ignoring trailing whitespace.")


async def test_indentation_ignored_and_replacement_reindented(ws: Path, fake: Fake) -> None:
    (ws / "g.py").write_text(PY)
    old = 'def greet(self):\n    if self.name:\n        return f"hello {self.name}"\n'
    new = 'def greet(self):\n    if not self.name:\n        return "hello"\n    return "hi"\n'
    text = await run_edit(ws, fake, "g.py", old_string=old, new_string=new)
    assert (ws / "g.py").read_text() == PY.replace(
        '    def greet(self):\n        if self.name:\n            return f"hello {self.name}"\n',
        '    def greet(self):\n        if not self.name:\n            return "hello"\n'
        '        return "hi"\n')
    assert text.split("\n")[0] == (
        "Edited g.py: replaced 1 occurrence (first at line 5). old_string matched lines 5-7 "
        "only ignoring indentation and trailing whitespace; new_string was re-indented the "
        "same way.")
    assert '     6\t        if not self.name:' in text  # the snippet shows the result


async def test_first_line_copied_without_its_indentation(ws: Path, fake: Fake) -> None:
    (ws / "g.py").write_text(PY.replace("self.name = name", "self.name = name  "))
    await run_edit(ws, fake, "g.py", old_string="self.name = name\n\n    def greet(self):",
                   new_string="self.name = name.strip()\n\n    def greet(self):")
    assert (ws / "g.py").read_text() == PY.replace("self.name = name", "self.name = name.strip()")


async def test_crlf_file_keeps_crlf_on_a_lenient_match(ws: Path, fake: Fake) -> None:
    (ws / "w.txt").write_bytes(b"one  \r\n  two\r\nthree\r\n")
    await run_edit(ws, fake, "w.txt", old_string="one\ntwo\n", new_string="1\n2\n")
    # re-indented by the shift of the first indented line ("two" → "  two")
    assert (ws / "w.txt").read_bytes() == b"1\r\n  2\r\nthree\r\n"
    (ws / "x.txt").write_bytes(b"a\r\nb  \r\nc\r\n")
    await run_edit(ws, fake, "x.txt", old_string="b\nc", new_string="B\nC\nD")
    assert (ws / "x.txt").read_bytes() == b"a\r\nB\r\nC\r\nD\r\n"


async def test_no_newline_at_end_of_file_is_kept(ws: Path, fake: Fake) -> None:
    (ws / "n.txt").write_text("x = 1\n  y = 2  ")
    await run_edit(ws, fake, "n.txt", old_string="y = 2\n", new_string="y = 3\n")
    assert (ws / "n.txt").read_text() == "x = 1\n  y = 3"


async def test_ambiguous_lenient_match_refused_with_the_places(ws: Path, fake: Fake) -> None:
    (ws / "a.py").write_text("if x:\n    go()  \nif y:\n\tgo()\t\n")
    message = await edit_error(ws, fake, "a.py", old_string="go()\n", new_string="stop()\n")
    assert message == (
        "old_string is not in a.py exactly; ignoring indentation and trailing whitespace it "
        "matches 2 places (lines 2, 4). A lenient match is applied only when it is unique: "
        "copy the exact text of the place you mean, with enough surrounding lines to make it "
        "unique.")


async def test_uneven_indentation_refused_with_the_lines(ws: Path, fake: Fake) -> None:
    (ws / "t.go").write_text("func f() {\n\tif x {\n\t\treturn\n\t}\n}\n")
    message = await edit_error(ws, fake, "t.go", old_string="if x {\n    return\n}",
                               new_string="if y {\n    return\n}")
    assert message == (
        "old_string is not in t.go exactly; ignoring indentation and trailing whitespace it "
        "matches lines 2-4, but its indentation differs from the file's unevenly (tabs and "
        "spaces?), so new_string cannot be re-indented safely. Copy these lines exactly:\n"
        "     2\t\tif x {\n     3\t\t\treturn\n     4\t\t}")


# ---------------------------------------------------------------------- errors


async def test_several_exact_matches_give_count_and_lines(ws: Path, fake: Fake) -> None:
    (ws / "d.txt").write_text("foo\nbar\nfoo\nbaz\nfoo\n")
    message = await edit_error(ws, fake, "d.txt", old_string="foo", new_string="x")
    assert message == ("old_string occurs 3 times in d.txt (at lines 1, 3, 5). Include more "
                       "surrounding lines to make it unique, or set replace_all to true.")
    (ws / "many.txt").write_text("x\n" * 15)
    many = await edit_error(ws, fake, "many.txt", old_string="x", new_string="y")
    assert "(at lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 5 more)" in many


async def test_no_match_shows_the_nearest_candidate(ws: Path, fake: Fake) -> None:
    (ws / "g.py").write_text(PY)
    message = await edit_error(
        ws, fake, "g.py", old_string='    def greet(self):\n        if self.nam:\n'
        '            return f"helo {self.name}"', new_string="x")
    assert message == (
        "old_string was not found in g.py. The most similar text is at lines 5-7:\n"
        "     5\t    def greet(self):\n"
        "     6\t        if self.name:\n"
        '     7\t            return f"hello {self.name}"\n'
        "Copy the exact text from there (without the line-number prefix) into old_string.")


async def test_no_match_and_nothing_similar(ws: Path, fake: Fake) -> None:
    (ws / "g.py").write_text(PY)
    message = await edit_error(ws, fake, "g.py", old_string="completely unrelated words",
                               new_string="x")
    assert message == ("old_string was not found in g.py. Nothing similar is in the file: "
                       "read it again to see its current content.")


async def test_no_match_with_line_number_prefixes_says_so(ws: Path, fake: Fake) -> None:
    (ws / "g.py").write_text(PY)
    message = await edit_error(ws, fake, "g.py", old_string="     3\t        self.name = name",
                               new_string="x")
    assert message.endswith(
        "old_string seems to include read_file's line-number prefixes (`     5<TAB>`); leave "
        "them out.")
    assert "     3\t        self.name = name\n" in message  # and the line it meant


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
    message = await edit_error(ws, fake, "m.txt", old_string="bad \ufffd\ufffd here",
                               new_string="good")
    assert message.endswith("The file has bytes that are not UTF-8 (shown as �); old_string "
                            "cannot match them: choose old_string around them.")


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
