"""read_file's budget (lines, line length, bytes) and its markers; binary files and
encodings; the route through the editor."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from acp_agent.errors import ToolError
from acp_agent.tools import budget, files
from acp_agent.tools.files import ReadFile

from .fake_client import FakeClient
from .raw import Raw

Fake = Callable[..., FakeClient]
read = Raw(ReadFile())


def lines_file(path: Path, n: int, width: int = 0) -> None:
    path.write_text("".join(f"line {i}" + "x" * width + "\n" for i in range(1, n + 1)))


# ---------------------------------------------------------------------- the budget


async def test_default_line_limit_and_marker(ws: Path, fake: Fake) -> None:
    lines_file(ws / "long.txt", 2500)
    out = await read.run({"path": "long.txt"}, fake().context(str(ws)))
    lines = out.text.split("\n")
    assert len(lines) == budget.READ_MAX_LINES + 1
    assert lines[-2] == "  2000\tline 2000"
    assert lines[-1] == (
        "[Lines 1-2000 of 2,500 shown. Call read_file with offset=2001 to continue.]")
    assert out.raw_output == {"path": str(ws / "long.txt"), "firstLine": 1, "lastLine": 2000,
                              "totalLines": 2500, "more": True, "truncated": True}
    rest = await read.run({"path": "long.txt", "offset": 2001}, fake().context(str(ws)))
    assert rest.text.split("\n")[0] == "  2001\tline 2001"
    assert rest.text.endswith("  2500\tline 2500")  # the end: no marker
    assert rest.raw_output["more"] is False


async def test_explicit_limit_beyond_the_default(ws: Path, fake: Fake) -> None:
    lines_file(ws / "long.txt", 2500)
    out = await read.run({"path": "long.txt", "limit": 3000}, fake().context(str(ws)))
    assert out.text.endswith("  2500\tline 2500") and out.raw_output["lastLine"] == 2500


async def test_byte_cap_and_marker(ws: Path, fake: Fake) -> None:
    lines_file(ws / "wide.txt", 1000, width=93)  # "line N" + 93 x: ~100 characters a line
    out = await read.run({"path": "wide.txt"}, fake().context(str(ws)))
    *body, marker = out.text.split("\n")
    last = out.raw_output["lastLine"]
    assert len(body) == last and body[-1].startswith(f"{last:6}\tline {last}x")
    assert len("\n".join(body).encode()) <= budget.READ_MAX_BYTES
    assert marker == (f"[Lines 1-{last} of 1,000 shown (one read returns at most 50,000 bytes). "
                      f"Call read_file with offset={last + 1} to continue.]")
    assert len(out.text.encode()) < budget.READ_MAX_BYTES + 200


async def test_long_lines_cut_with_marker(ws: Path, fake: Fake) -> None:
    (ws / "min.js").write_text("a" * 5000 + "\nshort\n" + "b" * 2001 + "\n")
    out = await read.run({"path": "min.js"}, fake().context(str(ws)))
    assert out.text.split("\n") == [
        "     1\t" + "a" * 2000 + "… [+3,000 chars]",
        "     2\tshort",
        "     3\t" + "b" * 2000 + "… [+1 chars]",
        "[2 lines longer than 2,000 characters cut where marked `… [+N chars]`; run_command "
        "with `cut -c 2001-` shows the rest.]",
    ]
    assert out.raw_output["truncated"] is True and out.raw_output["more"] is False


async def test_one_enormous_line_stays_within_budget(ws: Path, fake: Fake) -> None:
    (ws / "blob.txt").write_text("é" * 3_000_000)
    out = await read.run({"path": "blob.txt"}, fake().context(str(ws)))
    assert len(out.text.encode()) < 5000 and "… [+2,998,000 chars]" in out.text


async def test_past_the_end(ws: Path, fake: Fake) -> None:
    lines_file(ws / "n.txt", 10)
    out = await read.run({"path": "n.txt", "offset": 50}, fake().context(str(ws)))
    assert out.text == "(offset 50 is past the end: the file has 10 lines)"


async def test_through_the_editor_same_budget(ws: Path, fake: Fake) -> None:
    path = str(ws / "buf.txt")
    client = fake(read=True, files={path: "".join(f"l{i}\n" for i in range(1, 2501))})
    out = await read.run({"path": "buf.txt"}, client.context(str(ws)))
    assert client.calls[0][1].limit == budget.READ_MAX_LINES + 1
    assert out.text.split("\n")[-1] == (
        "[Lines 1-2000 shown. Call read_file with offset=2001 to continue.]")  # total unknown
    end = await read.run({"path": "buf.txt", "offset": 2401}, client.context(str(ws)))
    assert end.text.endswith("  2500\tl2500") and end.raw_output["totalLines"] == 2500
    short = fake(read=True, files={path: "x" * 4000 + "\n"})
    cut = await read.run({"path": "buf.txt"}, short.context(str(ws)))
    assert cut.text.startswith("     1\t" + "x" * 2000 + "… [+2,000 chars]\n[1 line longer")


async def test_large_file_streamed(ws: Path, fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "WHOLE_READ_MAX", 100)
    (ws / "big.log").write_bytes(b"".join(b"entry %d\n" % i for i in range(1, 3001)) + b"\xff\n")
    ctx = fake().context(str(ws))
    out = await read.run({"path": "big.log", "offset": 10, "limit": 2}, ctx)
    assert out.text == ("    10\tentry 10\n    11\tentry 11\n"
                        "[Lines 10-11 shown. Call read_file with offset=12 to continue.]")
    tail = await read.run({"path": "big.log", "offset": 3000}, ctx)
    assert tail.text == ("[Not valid UTF-8 in the lines shown; undecodable bytes are shown as �.]"
                         "\n  3000\tentry 3000\n  3001\t\ufffd")
    (ws / "big.bin").write_bytes(b"\0" * 200)
    with pytest.raises(ToolError, match=r"binary file \(200 bytes\)"):
        await read.run({"path": "big.bin"}, ctx)


# ---------------------------------------------------------------------- binary, encodings


async def test_binary_refused_with_what_to_do(ws: Path, fake: Fake) -> None:
    (ws / "b.bin").write_bytes(b"\x00\x01\x02" * 10)
    with pytest.raises(ToolError) as err:
        await read.run({"path": "b.bin"}, fake().context(str(ws)))
    assert err.value.message == (
        f"{ws / 'b.bin'} is a binary file (30 bytes); read_file shows text and images only. "
        "Inspect it with run_command if you must (e.g. `file`, `xxd | head`).")
    (ws / "ctl.bin").write_bytes(bytes(range(1, 32)) * 10 + b"\xff")  # control bytes, no NUL
    with pytest.raises(ToolError, match="binary file"):
        await read.run({"path": "ctl.bin"}, fake().context(str(ws)))


async def test_latin1_and_cp1252_decoded_and_flagged(ws: Path, fake: Fake) -> None:
    (ws / "l1.txt").write_bytes("café\nnaïve\n".encode("latin-1"))
    out = await read.run({"path": "l1.txt"}, fake().context(str(ws)))
    assert out.text == ("[Decoded as latin-1 (not valid UTF-8); edit_file keeps this encoding.]\n"
                        "     1\tcafé\n     2\tnaïve")
    (ws / "win.txt").write_bytes("“quoted” – café\n".encode("cp1252"))
    win = await read.run({"path": "win.txt"}, fake().context(str(ws)))
    assert win.text == ("[Decoded as cp1252 (not valid UTF-8); edit_file keeps this encoding.]\n"
                        "     1\t“quoted” – café")


async def test_invalid_utf8_flagged_with_position(ws: Path, fake: Fake) -> None:
    (ws / "mixed.txt").write_bytes("naïve\n".encode() + b"bad \xff\xfe here\nok\n")
    out = await read.run({"path": "mixed.txt"}, fake().context(str(ws)))
    assert out.text == (
        "[Not valid UTF-8: 2 bytes could not be decoded (the first at byte 11, line 2); "
        "shown as �. edit_file keeps such bytes unchanged.]\n"
        "     1\tnaïve\n     2\tbad \ufffd\ufffd here\n     3\tok")


async def test_utf16_with_bom(ws: Path, fake: Fake) -> None:
    (ws / "u16.txt").write_bytes(b"\xff\xfe" + "héllo\r\nwörld\r\n".encode("utf-16-le"))
    out = await read.run({"path": "u16.txt"}, fake().context(str(ws)))
    assert out.text == ("[Decoded as UTF-16 (little-endian, with a byte-order mark); edit_file "
                        "keeps this encoding.]\n     1\théllo\n     2\twörld")
    (ws / "u8bom.txt").write_bytes(b"\xef\xbb\xbfplain\n")
    assert (await read.run({"path": "u8bom.txt"}, fake().context(str(ws)))).text == (
        "     1\tplain")


async def test_editor_text_is_the_editors(ws: Path, fake: Fake) -> None:
    (ws / "l1.txt").write_bytes("café\n".encode("latin-1"))  # the disk is not read
    client = fake(read=True, files={str(ws / "l1.txt"): "café (buffer)\n"})
    out = await read.run({"path": "l1.txt"}, client.context(str(ws)))
    assert out.text == "     1\tcafé (buffer)"
