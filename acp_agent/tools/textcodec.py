"""How the bytes of a local file become the text a tool works on, and back, losslessly.

UTF-8 is the rule. A file that is not UTF-8 is still text the model can read and edit:
UTF-16 with a byte-order mark is decoded as such; a file whose non-ASCII bytes are
single-byte characters throughout is decoded as cp1252/latin-1; a UTF-8 file with a few
bad bytes keeps them as ``surrogateescape`` code points (shown to the model as U+FFFD).
:meth:`Decoded.encode` writes the text back in the same form, so the bytes an edit did
not touch come back exactly. A NUL byte (or mostly control bytes) makes a file binary.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from .budget import plural

#: Bytes sniffed to tell binary files from text.
SNIFF_BYTES = 8192

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
#: Bytes that are not control bytes (those that do occur in text count as not).
_NOT_CONTROL = bytes(range(0x20, 0x100)) + b"\t\n\r\f\v\b\x1b"
#: surrogateescape code points (one undecodable byte each) → U+FFFD, for display.
_SHOW_ESCAPED = {cp: "\ufffd" for cp in range(0xDC80, 0xDD00)}
ESCAPED = re.compile("[\udc80-\udcff]")
#: A character that is neither ASCII nor an undecodable byte.
_DECODED_NON_ASCII = re.compile("[^\x00-\x7f\udc80-\udcff]")


def visible(text: str) -> str:
    """``text`` as the model sees it: undecodable bytes as U+FFFD."""
    return text.translate(_SHOW_ESCAPED)


def is_binary(sample: bytes) -> bool:
    """Whether the first bytes of a file look binary: a NUL, or mostly control bytes."""
    sample = sample[:SNIFF_BYTES]
    if b"\0" in sample:
        return True
    controls = len(sample.translate(None, _NOT_CONTROL))
    return controls > len(sample) // 10


@dataclass(frozen=True, slots=True)
class Decoded:
    """A local file's text, how it was decoded, and what that means for the model."""

    text: str
    encoding: str = "utf-8"
    """``utf-8``, ``utf-16-le``, ``utf-16-be``, ``cp1252``, ``latin-1``, or ``binary``."""
    bom: bytes = b""
    invalid: int = 0
    """Bytes that are not UTF-8, kept in ``text`` as surrogate escapes."""
    first_invalid: int = -1
    """Byte offset of the first of them."""
    size: int = 0

    @property
    def binary(self) -> bool:
        return self.encoding == "binary"

    @property
    def plain(self) -> bool:
        """UTF-8 (a byte-order mark allowed) with nothing to say about it."""
        return self.encoding == "utf-8" and not self.invalid

    def shown(self) -> str:
        """The text as the model sees it (undecodable bytes as U+FFFD)."""
        return visible(self.text) if self.invalid else self.text

    def encode(self, text: str) -> bytes:
        """``text`` in this file's encoding; raises ``UnicodeEncodeError`` for characters
        it cannot hold (cp1252/latin-1)."""
        if self.encoding == "utf-8":
            return self.bom + text.encode("utf-8", "surrogateescape")
        return self.bom + text.encode(self.encoding)

    def holds(self, char: str) -> bool:
        """Whether ``char`` can be written in this encoding."""
        try:
            self.encode(char)
        except UnicodeEncodeError:
            return False
        return True

    def describe(self) -> str:
        """What the model should know, or ``""``: e.g. "latin-1 (not UTF-8)"."""
        if self.encoding in ("cp1252", "latin-1"):
            return f"{self.encoding} (not valid UTF-8)"
        if self.encoding.startswith("utf-16"):
            endian = "little" if self.encoding.endswith("le") else "big"
            return f"UTF-16 ({endian}-endian, with a byte-order mark)"
        if self.invalid:
            return f"UTF-8 with {plural(self.invalid, 'undecodable byte')}"
        return ""

    def note(self) -> str | None:
        """read_file's note on the encoding, or ``None`` for plain UTF-8."""
        if self.invalid:
            first = ESCAPED.search(self.text)
            line = self.text.count("\n", 0, first.start() if first else 0) + 1
            return (f"[Not valid UTF-8: {plural(self.invalid, 'byte')} could not be decoded "
                    f"(the first at byte {self.first_invalid:,}, line {line}); shown as �. "
                    "edit_file keeps such bytes unchanged.]")
        if self.encoding != "utf-8":
            return f"[Decoded as {self.describe()}; edit_file keeps this encoding.]"
        return None


def decode(data: bytes) -> Decoded:
    """The text of a file's bytes (``encoding == "binary"`` when they are not text)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom):].decode(encoding)
            except UnicodeDecodeError:
                break
            return Decoded(text, encoding, bom, size=len(data))
    if is_binary(data):
        return Decoded("", "binary", size=len(data))
    try:
        return Decoded(data.decode("utf-8"), size=len(data))
    except UnicodeDecodeError as exc:
        first = exc.start
    text = data.decode("utf-8", "surrogateescape")
    if _DECODED_NON_ASCII.search(text):
        # real UTF-8 characters besides the bad bytes: UTF-8 with a few errors
        escaped = len(ESCAPED.findall(text))
        return Decoded(text, invalid=escaped, first_invalid=first, size=len(data))
    try:  # only single-byte characters: a legacy 8-bit encoding
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        return Decoded(data.decode("latin-1"), "latin-1", size=len(data))
    if any(0x80 <= b < 0xA0 for b in data):
        return Decoded(text, "cp1252", size=len(data))
    return Decoded(text, "latin-1", size=len(data))  # the same characters either way
