"""Checkpoints: what a turn changed in the workspace, kept so that ``/undo`` and
``/rewind`` can put it back.

Before a turn changes the workspace the :class:`Recorder` of its top-level session (a
subagent's changes belong to its parent's turn) records what it needs:

* for every path the agent's own tools are about to write, move or delete (the paths a
  writing call declares, ``CallInfo.paths`` with ``write`` access: the same ones the
  permission policy judged, so every tool that writes, ``apply_patch`` included, and both
  routes of a write, the editor's ``fs/write_text_file`` and the disk, pass here once,
  before the call runs), its content and mode, or its absence (a directory: each file in
  it), exactly;
* before the first call that writes or runs a command, where git is installed, a snapshot
  of the whole workspace in a shadow repository (``shadow``: never a ``.git``, the
  workspace's ignore rules honoured), so that what commands change is found too. A
  command's own declared path (the whole workspace) is not walked: the snapshot is how
  its changes are known, so ``/undo`` never touches a repository's ``.git``.

When the turn ends, what changed (the paths recorded, and those the snapshot then and now
tell apart) becomes a :class:`~acp_agent.sessions.records.Checkpoint` in the session's
log: each path's state before and after (SHA-256, mode). The bytes before are kept in
``<state>/checkpoints/<session id>/blobs/<sha256>`` (content-addressed); a file larger
than ``max-file-size`` is known by its hash only and reported as not restorable. The
directory is bounded by ``max-size`` (the oldest checkpoints are dropped past it, and
the user told) and deleted with the session.

Putting back (:func:`plan`, :func:`put_back`) compares each path with what the turn left:
a path someone else changed since is a conflict, never overwritten without the user's
yes (the handlers ask).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .. import log
from ..config import Checkpoints as Settings
from ..sessions.records import Checkpoint, FileChange, FileState, Touched, now_iso
from ..sessions.session import Session
from .shadow import (
    Changed,
    Shadow,
    ShadowError,
    available,
    file_sha256,
    private_dirs,
    stand_in,
    tree_size,
)

MAX_DIR_FILES = 5_000
"""Files recorded under one directory a tool moves."""
ABSENT = FileState()


class Store:
    """The process's checkpoints, one directory per session under ``<state>/checkpoints``."""

    def __init__(self, state_dir: str, settings: Settings, env: Mapping[str, str]) -> None:
        self.root = os.path.join(state_dir, "checkpoints")
        self.state_dir = state_dir
        self.settings = settings
        self.env = env
        self.git = settings.snapshot and available(env)
        self._shadows: dict[str, Shadow | None] = {}

    def dir_of(self, session_id: str) -> str:
        return os.path.join(self.root, session_id)

    def blob_path(self, session_id: str, digest: str) -> str:
        return os.path.join(self.dir_of(session_id), "blobs", digest)

    def begin(self, session: Session, turn: str) -> None:
        """A prompt of a top-level session starts its turn: record what it changes."""
        if self.settings.enabled and session.parent is None:
            session.recorder = Recorder(self, session, turn)

    def recorder_of(self, session: Session) -> Recorder | None:
        """The recorder of the turn ``session`` works for (its top-level session's)."""
        recorder = session.root.recorder
        return recorder if isinstance(recorder, Recorder) else None

    async def finish(self, session: Session) -> list[str]:
        """The turn ended: record its checkpoint (before its end); the turns whose
        checkpoints were dropped to stay within the cap are returned (the caller tells)."""
        recorder = self.recorder_of(session)
        session.recorder = None
        if recorder is None:
            return []
        checkpoint = await recorder.finish()
        if checkpoint is None:
            return []
        session.record_checkpoint(checkpoint)
        return await asyncio.to_thread(self._within_cap, session)

    def shadow(self, session: Session) -> Shadow | None:
        """The session's shadow repository (``None``: no git, or it failed before)."""
        if not self.git:
            return None
        if session.id not in self._shadows:
            try:
                self._shadows[session.id] = Shadow(
                    os.path.join(self.dir_of(session.id), "shadow"), session.cwd, self.env,
                    self.settings.max_file_size, exclude=[self.state_dir],
                )  # fmt: skip
            except ShadowError:
                self._shadows[session.id] = None
        return self._shadows[session.id]

    def give_up_shadow(self, session: Session, why: str) -> None:
        log.warning("workspace snapshots are off for this session", reason=why)
        self._shadows[session.id] = None

    def keep(self, session_id: str, data: bytes) -> str:
        """Store ``data`` (content-addressed); its SHA-256."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.blob_path(session_id, digest)
        if not os.path.exists(path):
            private_dirs(os.path.dirname(path))
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb", opener=lambda p, f: os.open(p, f, 0o600)) as fh:
                fh.write(data)
            os.replace(tmp, path)
        return digest

    def read(self, session_id: str, digest: str) -> bytes:
        with open(self.blob_path(session_id, digest), "rb") as fh:
            return fh.read()

    def _within_cap(self, session: Session) -> list[str]:
        """Drop the oldest checkpoints while the session's directory is over the cap."""
        directory = self.dir_of(session.id)
        live = session.turnlog.live()
        dropped: list[str] = []
        while live and tree_size(directory) > self.settings.max_size:
            dropped.append(live.pop(0).turn)
            self._forget(session.id, live)
        if dropped:
            session.record_undone(dropped, dropped=True)
        return dropped

    def _forget(self, session_id: str, live: Sequence[Checkpoint]) -> None:
        """Delete what no live checkpoint needs; compact the shadow repository."""
        needed = {c.before.sha256 for cp in live for c in cp.files if c.before.kept}
        blobs = os.path.join(self.dir_of(session_id), "blobs")
        with contextlib.suppress(OSError):
            for name in os.listdir(blobs):
                if name not in needed:
                    os.unlink(os.path.join(blobs, name))
        shadow = self._shadows.get(session_id)
        if shadow is not None:
            with contextlib.suppress(ShadowError):
                shadow.collect()

    def forget(self, session: Session) -> None:
        """Checkpoints were taken back: their kept bytes go when nothing else needs them
        (a worker thread)."""
        self._forget(session.id, session.turnlog.live())

    async def delete(self, session_id: str) -> None:
        """The session was deleted: so are its checkpoints."""
        self._shadows.pop(session_id, None)
        await asyncio.to_thread(shutil.rmtree, self.dir_of(session_id), True)


class Recorder:
    """One top-level turn's changes, recorded before they happen."""

    def __init__(self, store: Store, session: Session, turn: str) -> None:
        self.store = store
        self.session = session
        self.turn = turn
        self.before: dict[str, FileState] = {}
        self.tree: str | None = None
        self.snapshot_tried = False
        self._lock = asyncio.Lock()

    async def before_change(self, paths: Sequence[str], *, snapshot: bool = True) -> None:
        """The turn is about to write ``paths`` (absolute, as checked) or run a command:
        what they are now is kept, and recorded in the session's log before the change
        (a turn cut short can still be put back, those paths at least)."""
        async with self._lock:  # subagents' calls may come side by side
            known = set(self.before)
            await asyncio.to_thread(self._record, paths, snapshot)
            new = {p: s for p, s in self.before.items() if p not in known}
            if new:
                await self.session.record_touched(Touched(turn=self.turn, at=now_iso(),
                                                          files=new))  # fmt: skip

    def _record(self, paths: Sequence[str], snapshot: bool) -> None:
        if snapshot and not self.snapshot_tried:
            self.snapshot_tried = True
            shadow = self.store.shadow(self.session)
            if shadow is not None:
                try:
                    self.tree = shadow.snapshot()
                except ShadowError as exc:
                    self.store.give_up_shadow(self.session, str(exc))
        for path in paths:
            self._note(os.path.normpath(path))

    def _note(self, path: str) -> None:
        if path in self.before:
            return
        try:
            info = os.lstat(path)
        except OSError:
            self.before[path] = FileState(new_dirs=_missing_parents(path))
            return
        if stat.S_ISDIR(info.st_mode):
            for n, file in enumerate(_files_under(path)):
                if n >= MAX_DIR_FILES:
                    break
                self._note(file)
            return
        self.before[path] = self._state(path, keep=True)

    def _state(self, path: str, *, keep: bool) -> FileState:
        return state_of(path, self.session.id, self.store if keep else None,
                        self.store.settings.max_file_size)  # fmt: skip

    async def finish(self) -> Checkpoint | None:
        return await asyncio.to_thread(self._finish)

    def _finish(self) -> Checkpoint | None:
        before = dict(self.before)
        for path, state in list(before.items()):  # created as a directory: its files
            if state.kind == "absent" and os.path.isdir(path) and not os.path.islink(path):
                del before[path]  # its files stand for it
                for file in _files_under(path):
                    rel = os.path.relpath(os.path.dirname(file), path)
                    depth = 1 + (0 if rel == "." else rel.count(os.sep) + 1)  # dirs made
                    before.setdefault(file, FileState(new_dirs=state.new_dirs + depth))
        shadow = self.store.shadow(self.session) if self.tree is not None else None
        if shadow is not None and self.tree is not None:
            try:
                for changed in shadow.changes(self.tree, shadow.snapshot()):
                    path = os.path.join(self.session.cwd, changed.path)
                    was = self._from_snapshot(shadow, changed)
                    if was is not None and _differs(before.get(path), was):
                        before[path] = was
            except ShadowError as exc:
                self.store.give_up_shadow(self.session, str(exc))
        files = []
        for path in sorted(before):
            after = self._state(path, keep=False)
            if _differs(before[path], after, mode=True):
                files.append(FileChange(path=path, before=before[path], after=after))
        if not files:
            return None
        return Checkpoint(turn=self.turn, at=now_iso(), files=files)

    def _from_snapshot(self, shadow: Shadow, changed: Changed) -> FileState | None:
        mode, sha = changed.mode, changed.sha
        if mode == "000000":
            return ABSENT
        if mode not in ("100644", "100755", "120000"):
            return None  # a nested repository: not ours to put back
        data = shadow.blob(sha)
        big = stand_in(data)
        if big is not None:
            return FileState(kind="file", sha256=big[0], size=big[1], mode=0o644)
        digest = self.store.keep(self.session.id, data)
        kind = "link" if mode == "120000" else "file"
        perms = 0o755 if mode == "100755" else 0o644 if kind == "file" else 0o777
        return FileState(kind=kind, sha256=digest, size=len(data), mode=perms, kept=True)


def state_of(path: str, session_id: str, store: Store | None, limit: int) -> FileState:
    """The state of ``path`` now; with ``store``, its bytes kept (up to ``limit``)."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            target = os.fsencode(os.readlink(path))
            digest = store.keep(session_id, target) if store else hashlib.sha256(target).hexdigest()
            return FileState(kind="link", sha256=digest, mode=0o777, size=len(target),
                             kept=store is not None)  # fmt: skip
        if not stat.S_ISREG(info.st_mode):
            return FileState(kind="other", mode=stat.S_IMODE(info.st_mode))
        mode = stat.S_IMODE(info.st_mode)
        if info.st_size > limit or store is None:
            return FileState(kind="file", sha256=file_sha256(path), mode=mode, size=info.st_size)
        with open(path, "rb") as fh:
            data = fh.read()
        return FileState(kind="file", sha256=store.keep(session_id, data), mode=mode,
                         size=len(data), kept=True)  # fmt: skip
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return FileState(kind="other")


def _differs(a: FileState | None, b: FileState, *, mode: bool = False) -> bool:
    if a is None:
        return True
    return (a.kind, a.sha256) != (b.kind, b.sha256) or (mode and a.mode != b.mode)


def _missing_parents(path: str) -> int:
    count, here = 0, os.path.dirname(path)
    while here and not os.path.lexists(here) and os.path.dirname(here) != here:
        count, here = count + 1, os.path.dirname(here)
    return count


def _files_under(directory: str) -> Iterable[str]:
    for here, dirs, files in os.walk(directory):  # links are not followed
        dirs.sort()
        for name in sorted(files):
            yield os.path.join(here, name)
        for name in dirs:
            if os.path.islink(os.path.join(here, name)):
                yield os.path.join(here, name)


# ---------------------------------------------------------------------- putting back


@dataclass(slots=True)
class Step:
    """One path to put back: to ``target``; the turns left it ``expected``; it is
    ``current`` now."""

    path: str
    target: FileState
    expected: FileState
    current: FileState

    @property
    def done(self) -> bool:
        """Already as it was."""
        return not _differs(self.current, self.target, mode=True)

    @property
    def conflict(self) -> bool:
        """Changed by someone else since the turns left it."""
        return _differs(self.current, self.expected)

    @property
    def restorable(self) -> bool:
        return self.target.kind == "absent" or self.target.kept


def plan(checkpoints: Sequence[Checkpoint], session_id: str, limit: int) -> list[Step]:
    """What putting back ``checkpoints`` (oldest first) means for each path (a worker
    thread: the current state is read)."""
    target: dict[str, FileState] = {}
    expected: dict[str, FileState] = {}
    for checkpoint in checkpoints:
        for change in checkpoint.files:
            target.setdefault(change.path, change.before)
            expected[change.path] = change.after
    steps = [Step(p, target[p], expected[p], state_of(p, session_id, None, 1 << 62))
             for p in sorted(target)]  # fmt: skip
    return [s for s in steps if not s.done]


def put_back(store: Store, session_id: str, step: Step) -> None:
    """Make ``step.path`` what it was (a worker thread). Raises ``OSError``."""
    path, target = step.path, step.target
    if os.path.islink(path) or (step.current.kind != "absent" and not os.path.isdir(path)):
        os.unlink(path)  # (a directory in its place is an error the caller reports)
    if target.kind == "absent":
        here = os.path.dirname(path)
        for _ in range(target.new_dirs):  # the directories the turn made, if now empty
            try:
                os.rmdir(here)
            except OSError:
                break
            here = os.path.dirname(here)
        return
    data = store.read(session_id, target.sha256)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if target.kind == "link":
        os.symlink(os.fsdecode(data), path)
        return
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.acp-undo.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, target.mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
