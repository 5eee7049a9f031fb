"""stdout stays the protocol's: no print() in the agent. (Type checking and linting run
before the tests, as their own steps: ``tools/check.py``.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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


def test_readme_test_command_is_what_ci_runs() -> None:
    """CI (`.ci/run`) runs exactly the test command the README gives a newcomer."""
    readme = (ROOT / "README.md").read_text()
    (command,) = re.findall(r"^python3 -m venv \.venv && .* tools/check\.py$", readme, re.M)
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == command
    assert command.endswith(".venv/bin/python tools/check.py")
