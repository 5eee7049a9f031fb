"""ripgrep (``rg``) under grep and glob: which files a search looks at, and the search.

Why ripgrep: the issue was ignore rules (a ``venv/`` listed in ``.gitignore`` buried the
one real match under 4,609 tokens of site-packages). Doing what git does is more than a
pattern matcher: ``.gitignore`` files at every level (relative to their directory, with
negations, directory-only patterns, a negation unable to re-include a file whose
directory is excluded), ``.git/info/exclude``, the global excludes file named by
``core.excludesFile`` (default ``$XDG_CONFIG_HOME/git/ignore``), ``.ignore`` (also
outside git repositories), their precedence, and the parents of the searched directory.
ripgrep's ``ignore`` crate is the reference implementation the best agents use (Claude
Code, opencode and codex all search with it), and it brings the rest of what grep needs:
context lines, files-only and count modes, case folding, globs and file types,
multiline matches, binary files skipped, long lines cut (``--max-columns``), in a few
milliseconds. The wheels of the PyPI package ``ripgrep`` (unofficial builds of the
upstream release, for Linux, macOS and Windows) install ``rg`` beside our interpreter:
a dependency of this package, found there (:func:`rg_binary`), else on ``PATH``; a
missing one is a clear error, never a silent fallback.

Measured (``tools/bench.py --only search``: a git repository with ``src/``, a 5,000-file
``venv/`` and ``build/`` in ``.gitignore``): see the README's figures. A Python walk
with ``pathspec`` was the alternative: the ignore semantics above would have been ours
to get right, and a walk of a large tree several times slower.

Every run gets ``--no-config`` (a ``RIPGREP_CONFIG_PATH`` could add ``--pre``, which runs
a program per file), never ``--follow`` (no symlink is followed out of the roots, or at
all while walking), ``--hidden`` with the version-control directories excluded (``.git``,
``.hg``, ``.svn``...: hidden files such as ``.github/`` are searched), and the
environment of commands (the agent's without its secrets; ``HOME`` and
``XDG_CONFIG_HOME`` say where the global excludes are). rg's regular expressions are
Rust's (no look-around, no backreferences): the tool descriptions say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import sys
import sysconfig
from collections.abc import AsyncGenerator, Mapping, Sequence

from ..errors import ToolError

#: Directories of version control systems: never searched (hidden or not).
VCS_DIRS = (".git", ".hg", ".svn", ".bzr", ".jj", "_darcs", "CVS", ".sl")
#: Files larger than this are not searched.
MAX_FILE_SIZE = "10M"

_EXE = "rg.exe" if sys.platform == "win32" else "rg"


@functools.cache
def rg_binary() -> str:
    """The ``rg`` the ``ripgrep`` wheel installed beside this interpreter (its scripts
    directory, the user's when installed with ``--user``), else one on ``PATH``."""
    places = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    with contextlib.suppress(KeyError):
        places.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    for place in places:
        candidate = os.path.join(place, _EXE)
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(_EXE)
    if found is None:
        raise ToolError(
            "grep and glob need ripgrep (rg), which acp-agent installs with the Python package "
            "`ripgrep`; it is missing here. Reinstall acp-agent (or `pip install ripgrep`)."
        )
    return found


def base_args() -> list[str]:
    """What every search runs with (see the module's docstring)."""
    args = [rg_binary(), "--no-config", "--hidden", "--color=never",
            "--max-filesize", MAX_FILE_SIZE]  # fmt: skip
    for name in VCS_DIRS:
        args += ["--glob", f"!{name}"]
    return args


class RgError(ToolError):
    """rg refused the search (a bad regular expression or glob): its own words."""


async def lines(
    args: Sequence[str], cwd: str, env: Mapping[str, str] | None
) -> AsyncGenerator[bytes, None]:
    """The lines rg writes (without their newline), read as it writes them; rg is killed
    when the caller stops early (or is cancelled). Raises :class:`RgError` when rg
    exits with an error and said nothing on stdout."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *args, cwd=cwd, env=dict(env) if env is not None else None,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    except OSError as exc:
        raise ToolError(f"cannot run ripgrep ({args[0]}): {exc.strerror or exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    errors = asyncio.ensure_future(_drain(proc.stderr))
    said = False
    finished = False
    try:
        while True:
            try:
                line = await proc.stdout.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:
                line = end.partial
                if not line:
                    break
            except asyncio.LimitOverrunError:  # a line past the stream's buffer: skipped
                await proc.stdout.read(65536)
                continue
            said = True
            yield line.rstrip(b"\n")
        code = await proc.wait()
        finished = True
        stderr = (await errors).decode("utf-8", "replace").strip()
        if code == 2 and not said and stderr:
            raise RgError(_first_error(stderr))
    finally:
        if not finished:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
        errors.cancel()


async def _drain(stream: asyncio.StreamReader, keep: int = 8192) -> bytes:
    """All of ``stream`` read (rg never blocks on a full pipe), its first ``keep`` bytes kept."""
    kept = b""
    while chunk := await stream.read(65536):
        kept += chunk[: max(0, keep - len(kept))]
    return kept


def _first_error(stderr: str) -> str:
    """rg's complaint, shortened: a regex parse error keeps its caret lines."""
    text = stderr.removeprefix("rg: ").strip()
    text = text.replace("with the --multiline flag (or -U for short)", "(`multiline: true`)")
    if "regex parse error" in text:
        return "invalid regular expression (ripgrep's syntax, Rust's regex):\n" + text[:600]
    if "glob" in text.lower():
        return f"invalid glob: {text[:300]}"
    return f"ripgrep failed: {text[:300]}"
