"""Every check CI runs, in its order (README's test command ends with this script):

1. ruff on ``acp_agent/``, ``tests/`` and ``tools/``;
2. mypy --strict on ``acp_agent/`` and ``tests/`` (its cache in ``.mypy_cache`` makes
   later runs fast), beside the tests: one process on one core, where a fresh clone's
   ~40 s of it would leave the other core idle; its verdict is printed after theirs;
3. the whole test suite, two workers per core (pytest-xdist), under coverage; agent and other
   Python subprocesses are measured too (``[tool.coverage.run] patch`` in pyproject.toml);
4. the coverage report: branch coverage of ``acp_agent/``, which must reach the floor
   (``fail_under``), printed last.

    python tools/check.py                 # everything
    python tools/check.py -- -k cancel    # pytest arguments after --

Day to day, ``python -m pytest -m "not slow"`` runs the fast tests in seconds.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def step(title: str, *command: str) -> None:
    print(f"\n==> {title}: {shlex.join(command)}", flush=True)
    started = time.monotonic()
    code = subprocess.run(command, cwd=ROOT).returncode
    done(title, code, started)


def done(title: str, code: int, started: float) -> None:
    verdict = "ok" if code == 0 else f"FAILED (exit status {code})"
    print(f"<== {title}: {verdict} in {time.monotonic() - started:.0f} s", flush=True)
    if code != 0:
        sys.exit(code)


class Beside:
    """A step run beside the next ones, its output kept until :meth:`finish`."""

    def __init__(self, title: str, *command: str) -> None:
        print(f"\n==> {title} (beside the tests): {shlex.join(command)}", flush=True)
        self.title = title
        self.started = time.monotonic()
        self.output = tempfile.TemporaryFile()  # noqa: SIM115 (read, then closed, in finish)
        self.proc = subprocess.Popen(command, cwd=ROOT, stdout=self.output,
                                     stderr=subprocess.STDOUT)  # fmt: skip

    def finish(self) -> None:
        code = self.proc.wait()
        self.output.seek(0)
        print(f"\n==> {self.title}:", flush=True)
        sys.stdout.buffer.write(self.output.read())
        sys.stdout.flush()
        self.output.close()
        done(self.title, code, self.started)


#: Two pytest-xdist workers per processor: most end-to-end tests wait on an agent
#: subprocess, so two per core keep the processors busy (idle two-core VM: 100 s against
#: 107 s with one per core), and on a machine shared with other work the suite gets a
#: fair share of it (two busy loops on two cores: pytest 238 s against 285 s).
WORKERS = min(16, 2 * (os.cpu_count() or 1))


def main(pytest_args: list[str]) -> None:
    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]["report"][
        "fail_under"
    ]
    step("ruff", PY, "-m", "ruff", "check", "acp_agent", "tests", "tools")
    mypy = Beside("mypy", PY, "-m", "mypy")
    # Python writes the bytecode it compiles (as an installed package has it): with
    # PYTHONDONTWRITEBYTECODE set (some machines set it for every process) each of the
    # ~750 agent processes the tests start compiled the whole package again (a test of an
    # Anthropic turn: 2.9 s against 1.7 s).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    for stale in ROOT.glob(".coverage*"):
        stale.unlink()
    try:
        step("pytest", PY, "-m", "coverage", "run", "-m", "pytest", "-n", str(WORKERS),
             *pytest_args)  # fmt: skip
    except SystemExit:
        mypy.finish()  # (its verdict too, when the tests failed)
        raise
    mypy.finish()
    step("coverage combine", PY, "-m", "coverage", "combine", "--quiet")
    report = subprocess.run(
        [PY, "-m", "coverage", "report"], cwd=ROOT, capture_output=True, text=True
    )
    total = subprocess.run(
        [PY, "-m", "coverage", "report", "--format=total", "--fail-under=0"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()
    print(report.stdout + report.stderr, end="")
    verdict = "ok" if report.returncode == 0 else "BELOW THE FLOOR"
    print(f"\nBranch coverage of acp_agent/: {total} % (floor {floor} %): {verdict}")
    sys.exit(report.returncode)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    main(args)
