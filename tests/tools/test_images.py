"""read_file on images: an image part when the model sees images, a clear text when it
does not or the image is too large; recognised by content; wired from the turn."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from acp_agent.conversation import ImagePart, TextPart, UserMessage
from acp_agent.engine.turn import run_turn
from acp_agent.tools import files, images
from acp_agent.tools.files import ReadFile

from ..engine_world import World
from ..fakes.provider import calls, text
from .fake_client import FakeClient
from .raw import Raw

Fake = Callable[..., FakeClient]
read = Raw(ReadFile())


def png(width: int, height: int) -> bytes:
    """A real (grey, 8-bit) PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + b"\x80" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


async def test_image_attached_when_the_model_sees_images(ws: Path, fake: Fake) -> None:
    data = png(3, 2)
    (ws / "pic.png").write_bytes(data)
    ctx = fake().context(str(ws))
    ctx.images = True
    out = await read.run({"path": "pic.png"}, ctx)
    assert out.text == f"pic.png: PNG image, 3×2, {len(data)} bytes (attached)."
    assert out.images == [ImagePart(base64.b64encode(data).decode(), "image/png")]
    assert out.raw_output == {"path": str(ws / "pic.png"), "mimeType": "image/png",
                              "bytes": len(data)}


async def test_image_as_text_when_the_model_is_blind(ws: Path, fake: Fake) -> None:
    data = png(3, 2)
    (ws / "pic.png").write_bytes(data)
    out = await read.run({"path": "pic.png"}, fake().context(str(ws)))
    assert out.text == (f"pic.png is a PNG image, 3×2, {len(data)} bytes. The current model "
                        "cannot see images, so it is not shown.")
    assert out.images == []


async def test_image_too_large(ws: Path, fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "IMAGE_MAX_BYTES", 50)
    data = png(40, 40)
    (ws / "big.png").write_bytes(data)
    ctx = fake().context(str(ws))
    ctx.images = True
    out = await read.run({"path": "big.png"}, ctx)
    assert out.images == []
    assert out.text == (f"big.png is a PNG image, 40×40, {len(data)} bytes: too large to show "
                        "(at most 50 bytes). Make a smaller copy with run_command (e.g. "
                        "ImageMagick, Pillow) and read it.")


async def test_recognised_by_content_and_read_from_disk_with_an_editor(
        ws: Path, fake: Fake) -> None:  # fmt: skip
    (ws / "noext").write_bytes(b"GIF89a" + struct.pack("<HH", 7, 5) + b"\0" * 20)
    ctx = fake().context(str(ws))
    ctx.images = True
    gif = await read.run({"path": "noext"}, ctx)
    assert gif.text == "noext: GIF image, 7×5, 30 bytes (attached)."
    assert gif.images[0].mime_type == "image/gif"
    (ws / "pic.png").write_bytes(png(1, 1))
    (ws / "fake.png").write_text("not an image\n")
    client = fake(read=True, files={str(ws / "fake.png"): "editor text\n"})
    editor_ctx = client.context(str(ws))
    editor_ctx.images = True
    real = await read.run({"path": "pic.png"}, editor_ctx)
    assert real.images and client.calls == []  # ACP has no binary read: the disk serves it
    text_png = await read.run({"path": "fake.png"}, editor_ctx)
    assert text_png.text == "     1\teditor text" and client.methods == ["fs/read_text_file"]


def test_dimensions_from_headers() -> None:
    assert images.dimensions(png(640, 480), "image/png") == (640, 480)
    jpeg = (b"\xff\xd8" + b"\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
            + b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", 300, 400) + b"\x03" + b"\0" * 9)
    assert images.sniff(jpeg) == "image/jpeg"
    assert images.dimensions(jpeg, "image/jpeg") == (400, 300)
    vp8x = b"RIFF\0\0\0\0WEBPVP8X" + b"\x0a\0\0\0" + b"\0" * 4 + (99).to_bytes(3, "little") \
        + (49).to_bytes(3, "little")
    assert images.sniff(vp8x) == "image/webp"
    assert images.dimensions(vp8x, "image/webp") == (100, 50)
    bits = (31 | (15 << 14)).to_bytes(4, "little")
    vp8l = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f" + bits
    assert images.dimensions(vp8l, "image/webp") == (32, 16)
    vp8 = b"RIFF\0\0\0\0WEBPVP8 \0\0\0\0" + b"\0\0\0\x9d\x01\x2a" + struct.pack("<HH", 20, 10)
    assert images.dimensions(vp8, "image/webp") == (20, 10)
    assert images.dimensions(b"\xff\xd8\xff", "image/jpeg") is None
    assert images.sniff(b"plain text") is None


@pytest.mark.parametrize("sees", [True, False])
async def test_the_turn_tells_the_tool_what_the_model_sees(ws: Path, sees: bool) -> None:
    data = png(2, 2)
    (ws / "pic.png").write_bytes(data)
    world = World(ws, calls(("read_file", {"path": "pic.png"})), text("seen"))
    ctx = world.context()
    ctx.model = msgspec.structs.replace(ctx.model, supports_images=sees)
    await run_turn(ctx, UserMessage([TextPart("look")]))
    [result] = world.results()
    pictures = [p for p in result.parts if isinstance(p, ImagePart)]
    assert len(pictures) == (1 if sees else 0)
