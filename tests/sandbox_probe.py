"""What a command may do, tried from inside it: ``python sandbox_probe.py OUTSIDE HIDDEN
STATE PORT`` (run in the workspace) prints one JSON object, each check ``true`` when the
command could do it. The sandbox tests run it on every route and compare."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path


def main() -> None:
    outside, hidden, state, port = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(
        sys.argv[4])  # fmt: skip

    def write(path: Path | str, mode: str = "w") -> None:
        with open(path, mode) as fh:
            fh.write("written by the probe\n")

    def connect() -> None:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()

    checks: dict[str, Callable[[], object]] = {
        "write_inside": lambda: write("inside.txt"),
        "modify_inside": lambda: write("existing.txt", "a"),
        "write_tmp": lambda: write(Path(os.environ.get("TMPDIR", "/tmp")) / "probe.txt"),
        "read_outside": lambda: (outside / "existing.txt").read_text(),
        "write_outside": lambda: write(outside / "new.txt"),
        "modify_outside": lambda: write(outside / "existing.txt", "a"),
        "write_through_link": lambda: write(Path("link-out") / "via-link.txt"),
        "write_through_dotdot": lambda: write(Path("..") / outside.name / "dotdot.txt"),
        "write_git_config": lambda: write(Path(".git") / "config", "a"),
        "write_nested_git_config": lambda: write(Path("vendor/lib/.git/config"), "a"),
        "write_nested_git_hook": lambda: write(Path("vendor/lib/.git/hooks/pre-commit")),
        "write_nested_repo": lambda: write(Path("vendor/lib/code.py"), "a"),
        "read_hidden": lambda: (hidden / "secret.txt").read_text(),
        "read_state": lambda: (state / "probe.txt").read_text(),
        "connect_loopback": connect,
    }
    result = {}
    for name, check in checks.items():
        try:
            check()
            result[name] = True
        except OSError:
            result[name] = False
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
