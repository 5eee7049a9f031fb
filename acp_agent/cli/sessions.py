"""``acp-agent sessions [--all]``: the saved sessions, newest first, one a line: id, last
activity, turns, title (and with ``--all`` the directory), read from the state directory
through its index (no agent is started). ``acp-agent chat --resume ID`` resumes one."""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from ..sessions.records import Meta
    from ..sessions.store import Store


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from .flags import agent_flags

    p = argparse.ArgumentParser(
        prog="acp-agent sessions",
        description="List the saved sessions of this directory, newest first.",
        epilog="Resume one with `acp-agent chat --resume ID` (the start of the id will do),"
        " or the latest of a directory with `acp-agent chat --continue`.",
    )
    p.add_argument("--all", action="store_true", help="every directory's sessions")
    p.add_argument("--cwd", default=None, help="the directory (default: current)")
    agent_flags(p, shown=("--state-dir", "--config"))
    return p


def main(command: str, argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from .. import config as config_mod
    from .flags import load_config

    try:
        config = load_config(args)
    except config_mod.ConfigError as exc:
        sys.stderr.write(f"acp-agent: {exc}\n")
        return 2
    state_dir = config.state_dir or config_mod.default_state_dir()
    cwd = os.path.normpath(os.path.abspath(os.path.expanduser(args.cwd or os.getcwd())))
    store = open_store(state_dir)
    try:
        metas = listing(store, None if args.all else cwd)
        rows = [(m, turns(store, m)) for m in metas]
    finally:
        store.writer.close()
    if not rows:
        where = "" if args.all else f" in {cwd}"
        more = "" if args.all else " (acp-agent sessions --all lists every directory's)"
        sys.stderr.write(f"no saved sessions{where}{more}\n")
        return 0
    sys.stdout.write(table(rows, every=args.all, width=_width()))
    sys.stderr.write("resume one: acp-agent chat --resume ID\n")
    return 0


def open_store(state_dir: str) -> Store:
    from ..sessions.sessionindex import SessionIndex
    from ..sessions.store import Store

    return Store(state_dir, index=SessionIndex(state_dir))


def listing(store: Store, cwd: str | None) -> list[Meta]:
    """Every session (of ``cwd``), newest first, archived ones left out."""
    out: list[Meta] = []
    cursor: str | None = None
    while True:
        page, cursor = store.page(cwd, cursor, limit=500)
        out += page
        if cursor is None:
            return out


def turns(store: Store, meta: Meta) -> int:
    """The session's answered prompts (counted in its log for an entry too old to say)."""
    if meta.turns is not None:
        return meta.turns
    from ..sessions.records import TurnEnd

    try:
        return sum(isinstance(r, TurnEnd) for r in store.read(meta.id))
    except OSError:
        return 0


def table(rows: list[tuple[Meta, int]], *, every: bool, width: int | None) -> str:
    """Aligned columns; the title (last) cut to ``width`` on a terminal."""
    from ..human.resume import ago

    head = ["ID", "LAST ACTIVITY", "TURNS", *(["DIRECTORY"] if every else []), "TITLE"]
    body = [
        [m.id, ago(m.updated_at), str(n), *([m.cwd] if every else []), m.title or "(untitled)"]
        for m, n in rows
    ]
    sizes = [max(len(row[i]) for row in [head, *body]) for i in range(len(head) - 1)]
    lines = []
    for row in [head, *body]:
        cells = [cell.rjust(size) if i == 2 else cell.ljust(size)
                 for i, (cell, size) in enumerate(zip(row, sizes, strict=False))]  # fmt: skip
        line = "  ".join([*cells, row[-1]])
        if width is not None and len(line) > width:
            line = line[: width - 1] + "…"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _width() -> int | None:
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None
