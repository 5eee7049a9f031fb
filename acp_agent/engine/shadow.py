"""A shadow git repository: snapshots of a whole workspace, so that what a turn's commands
changed can be found and put back (``checkpoints``).

It lives in the session's checkpoint directory (``<state>/checkpoints/<id>/shadow``),
never in the user's ``.git``: its own git directory and index, the workspace as its work
tree. A snapshot adds the workspace to the shadow index (``git add -A``: git's own stat
cache makes a snapshot of an unchanged tree cheap) and writes a tree; two trees compared
(``git diff-tree``) are the paths that changed between them, and a tree's blobs the
contents before.

Ignore rules are the workspace's ``.gitignore`` files (git's own ``.git`` directories
are never added; nested repositories become links, not content). A file larger than the
configured ``max-file-size`` is not copied: its entry is a small stand-in naming its
SHA-256 and size, so a change is still seen, and reported as not restorable. Binary
files under it are kept like any other (byte for byte: no attribute applies). Git keeps
a file's executable bit, not its other permission bits: a file a command changed comes
back 0644 or 0755.

Git runs as ``gitstate`` runs it, with nothing configured run: no hooks, no fsmonitor,
no transports, no pager; neither the system's nor the user's configuration
(``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``), every inherited ``GIT_*``
variable dropped, the shadow's ``info/attributes`` unsetting every attribute that would
change bytes on the way in or out (line endings, filters, encodings), found on the
absolute entries of ``PATH`` only, with the environment commands get (no secrets).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .gitstate import SAFE_CONFIG, SAFE_ENV, _git_program

TIMEOUT = 120.0
MAX_FILES = 50_000
"""A workspace with more candidate files than this in one snapshot is not snapshotted."""
STAND_IN = b"acp-agent checkpoint: not kept\n"
_CONFIG = (*SAFE_CONFIG, "core.autocrlf=false", "core.safecrlf=false", "core.symlinks=true",
           "core.quotepath=false", "core.bare=false", "gc.auto=0", "core.logAllRefUpdates=false",
           "core.precomposeunicode=false", "advice.addEmbeddedRepo=false",
           "core.sharedRepository=0600")  # fmt: skip
_ATTRIBUTES = "* -text -eol -crlf -filter -ident -working-tree-encoding -export-subst\n"


class ShadowError(Exception):
    """A snapshot could not be taken (git failed, the workspace is too large)."""


@dataclass(frozen=True, slots=True)
class Changed:
    """A path (relative to the work tree) that differs between two snapshots."""

    path: str
    mode: str
    """Its mode before (``000000``: absent before; ``100644``, ``100755``, ``120000``)."""
    sha: str
    """Its blob before."""


def available(env: Mapping[str, str]) -> bool:
    return _git_program(env) is not None


class Shadow:
    def __init__(self, directory: str, worktree: str, env: Mapping[str, str],
                 max_file_size: int, exclude: Sequence[str] = ()) -> None:  # fmt: skip
        self.dir = directory
        self.worktree = worktree
        self.max_file_size = max_file_size
        self.exclude = list(exclude)
        git = _git_program(env)
        if git is None:
            raise ShadowError("git is not installed")
        self.git = git
        clean = {k: v for k, v in env.items() if not k.startswith("GIT_")}
        self.env = {**clean, **SAFE_ENV, "GIT_DIR": directory, "GIT_WORK_TREE": worktree,
                    "GIT_INDEX_FILE": os.path.join(directory, "index"),
                    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                    "LC_ALL": "C"}  # fmt: skip
        self._stand_ins: dict[tuple[str, int, int, int], str] = {}

    def _run(self, *args: str, data: bytes | None = None) -> bytes:
        flags = [arg for setting in _CONFIG for arg in ("-c", setting)]
        try:
            out = subprocess.run(
                [self.git, "--no-pager", *flags, *args], cwd=self.worktree, env=self.env,
                input=data or b"", capture_output=True, timeout=TIMEOUT, check=True,
                umask=0o077,  # the state directory is private: what git makes is too
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            said = exc.stderr.decode(errors="replace").strip().splitlines()
            why = said[-1] if said else f"status {exc.returncode}"
            raise ShadowError(f"git {args[0]} failed: {why}") from None
        except (OSError, subprocess.SubprocessError) as exc:
            raise ShadowError(f"git {args[0]} failed: {exc}") from None
        return out.stdout

    def _init(self) -> None:
        if os.path.isfile(os.path.join(self.dir, "HEAD")):
            return
        private_dirs(self.dir)
        self._run("init", "--quiet", "--template=", "--shared=0600")  # no sample hooks
        info = os.path.join(self.dir, "info")
        os.makedirs(info, mode=0o700, exist_ok=True)
        with open(os.path.join(info, "attributes"), "w", encoding="utf-8", opener=_private) as fh:
            fh.write(_ATTRIBUTES)
        with open(os.path.join(info, "exclude"), "w", encoding="utf-8", opener=_private) as fh:
            for path in self.exclude:  # the state directory, when it is inside the workspace
                rel = os.path.relpath(path, self.worktree)
                if not rel.startswith(".."):
                    fh.write("/" + rel.replace(os.sep, "/").replace("*", "\\*") + "/\n")

    def snapshot(self) -> str:
        """The workspace now, as a tree (its id)."""
        self._init()
        listed = self._run("ls-files", "-z", "-m", "-o", "--exclude-standard")
        candidates = [p for p in listed.decode("utf-8", "surrogateescape").split("\0") if p]
        if len(candidates) > MAX_FILES:
            raise ShadowError(f"the workspace has more than {MAX_FILES:,} files to snapshot")
        big = [p for p in dict.fromkeys(candidates) if self._not_kept(p)]
        specs = [".", *(f":(exclude,literal){p}" for p in big)]
        self._run("add", "-A", "--ignore-errors", "--pathspec-from-file=-",
                  "--pathspec-file-nul", data=_z(specs))  # fmt: skip
        if big:  # (their entries carry no stat data: listed again each time, hashed once)
            lines = [f"100644 {self._stand_in(path)}\t{path}" for path in big]
            self._run("update-index", "-z", "--index-info", data=_z(lines))
        tree = self._run("write-tree").decode().strip()
        self._run("update-ref", "refs/acp/last", tree)
        return tree

    def _not_kept(self, rel: str) -> bool:
        path = os.path.join(self.worktree, rel)
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                return False
            return info.st_size > self.max_file_size
        except OSError:
            return False  # gone meanwhile: git sees it gone too

    def _stand_in(self, rel: str) -> str:
        """The id of the stand-in blob of a file not kept (made once per version of it)."""
        path = os.path.join(self.worktree, rel)
        info = os.stat(path)
        key = (path, info.st_size, info.st_mtime_ns, info.st_ino)
        sha = self._stand_ins.get(key)
        if sha is None:
            data = STAND_IN + f"sha256 {file_sha256(path)}\nsize {info.st_size}\n".encode()
            sha = self._run("hash-object", "-w", "--stdin", data=data).decode().strip()
            if len(self._stand_ins) > 10_000:
                self._stand_ins.clear()
            self._stand_ins[key] = sha
        return sha

    def changes(self, before: str, after: str) -> list[Changed]:
        """The paths that differ between two snapshots, with what they were before."""
        out = self._run("diff-tree", "-r", "-z", "--no-renames", before, after)
        fields = out.decode("utf-8", "surrogateescape").split("\0")
        found: list[Changed] = []
        for head, path in zip(fields[0::2], fields[1::2], strict=False):
            if not head.startswith(":"):
                continue
            old_mode, _, old_sha, _, _ = head[1:].split(" ")
            found.append(Changed(path, old_mode, old_sha))
        return found

    def blob(self, sha: str) -> bytes:
        return self._run("cat-file", "blob", sha)

    def size(self) -> int:
        """Bytes the shadow repository takes."""
        return tree_size(self.dir)

    def collect(self) -> None:
        """Drop what no snapshot but the last needs."""
        self._run("gc", "--prune=now", "--quiet")


def stand_in(data: bytes) -> tuple[str, int] | None:
    """``(sha256, size)`` of a file the snapshot did not keep (``data``: its entry)."""
    if not data.startswith(STAND_IN):
        return None
    fields = dict(line.split(" ", 1) for line in data[len(STAND_IN) :].decode().splitlines())
    return fields["sha256"], int(fields["size"])


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def tree_size(directory: str) -> int:
    total = 0
    for here, _, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(here, name)).st_size
    return total


def private_dirs(path: str) -> None:
    """``path`` and the directories above it that it makes, each 0700."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        os.makedirs(directory, mode=0o700, exist_ok=True)


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def _z(items: Sequence[str]) -> bytes:
    return b"".join(item.encode("utf-8", "surrogateescape") + b"\0" for item in items)
