"""The session log's format: one JSON object per line, tagged by ``"r"``.

A log is a :class:`Header` then records in the order things happened: the user's
:class:`Prompt` (as the client sent it), the messages sent into a running turn
(:class:`Steer`, when accepted), every :class:`Update` the client was shown
(message and thought chunks coalesced per message), every update its exposed subagents
showed (:class:`ChildUpdate`), every change to the model's history
(:class:`AddMessage`, :class:`TruncateHistory`, :class:`ReplaceHistory`), the session's
:class:`Settings`, :class:`UsageTotals` and :class:`Roots` when they change, a
:class:`TurnEnd` per prompt, and the client's say on the session as a whole
(:class:`ClientTitle`, :class:`Archived`), and what turns changed in the workspace and
what was taken back (:class:`Checkpoint`, :class:`Undone`, :class:`Rewind`).
:func:`parse` reads a log back, skipping lines it cannot decode.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any, TypeAlias, cast

import msgspec

from .. import log
from ..conversation import Message
from ..protocol import UNSET
from ..protocol import types as t

FORMAT_VERSION = 1


def now_iso() -> str:
    """The current time, ISO 8601 UTC with milliseconds (sorts as text)."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


class _Record(msgspec.Struct, tag_field="r", kw_only=True, omit_defaults=True):
    pass


class Header(_Record, tag="header"):
    id: str
    cwd: str
    created_at: str
    additional_directories: list[str] = []
    forked_from: str | None = None
    version: int = FORMAT_VERSION


class Prompt(_Record, tag="prompt"):
    """A user prompt as the client sent it (replayed as ``user_message_chunk``s);
    ``history``: the model's history's length when it came (where ``/rewind`` cuts)."""

    message_id: str
    blocks: list[t.ContentBlock]
    at: str
    history: int | None = None


class Steer(_Record, tag="steer"):
    """A message the client sent into a running turn (``_session/steering``), as sent,
    when it was accepted. It then appears under the same id: shown where it joined the
    conversation (``user_message_chunk`` updates), or as the ``Prompt`` of the turn it
    started. One that never does was pending when the process died."""

    message_id: str
    blocks: list[t.ContentBlock]
    at: str


class Update(_Record, tag="update"):
    """A ``session/update`` as the client saw it (chunks coalesced per message)."""

    update: t.SessionUpdate


class ChildUpdate(_Record, tag="child"):
    """A ``session/update`` a subagent's session showed the client (exposed children
    only), kept in its top-level session's log under the child's id (chunks coalesced
    per message); replayed by ``session/load`` to clients that take subagents."""

    session_id: str
    update: t.SessionUpdate


class AddMessage(_Record, tag="message"):
    """A message appended to the model's history."""

    message: Message


class TruncateHistory(_Record, tag="truncate"):
    length: int


class ReplaceHistory(_Record, tag="replace"):
    """The model's whole history replaced (a compaction)."""

    messages: list[Message]


class Settings(_Record, tag="settings"):
    mode: str
    model: str
    thinking: str | None = None  # None: the configured default
    sandbox: str | None = None  # the level of ``auto`` mode's commands; None: the default


class PruneResults(_Record, tag="prune"):
    """Tool results replaced by stubs to make room (see ``context``)."""

    call_ids: list[str]


class Instructions(_Record, tag="instructions"):
    """The client's ``systemPrompt`` for the session (``append`` or ``override``)."""

    mode: str
    text: str


class UsageTotals(_Record, tag="usage"):
    context_tokens: int
    input_tokens: int
    output_tokens: int
    cost: float | None = None


class Roots(_Record, tag="roots"):
    cwd: str
    additional_directories: list[str] = []


class TurnEnd(_Record, tag="turn_end"):
    stop_reason: str
    at: str


class FileState(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """A workspace path at one moment: ``absent``, a ``file`` or a ``link`` (``sha256``
    of its bytes or target, ``mode``; ``kept``: the bytes are in the session's checkpoint
    store, else known by their hash only)."""

    kind: str = "absent"
    sha256: str = ""
    mode: int = 0
    size: int = 0
    kept: bool = False
    new_dirs: int = 0
    """``absent`` only: how many of its parent directories did not exist either."""


class FileChange(msgspec.Struct, kw_only=True, frozen=True):
    path: str
    before: FileState
    after: FileState


class Checkpoint(_Record, tag="checkpoint"):
    """What a turn changed in the workspace (its own tools' changes and, where git is
    installed, everything else found changed), and what each path was before it."""

    turn: str
    """The message id of the turn's prompt."""
    at: str
    files: list[FileChange]


class Touched(_Record, tag="touched"):
    """What a turn is about to change, recorded (made durable) before it does: each path
    and what it was. A turn cut short (the agent killed mid-turn) leaves these without a
    :class:`Checkpoint`; ``/undo`` can still put those paths back."""

    turn: str
    at: str
    files: dict[str, FileState]


class Undone(_Record, tag="undone"):
    """Checkpoints taken back (``/undo``, ``/rewind``) or dropped (over the size cap)."""

    turns: list[str]
    at: str
    dropped: bool = False


class Rewind(_Record, tag="rewind"):
    """``/rewind``: the conversation cut back to before the prompt ``turn`` (``length``:
    the history's length kept) and/or the workspace put back; shown on replay as the
    agent message ``message_id``."""

    turn: str
    prompt: str
    taken: int
    """How many turns were taken back."""
    length: int | None
    """The history's length kept; ``None``: the conversation was left as it was."""
    files: int
    """How many files were put back."""
    message_id: str
    at: str


class ClientTitle(_Record, tag="client_title"):
    """The title the client gave (``session/set_title``): never replaced by the agent's."""

    title: str
    at: str


class Archived(_Record, tag="archived"):
    """``session/archive`` (``True``) or ``session/unarchive`` (``False``)."""

    archived: bool
    at: str


Record: TypeAlias = (
    Header
    | Prompt
    | Steer
    | Update
    | ChildUpdate
    | AddMessage
    | TruncateHistory
    | ReplaceHistory
    | Settings
    | PruneResults
    | Instructions
    | UsageTotals
    | Roots
    | TurnEnd
    | ClientTitle
    | Archived
    | Checkpoint
    | Touched
    | Undone
    | Rewind
)


class Meta(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The index entry of one session."""

    id: str
    cwd: str
    created_at: str
    updated_at: str
    additional_directories: list[str] = []
    title: str | None = None
    titled_by_client: bool = False
    archived: bool = False
    turns: int | None = None
    """Prompts answered (``TurnEnd`` records); ``None`` in entries written before it was
    counted (``acp-agent sessions`` then counts the log)."""


_encoder = msgspec.json.Encoder()


@cache
def _decoder() -> msgspec.json.Decoder[Record]:
    return msgspec.json.Decoder(Record)  # built on first read: ~10 ms, off the start-up path


@cache
def _meta_decoder() -> msgspec.json.Decoder[Meta]:
    return msgspec.json.Decoder(Meta)


def encode(record: Record) -> bytes:
    """One record as one complete line."""
    return _encoder.encode(record) + b"\n"


def encode_meta(meta: Meta) -> bytes:
    return _encoder.encode(meta)


def decode_meta(data: bytes) -> Meta:
    """A meta file's entry: its last line that decodes (a turn's end appends the entry as
    it is then, ``Store.refresh_meta``; a line cut by a crash is passed over). Raises
    ``msgspec.DecodeError`` when none does."""
    decoder = _meta_decoder()
    try:
        return decoder.decode(data)  # one entry, the file as written whole
    except msgspec.DecodeError:
        if b"\n" not in data:
            raise
    for line in reversed(data.split(b"\n")):
        if line.strip():
            with contextlib.suppress(msgspec.DecodeError):
                return decoder.decode(line)
    raise msgspec.DecodeError("no entry in the meta file")


def parse(data: bytes, where: str = "session log") -> list[Record]:
    """Decode a log; undecodable lines (a torn tail, garbage) are skipped with a warning."""
    return list(_decode(data, where, 0, final=True))


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """No cyclic garbage collection inside: reading a log makes a great many objects and
    no garbage, and the collector, triggered by their number, would walk every live one
    again and again (a third of a long load's time). Per thread of control: the first
    to enter turns it off, its exit turns it back on."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


#: Bytes read at a time by :func:`read_records`.
BLOCK = 1 << 20


def read_records(fd: int, where: str, end: int | None = None) -> Iterator[Record]:
    """The records of the log open as ``fd``, from its start to ``end`` (default: its
    end), read a block at a time: what :func:`parse` of the whole file returns, with the
    same warnings, never the whole file in memory. ``pread``: the descriptor's offset is
    left alone."""
    decoder = _decoder()
    offset, rest = 0, b""
    while True:
        want = BLOCK if end is None else min(BLOCK, end - offset)
        block = os.pread(fd, want, offset) if want > 0 else b""
        if not block:
            break
        offset += len(block)
        data = rest + block if rest else block
        cut = data.rfind(b"\n") + 1
        if not cut:
            rest = data
            continue
        rest = data[cut:]
        with bulk():
            try:
                decoded = decoder.decode_lines(data[:cut])
            except msgspec.DecodeError:
                decoded = None
        if decoded is None:  # a bad line: line by line, with its number (counted now)
            start = offset - len(data)
            decoded = list(_decode(data[:cut], where, _lines(fd, start), final=False))
        yield from decoded
    if rest:
        yield from _decode(rest, where, _lines(fd, offset - len(rest)), final=True)


def _lines(fd: int, end: int) -> int:
    """How many lines the log has before byte ``end``."""
    count = position = 0
    while position < end:
        block = os.pread(fd, min(BLOCK, end - position), position)
        if not block:
            break
        count += block.count(b"\n")
        position += len(block)
    return count


def _decode(data: bytes, where: str, before: int, *, final: bool) -> Iterator[Record]:
    """The records of complete lines (``final``: the end of the log, its last line maybe
    cut), ``before`` lines into the log (for the warnings)."""
    if not data:
        return
    decoder = _decoder()
    with bulk():
        try:
            decoded = decoder.decode_lines(data)
        except msgspec.DecodeError:
            decoded = None
    if decoded is not None:
        yield from decoded
        return
    lines = data.split(b"\n")
    if not final:
        lines.pop()  # the empty piece after the last newline
    for number, line in enumerate(lines, before + 1):
        if not line.strip():
            continue
        try:
            yield decoder.decode(line)
        except msgspec.DecodeError as exc:
            torn = final and number == before + len(lines)
            log.warning(
                "skipping a torn line of a session log" if torn else "skipping a bad log line",
                path=where,
                line=number,
                error=str(exc),
            )


def meta_of(session_id: str, records: Iterable[Record]) -> Meta | None:
    """The index entry a log implies (used when the sidecar is missing or unreadable)."""
    fold = MetaFold(session_id)
    for record in records:
        fold.feed(record)
    return fold.meta


class MetaFold:
    """:func:`meta_of`, a record at a time (``meta`` so far)."""

    __slots__ = ("meta", "session_id")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.meta: Meta | None = None

    def feed(self, record: Record) -> None:
        meta = self.meta
        kind = type(record)
        if kind is Update:
            update: Any = cast(Update, record).update
            if type(update) is t.SessionInfoUpdate and update.title is not UNSET and meta:
                meta.title = update.title
            return
        if kind is AddMessage:
            return
        if isinstance(record, Header):
            self.meta = Meta(
                id=self.session_id,
                cwd=record.cwd,
                additional_directories=list(record.additional_directories),
                created_at=record.created_at,
                updated_at=record.created_at,
            )
        elif meta is None:
            return
        elif isinstance(record, Prompt | Steer | TurnEnd):
            meta.updated_at = max(meta.updated_at, record.at)
            if isinstance(record, TurnEnd):
                meta.turns = (meta.turns or 0) + 1
        elif isinstance(record, Roots):
            meta.cwd, meta.additional_directories = record.cwd, list(record.additional_directories)
        elif isinstance(record, ClientTitle):
            meta.title, meta.titled_by_client = record.title, True
            meta.updated_at = max(meta.updated_at, record.at)
        elif isinstance(record, Archived):
            meta.archived = record.archived
        elif (
            isinstance(record, Update)
            and isinstance(record.update, t.SessionInfoUpdate)
            and record.update.title is not UNSET
        ):
            meta.title = record.update.title
