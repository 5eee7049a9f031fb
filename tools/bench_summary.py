"""For tools/bench.py: the agent installed from a wheel (what start-up is measured on), the
machine the figures come from, and the summary of the issue-17 goals as ratios to their
baselines."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_NOT_BUILT = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "__pycache__", "*.pyc", ".*_cache", "*.egg-info", "build",
)  # fmt: skip


def _not_source(top: str) -> Any:
    """What a wheel is not built from: caches, and the checkout's own ``tests/`` and
    ``tools/`` (at the top only: the package has a ``tools`` of its own)."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set(_NOT_BUILT(directory, names))
        if os.path.samefile(directory, top):
            skipped |= {"tests", "tools"} & set(names)
        return skipped

    return ignore


def install_wheel(tmp: str, source: Path = ROOT, name: str = "wheel") -> Path:
    """A venv holding the agent installed from a wheel built from ``source`` (this
    checkout, or an export of another revision; bytecode compiled, as pip installs it); its
    dependencies are this environment's (a ``.pth`` line, so the checkout's editable
    install stays out). Returns the venv."""
    base = Path(tmp) / name
    shutil.copytree(source, base / "src", ignore=_not_source(str(source)))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    # this checkout builds with what is installed here; an earlier revision may name
    # another build backend (setuptools before hatchling): pip fetches it, isolated
    isolation = ["--no-build-isolation"] if source == ROOT else []
    subprocess.run([*pip, "wheel", "--no-deps", *isolation, "--wheel-dir",
                    str(base / "dist"), str(base / "src")], check=True, env=env)  # fmt: skip
    (wheel,) = (base / "dist").glob("*.whl")
    venv = base / "venv"
    python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([str(venv / "bin/python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "bench-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([*pip, "--python", str(venv / "bin/python"), "install", "--no-deps",
                    "--no-index", str(wheel)], check=True, env=env)  # fmt: skip
    return venv


def machine() -> dict[str, Any]:
    model = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {
        "machine": f"{model}, {os.cpu_count()} cores, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}",
        "load_average_1_5_15": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
    }


def _ratio(value: Any, base: Any) -> str:
    try:
        return f"{float(value) / float(base):.2f}x"
    except (TypeError, ValueError, ZeroDivisionError):
        return "-"


def summary(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(measure, figure, baseline, ratio or goal check), for what was measured."""
    rows: list[tuple[str, str, str, str]] = []

    def row(name: str, key: str, base: str | None, goal: str, unit: str = "ms") -> None:
        if key not in r:
            return
        value = r[key]
        shown = f"{value:,.1f} {unit}" if isinstance(value, float) else str(value)
        if base is not None and base in r:
            base_shown = f"{r[base]:,.1f} {unit}"
            rows.append((name, shown, base_shown, f"{_ratio(value, r[base])} ({goal})"))
        else:
            rows.append((name, shown, "-", goal))

    row("start-up (installed wheel): spawn -> initialize", "installed_spawn_to_initialize_ms",
        "baseline_minimal_msgspec_spawn_to_initialize_ms", "goal <= 1.2x")  # fmt: skip
    for vendor in ("openai", "anthropic"):
        key = f"first_chunk_{vendor}"
        row(f"{vendor}: first chunk, prompt 3 s after initialize", f"{key}_after_3s_ms",
            f"{key}_warm_ms", "vs warm prompt; goal <= 2x")  # fmt: skip
        row(f"{vendor}: the same, against a warm prompt 3 s after the last", f"{key}_after_3s_ms",
            f"{key}_warm_after_3s_ms", "vs warm prompt after the same pause")  # fmt: skip
        row(f"{vendor}: minimal relay: first chunk 3 s after start", f"{key}_relay_after_3s_ms",
            f"{key}_relay_warm_ms", "vs its warm prompt (no warm-up)")  # fmt: skip
        row(f"{vendor}: first chunk, prompt at once", f"{key}_at_once_ms",
            f"{key}_import_{vendor}_ms", f"vs import {vendor}; goal <= 1x")  # fmt: skip
        row(f"{vendor}: the same, against the SDK alone streaming a request", f"{key}_at_once_ms",
            f"{key}_sdk_alone_ms", "vs import, client and first request")  # fmt: skip
        for framing in ("event", "body"):
            key = f"stream_{vendor}_{framing}"
            goal = "vs relay; goal <= 1.5x, <= 30 us" if framing == "event" else "vs relay"
            row(f"{vendor}: CPU per chunk, one frame per {framing}", f"{key}_agent_us_per_chunk",
                f"{key}_relay_us_per_chunk", goal, "us")  # fmt: skip
            row(f"{vendor}: chunks/s, one frame per {framing}", f"{key}_agent_chunks_per_s",
                f"{key}_relay_chunks_per_s", "vs relay", "/s")  # fmt: skip
        key = f"coalesce_{vendor}"
        row(f"{vendor}: coalescing on: CPU per chunk", f"{key}_on_us_per_chunk",
            f"{key}_off_us_per_chunk", "vs off", "us")  # fmt: skip
        row(f"{vendor}: coalescing on: updates per reply", f"{key}_on_updates_per_reply",
            f"{key}_off_updates_per_reply", "vs off", "")  # fmt: skip
    row("session/list, 5,000 sessions, all 100 pages", "list_5k_all_pages_ms",
        "list_5k_before_all_pages_ms", "vs before; goal <= 1,000 ms")  # fmt: skip
    row("session/list, 5,000 sessions, first page", "list_5k_first_page_ms",
        "list_5k_before_first_page_ms", "vs before")  # fmt: skip
    row("session/list, 100,000 sessions, one page", "list_100k_first_page_ms",
        "list_100k_before_first_page_ms", "vs before; goal <= 50 ms")  # fmt: skip
    row("session/list, 100,000 sessions, one project's page", "list_100k_one_project_page_ms",
        None, "goal <= 50 ms")  # fmt: skip
    row("session/load, 10,000 turns", "load_10k_turns_ms", "load_10k_turns_before_ms",
        "vs before; goal <= 1,000 ms")  # fmt: skip
    row("session/load, 10,000 turns: peak RSS", "load_10k_turns_peak_rss_mb",
        "load_10k_turns_before_peak_rss_mb", "vs before; goal <= 100 MB", "MB")  # fmt: skip
    row("50 concurrent sessions: CPU per chunk", "concurrent_50_us_per_chunk",
        "concurrent_one_us_per_chunk", "vs one session; goal <= 1x", "us")  # fmt: skip
    return rows
