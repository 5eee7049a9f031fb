"""Images read_file can hand to the model: recognised by their first bytes (not by the
file name), with their pixel size read from the header when it is there."""

from __future__ import annotations

import struct

#: File name endings read_file looks at on disk even when the editor serves text.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


def sniff(head: bytes) -> str | None:
    """The MIME type of an image that starts with ``head``, or ``None``."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def dimensions(data: bytes, mime: str) -> tuple[int, int] | None:
    """(width, height) from the image header, or ``None`` when it cannot be read."""
    try:
        if mime == "image/png" and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return w, h
        if mime == "image/gif":
            w, h = struct.unpack("<HH", data[6:10])
            return w, h
        if mime == "image/webp":
            return _webp(data)
        if mime == "image/jpeg":
            return _jpeg(data)
    except struct.error:
        return None
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    return None


def _jpeg(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # start of frame
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return w, h
        i += 2 + length
    return None


def label(mime: str) -> str:
    """``image/png`` → ``PNG``."""
    return mime.split("/")[1].upper()
