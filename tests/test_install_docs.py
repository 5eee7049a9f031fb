"""The README's set-up, followed as written: the quick start's venv, `uv tool install` and
`pipx install` of a clone (offline, from the wheelhouse test_packaging.py builds), each
command then run the way the editor settings run it; and the editor settings themselves:
the installed command by its path, no environment entry that could stand in for a key,
the PyPI form only as "once published"."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import ROOT
from .limits import limit
from .schema_check import SchemaChecker
from .test_packaging import (  # noqa: F401 (the fixture, shared)
    NOT_SOURCE,
    InstalledAgent,
    hello_round_trip,
    pip_env,
    system_path,
    wheelhouse,
)

pytestmark = pytest.mark.xdist_group("packaging")

README = (ROOT / "README.md").read_text()
PLACEHOLDER = "/path/to/acp-agent"
COMMAND = f"{PLACEHOLDER}/.venv/bin/acp-agent"


def section(title: str) -> str:
    start = README.index(f"\n{title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of ``text``: (language, body)."""
    return re.findall(r"```(\w*)\n(.*?)```", text, re.S)


# ---------------------------------------------------------------- what the README says


def test_every_editor_setting_runs_the_installed_command_and_no_key() -> None:
    editors = section("## Editors")
    snippets = [body for lang, body in blocks(editors) if lang in ("json", "lua", "elisp")]
    assert len(snippets) == 5  # Zed, JetBrains, CodeCompanion, avante.nvim, Emacs
    for body in snippets:
        assert COMMAND in body, body
        assert "uvx" not in body, body
        # no environment entry at all: none can stand in for a key (CodeCompanion sends
        # an unset variable's name as its value)
        assert not re.search(r'"env"\s*:|\benv\s*=|API_KEY\s*=|"[A-Z_]*API_KEY"\s*:', body), body
    for lang, body in blocks(editors):
        if lang == "json":
            servers = json.loads(body)["agent_servers"]
            assert [s["command"] for s in servers.values()] == [COMMAND]
    assert "acp_providers" in editors  # avante.nvim
    for mention in re.finditer(r"uvx", README):
        sentence = README[max(0, mention.start() - 120):mention.end()]
        assert "published" in sentence, sentence  # the PyPI form only "once published"
    for mention in re.finditer(r"published", README):  # never said to be, only "once"
        assert "once" in README[max(0, mention.start() - 40):mention.start()].lower()


def test_the_bench_and_check_commands_name_the_venvs_python() -> None:
    assert not re.search(r"(?<![/\w])python tools/", README)


# ---------------------------------------------------------------- following it


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The checkout's sources, as a fresh clone has them."""
    where = tmp_path / "acp-agent"
    shutil.copytree(ROOT, where, ignore=NOT_SOURCE)
    return where


def offline_env(wheelhouse: Path, home: Path) -> dict[str, str]:  # noqa: F811
    """pip, uv and pipx installing from the wheelhouse only, into ``home``."""
    env = pip_env()
    env.pop("PIP_NO_CACHE_DIR", None)
    env |= {
        "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_BIN_HOME": str(home / "bin"),
        "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse), "PIP_NO_CACHE_DIR": "1",
        "UV_OFFLINE": "1", "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(wheelhouse),
        "UV_CACHE_DIR": str(home / "uv-cache"), "UV_PYTHON_DOWNLOADS": "never",
        "UV_PYTHON": getattr(sys, "_base_executable", sys.executable),
        "UV_TOOL_DIR": str(home / "uv-tools"), "UV_TOOL_BIN_DIR": str(home / "bin"),
        "PIPX_HOME": str(home / "pipx"), "PIPX_BIN_DIR": str(home / "bin"),
        "PIPX_MAN_DIR": str(home / "man"), "PIPX_DEFAULT_PYTHON": getattr(
            sys, "_base_executable", sys.executable),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{system_path()}",
    }  # fmt: skip
    return env


def shell(line: str, *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["sh", "-c", line], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=limit(600))
    assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def install_lines() -> dict[str, str]:
    """The install commands as the README gives them."""
    quick = next(body for lang, body in blocks(section("## Quick start")) if lang == "sh")
    tool = next(body for _, body in blocks(section("### Installing the command"))
                if "tool install" in body)
    uv, _, pipx = tool.strip().partition("# or:")
    return {"quick start": quick.strip(), "uv": uv.strip(), "pipx": pipx.strip()}


# A whole install of the dependencies (from the wheelhouse) and a venv: minutes on a loaded
# machine, more than the usual bound of one test.
@pytest.mark.timeout(limit(600))
@pytest.mark.parametrize("how", ["quick start", "uv", "pipx"])
async def test_the_documented_install_gives_the_command_editors_run(
    how: str, clone: Path, wheelhouse: Path, tmp_path: Path,  # noqa: F811
    checker: SchemaChecker,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = offline_env(wheelhouse, home)
    line = install_lines()[how].replace(PLACEHOLDER, str(clone))
    assert (how == "quick start") == line.startswith("python3 -m venv .venv")
    done = shell(line, cwd=clone, env=env)
    if how == "quick start":  # it ran the demo: the answer on stdout, the rest on stderr
        assert "That was a complete agent turn" in done.stdout and "Plan" in done.stderr
        command = clone / ".venv" / "bin" / "acp-agent"
        assert str(command) == COMMAND.replace(PLACEHOLDER, str(clone))
    else:
        command = home / "bin" / "acp-agent"
    assert command.is_file(), f"{how}: no {command}"
    left = sorted(p.name for p in clone.iterdir())  # the clone is left as it was
    assert "build" not in left and not [n for n in left if n.endswith(".egg-info")], left
    # as an editor starts it: the command by its path, outside the clone, nothing but a
    # PATH without our venv and a HOME
    outside = tmp_path / "outside"
    (outside / "ws").mkdir(parents=True)
    run_env = {"PATH": system_path(), "HOME": str(home)}
    version = subprocess.run([str(command), "--version"], env=run_env, cwd=outside,
                             capture_output=True, text=True, timeout=limit(60))
    assert version.returncode == 0 and version.stdout.startswith("acp-agent "), version.stderr
    agent = InstalledAgent(checker, [str(command)], env=run_env, cwd=outside)
    await hello_round_trip(agent, outside / "ws")
