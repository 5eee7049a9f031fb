"""The package type-checks (mypy --strict) and lints clean (ruff), and stdout stays the
protocol's: no print() in the agent."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_mypy_strict() -> None:
    result = _run("mypy", "acp_agent")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff() -> None:
    result = _run("ruff", "check", "acp_agent", "tools")
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_print_to_stdout_in_the_agent() -> None:
    """stdout belongs to the protocol: the agent package never calls print()."""
    offenders = []
    for path in (ROOT / "acp_agent").rglob("*.py"):
        if path.parent == ROOT / "acp_agent" / "human":  # the terminal mode owns its terminal
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"^\s*print\(", line) and "file=sys.stderr" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{n}")
    assert offenders == []
