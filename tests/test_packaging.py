"""What ships: the wheel, the Dockerfile's install steps, and the ACP registry manifest.

The wheel is built from a copy of the checkout, installed into a fresh virtual environment
and run from a directory outside the checkout, so neither the checkout nor the editable
install in `.venv` can stand in for the installed package. Nothing here touches the network:
the build backend and every dependency come from a local wheelhouse, repacked from the
distributions already installed in this environment (`.ci/run` installs `.[dev]`), and pip
runs with `--no-index` and without any pip configuration file.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import hashlib
import io
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from acp_agent import __version__
from acp_agent.cli import build_parser

from .harness import ROOT, AgentProcess
from .limits import limit
from .schema_check import SchemaChecker

# One worker builds the wheelhouse, the wheel and the venv (module fixtures) for all.
pytestmark = pytest.mark.xdist_group("packaging")

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DIST = canonicalize_name(PROJECT["name"])
SUBPACKAGES = ("protocol", "rpc", "providers", "tools", "mcp")
# Never needed at run time. (jsonschema is a dev dependency too, but `mcp` needs it at run
# time; the closure check below covers it: nothing is installed that the runtime does not need.)
DEV_ONLY = {"pytest", "pytest-asyncio", "pytest-timeout", "pytest-xdist", "coverage", "mypy",
            "types-jsonschema", "ruff", "agent-client-protocol"}
#: What a fresh clone does not hold. The coverage data files come and go while the suite
#: runs (every measured subprocess writes one beside the checkout, then renames it): a
#: copy that listed one may find it gone.
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "__pycache__", "*.pyc", ".*_cache", "*.egg-info", "build",
    "dist", ".coverage", ".coverage.*",
)


# ---------------------------------------------------------------- offline pip


def pip_env() -> dict[str, str]:
    """No pip configuration (index URLs, find-links, constraints), no cache, no prompts;
    and no coverage measurement of pip (it runs none of the checkout's code)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "COVERAGE_")) and k != "PYTHONPATH"}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1", "PIP_NO_CACHE_DIR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return env


def pip(*args: str, cwd: Path | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    result = subprocess.run(cmd, cwd=cwd, env=pip_env(), capture_output=True, text=True,
                            timeout=limit(300))
    assert result.returncode == 0, (
        f"{shlex.join(cmd)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")


def repack(dist: metadata.Distribution, out: Path) -> None:
    """Zip an installed distribution back into a wheel, from the files its RECORD lists."""
    base = Path(str(dist.locate_file("")))
    files = [f for f in dist.files or ()
             if not f.as_posix().startswith("../") and "__pycache__" not in f.parts]
    info = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
    wheel_file = base / info / "WHEEL"
    wheel_meta = (wheel_file.read_text() if wheel_file.is_file()
                  else "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    tags = [line.split(":", 1)[1].strip() for line in wheel_meta.splitlines()
            if line.startswith("Tag:")] or ["py3-none-any"]
    parts = zip(*(t.split("-") for t in tags), strict=True)  # python, abi, platform
    tag = "-".join(".".join(dict.fromkeys(part)) for part in parts)
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    skip = {f"{info}/{n}" for n in ("RECORD", "WHEEL", "INSTALLER", "REQUESTED", "direct_url.json")}
    record = io.StringIO()
    rows = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(out / f"{name}-{dist.version}-{tag}.whl", "w") as whl:
        for f in files:
            arcname, source = f.as_posix(), base / f
            if arcname in skip or not source.is_file():
                continue
            data = source.read_bytes()
            whl.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            rows.writerow((arcname, "sha256=" + digest.decode(), len(data)))
        whl.writestr(f"{info}/WHEEL", wheel_meta)
        rows.writerows(((f"{info}/WHEEL", "", ""), (f"{info}/RECORD", "", "")))
        whl.writestr(f"{info}/RECORD", record.getvalue())


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every distribution installed here (dev tools included, so an install that asks for
    them would get them and be caught), as wheels pip can install with --no-index.
    About 120 MB: removed after the module."""
    out = tmp_path_factory.mktemp("wheelhouse")
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    seen: set[str] = set()
    for dist in metadata.distributions(path=paths):
        name = canonicalize_name(dist.metadata["Name"])
        if name in seen or name in (DIST, "pip") or not dist.files:
            continue
        seen.add(name)
        repack(dist, out)
    assert "hatchling" in seen, "the build backend is missing: pip install -e '.[dev]'"
    yield out
    shutil.rmtree(out, ignore_errors=True)


def make_venv(path: Path) -> Path:
    """A fresh venv from the base interpreter (not .venv, whose editable install would
    shadow the wheel); pip drives it from outside with --python."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(path)], check=True,
                   timeout=limit(120))
    return path


def install(venv: Path, wheelhouse: Path, *targets: str, cwd: Path | None = None) -> None:
    pip("--python", str(venv / "bin" / "python"), "install", "--no-index", "--find-links",
        str(wheelhouse), "--no-compile", *targets, cwd=cwd)


def site_packages(venv: Path) -> Path:
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, env={}, timeout=limit(60))
    return Path(out.stdout.strip())


def installed(venv: Path) -> dict[str, metadata.Distribution]:
    return {canonicalize_name(d.metadata["Name"]): d
            for d in metadata.distributions(path=[str(site_packages(venv))])}


def runtime_closure(dists: dict[str, metadata.Distribution]) -> dict[str, str]:
    """Every distribution the installed project needs, each with the one that pulled it in."""
    needed: dict[str, str] = {DIST: "(the project)"}
    stack: list[tuple[str, frozenset[str]]] = [(DIST, frozenset())]
    visited: set[tuple[str, frozenset[str]]] = set()
    while stack:
        name, extras = stack.pop()
        if (name, extras) in visited:
            continue
        visited.add((name, extras))
        for spec in dists[name].requires or ():
            req = Requirement(spec)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in {"", *extras}):
                continue
            dep = canonicalize_name(req.name)
            assert dep in dists, f"{name} needs {spec!r}, which is not installed"
            needed.setdefault(dep, name)
            stack.append((dep, frozenset(req.extras)))
    return needed


def assert_runtime_only(venv: Path) -> None:
    dists = installed(venv)
    assert DIST in dists
    assert not DEV_ONLY & dists.keys(), f"dev tools installed: {sorted(DEV_ONLY & dists.keys())}"
    needed = runtime_closure(dists)
    assert dists.keys() == needed.keys(), f"not needed at run time: {sorted(dists.keys() - needed)}"


# ---------------------------------------------------------------- running the installed agent


class InstalledAgent(AgentProcess):
    """The harness client (schema-checked), driving an installed command instead of
    `python -m acp_agent` from the checkout."""

    def __init__(self, checker: SchemaChecker, command: list[str], *, env: dict[str, str],
                 cwd: Path) -> None:
        super().__init__(checker, cwd=str(cwd))
        self.command = command
        self.env = env

    async def start(self) -> InstalledAgent:
        assert self.proc is None, "agent already started"
        self.proc = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.env, cwd=self.cwd, limit=1 << 24)
        self._reader = asyncio.create_task(self._read())
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        return self


def system_path() -> str:
    """PATH without this environment's own bin directory."""
    own = {str(Path(sys.prefix) / "bin"), str(Path(sys.executable).parent)}
    return os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
                           if p and p not in own)


async def hello_round_trip(agent: InstalledAgent, session_cwd: Path) -> None:
    """initialize -> session/new -> session/prompt "hello" on the offline model, then EOF."""
    await agent.start()
    try:
        init = await agent.initialize()
        assert init["protocolVersion"] == 1
        assert init["agentInfo"]["version"] == __version__
        sid = await agent.new_session(str(session_cwd))
        assert (await agent.prompt(sid, "hello"))["stopReason"] == "end_turn"
        text = "".join(u["content"].get("text", "")
                       for u in agent.updates_of(sid, "agent_message_chunk"))
        assert "offline" in text
    finally:
        code = await agent.close()
    assert code == 0, agent.stderr.decode(errors="replace")[-2000:]


# ---------------------------------------------------------------- the wheel


@pytest.fixture(scope="module")
def wheel(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the checkout, with an isolated build environment whose build
    backend comes from the wheelhouse."""
    tmp = tmp_path_factory.mktemp("build")
    shutil.copytree(ROOT, tmp / "src", ignore=NOT_SOURCE)
    pip("wheel", "--no-deps", "--no-index", "--find-links", str(wheelhouse), "--wheel-dir",
        str(tmp / "dist"), str(tmp / "src"))
    (built,) = (tmp / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, wheelhouse: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    venv = make_venv(tmp_path_factory.mktemp("fresh") / "venv")
    install(venv, wheelhouse, str(wheel))
    yield venv
    shutil.rmtree(venv, ignore_errors=True)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the checkout, so `import acp_agent` cannot find it."""
    assert ROOT not in tmp_path.parents
    (tmp_path / "home").mkdir()
    (tmp_path / "ws").mkdir()
    return tmp_path


def wheel_metadata(whl: zipfile.ZipFile, name: str) -> str:
    (path,) = [n for n in whl.namelist() if re.fullmatch(rf"[^/]+\.dist-info/{name}", n)]
    return whl.read(path).decode()


class TestWheel:
    def test_contents(self, wheel: Path) -> None:
        """The whole package (every module and subpackage, py.typed, the generated wire
        types) and nothing else: no tests, tools or bytecode."""
        names = set(zipfile.ZipFile(wheel).namelist())
        tops = {n.split("/", 1)[0] for n in names}
        assert tops == {"acp_agent", f"acp_reference_agent-{__version__}.dist-info"}, tops
        for required in ("acp_agent/py.typed", "acp_agent/protocol/types.py",
                         "acp_agent/cli/__init__.py",
                         *(f"acp_agent/{sub}/__init__.py" for sub in SUBPACKAGES)):
            assert required in names
        modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "acp_agent").rglob("*.py")
                   if "__pycache__" not in p.parts}
        assert not modules - names, f"missing from the wheel: {sorted(modules - names)}"
        assert not [n for n in names if n.endswith((".pyc", ".pyo")) or "tests/" in n]

    def test_metadata(self, wheel: Path) -> None:
        """Name, version and Python floor as in pyproject.toml; the runtime dependencies
        only (the dev tools appear under `extra == "dev"` alone); the console scripts."""
        whl = zipfile.ZipFile(wheel)
        meta = HeaderParser().parsestr(wheel_metadata(whl, "METADATA"))
        assert meta["Name"] == PROJECT["name"] == "acp-reference-agent"
        assert meta["Version"] == __version__
        assert meta["Requires-Python"] == PROJECT["requires-python"]
        requires = [Requirement(r) for r in meta.get_all("Requires-Dist") or ()]
        unconditional = {(canonicalize_name(r.name), str(r.specifier)) for r in requires
                         if r.marker is None}
        declared = {(canonicalize_name(r.name), str(r.specifier))
                    for r in map(Requirement, PROJECT["dependencies"])}
        assert unconditional == declared
        dev = {canonicalize_name(Requirement(r).name)
               for r in PROJECT["optional-dependencies"]["dev"]}
        for r in requires:
            if canonicalize_name(r.name) in dev - {n for n, _ in declared}:
                assert r.marker is not None and r.marker.evaluate({"extra": "dev"})
                assert not r.marker.evaluate({"extra": ""}), f"{r} is not dev-only"
        entry_points = wheel_metadata(whl, "entry_points.txt")
        assert re.search(r"^acp-agent = acp_agent\.cli:main$", entry_points, re.M)

    def test_installed_command(self, fresh_venv: Path, outside: Path) -> None:
        """`acp-agent --version` and `--help` from the fresh venv, importing the installed
        package (not the checkout)."""
        env = {"PATH": f"{fresh_venv / 'bin'}{os.pathsep}{system_path()}",
               "HOME": str(outside / "home")}

        def run(*args: str) -> str:
            result = subprocess.run(args, cwd=outside, env=env, capture_output=True, text=True,
                                    timeout=limit(60))
            assert result.returncode == 0, result.stderr
            return result.stdout

        assert run("acp-agent", "--version").strip() == f"acp-agent {__version__}"
        help_text = run("acp-agent", "--help")
        for flag in ("usage: acp-agent", "--model", "--base-url", "--config", "--state-dir",
                     "--mode", "--log-level", "--log-file", "--version"):
            assert flag in help_text
        where = run("python", "-c", "import acp_agent; print(acp_agent.__file__)").strip()
        assert Path(where).is_relative_to(site_packages(fresh_venv)), where

    async def test_installed_round_trip(self, fresh_venv: Path, outside: Path,
                                        checker: SchemaChecker) -> None:
        """A real initialize -> session/new -> session/prompt over stdio, as an editor would
        start the installed command: no PYTHONPATH, nothing but PATH and HOME."""
        env = {"PATH": f"{fresh_venv / 'bin'}{os.pathsep}{system_path()}",
               "HOME": str(outside / "home")}
        agent = InstalledAgent(checker, [str(fresh_venv / "bin" / "acp-agent")], env=env,
                               cwd=outside)
        await hello_round_trip(agent, outside / "ws")

    def test_runtime_dependencies_only(self, fresh_venv: Path) -> None:
        assert_runtime_only(fresh_venv)


# ---------------------------------------------------------------- the Dockerfile


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), line continuations joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    steps = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            steps.append((op.upper(), rest.strip()))
    return steps


def env_values(rest: str) -> dict[str, str]:
    words = shlex.split(rest)
    if all("=" in w for w in words):
        return dict(w.split("=", 1) for w in words)
    return {words[0]: " ".join(words[1:])}  # the legacy `ENV KEY value` form


def expand(word: str, env: dict[str, str]) -> str:
    """$VAR and ${VAR} from the Dockerfile's ENV, as the shell in a RUN step sees them."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env[m[1]], word)


def glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out += {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i]))
            i += 1
    return re.compile(out)


def dockerignored() -> list[tuple[bool, re.Pattern[str]]]:
    path = ROOT / ".dockerignore"
    rules = []
    for line in path.read_text().splitlines() if path.exists() else ():
        line = line.strip()
        if line and not line.startswith("#"):
            keep = line.startswith("!")
            rules.append((keep, glob_regex(posixpath.normpath(line.lstrip("!").strip("/")))))
    return rules


def excluded(rel: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last matching pattern wins; a pattern matching a directory
    matches everything below it."""
    parts = rel.split("/")
    result = False
    for keep, rx in rules:
        if any(rx.fullmatch("/".join(parts[:i])) for i in range(1, len(parts) + 1)):
            result = not keep
    return result


class TestDockerfile:
    def test_shape(self) -> None:
        """Slim Python base, runtime dependencies only, a non-root user, the command as the
        entrypoint, sessions under XDG_STATE_HOME."""
        steps = dockerfile()
        assert re.fullmatch(r"python:3\.\d+-slim", steps[0][1]), steps[0]
        users = [rest for op, rest in steps if op == "USER"]
        assert users and re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1]), users  # numeric
        # `acp-agent serve`'s port and its health check (which passes for stdio)
        assert [rest for op, rest in steps if op == "EXPOSE"] == ["8765"]
        check = next(rest for op, rest in steps if op == "HEALTHCHECK")
        probe = json.loads(check[check.index("CMD") + 3:])
        assert probe == ["python", "-m", "acp_agent.transports.health"]
        assert json.loads(next(rest for op, rest in steps if op == "ENTRYPOINT")) == ["acp-agent"]
        assert "acp-agent" in PROJECT["scripts"]
        runs = " && ".join(rest for op, rest in steps if op == "RUN")
        assert re.search(r"\bpip install \.(\s|$)", runs), runs
        assert not re.search(r"\[|\s-e\b|--editable|\s-r\b", runs), runs  # no extras, no -e/-r
        env: dict[str, str] = {}
        for op, rest in steps:
            if op == "ENV":
                env |= env_values(rest)
        assert env.get("XDG_STATE_HOME", "").startswith("/home/")

    async def test_install_steps_in_a_fresh_venv(self, wheelhouse: Path, tmp_path: Path,
                                                 checker: SchemaChecker) -> None:
        """Replay the Dockerfile: COPY exactly what it copies (through .dockerignore) into
        a stand-in for the image's filesystem, run its `pip install .` (offline) into a
        fresh venv, delete the sources as it does, then start the entrypoint the way
        `docker run -i --rm` would: as the image's user, in its WORKDIR, with its ENV only.
        The agent may write nothing but its state under XDG_STATE_HOME."""
        root = tmp_path / "image"  # the container's "/"
        venv = make_venv(tmp_path / "venv")  # stands for the image's site-packages

        def host(path: str) -> Path:
            return root / path.lstrip("/")

        rules = dockerignored()
        env: dict[str, str] = {}
        workdir, user, homes, entrypoint = "/", "root", {"root": "/root"}, [""]
        for op, rest in dockerfile():
            if op in ("EXPOSE", "HEALTHCHECK"):
                continue  # nothing on the filesystem (test_shape checks them)
            if op in ("FROM", "ENTRYPOINT", "USER", "ENV", "WORKDIR"):
                if op == "ENTRYPOINT":
                    entrypoint = json.loads(rest)
                elif op == "USER":
                    user = rest
                elif op == "ENV":
                    env |= env_values(rest)
                elif op == "WORKDIR":
                    workdir = posixpath.join(workdir, rest)
                    host(workdir).mkdir(parents=True, exist_ok=True)
            elif op == "COPY":
                *sources, dest = [w for w in shlex.split(rest) if not w.startswith("--")]
                target = posixpath.normpath(posixpath.join(workdir, dest))
                for source in sources:
                    assert not excluded(source, rules), f"COPY {source}: excluded by .dockerignore"
                    src = ROOT / source
                    files = [p for p in ([src] if src.is_file() else sorted(src.rglob("*")))
                             if p.is_file() and not excluded(p.relative_to(ROOT).as_posix(), rules)]
                    assert files, f"COPY {source}: nothing to copy"
                    for f in files:
                        if src.is_dir():
                            out = host(target) / f.relative_to(src)
                        elif dest.endswith("/") or len(sources) > 1:
                            out = host(target) / f.name
                        else:
                            out = host(target)
                        out.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(f, out)
            elif op == "RUN":
                for step in rest.split("&&"):
                    words = [expand(w, env) for w in shlex.split(step)]
                    if words[:2] == ["pip", "install"]:
                        install(venv, wheelhouse, *words[2:], cwd=host(workdir))
                    elif words[:2] == ["rm", "-rf"]:
                        for path in words[2:]:
                            shutil.rmtree(host(path))
                    elif words[:2] == ["mkdir", "-p"]:
                        for path in words[2:]:
                            host(posixpath.join(workdir, path)).mkdir(parents=True, exist_ok=True)
                    elif words[0] == "useradd":
                        homes[words[-1]] = f"/home/{words[-1]}"
                        uid = words[words.index("--uid") + 1]
                        gid = words[words.index("--gid") + 1]
                        homes[f"{uid}:{gid}"] = homes[words[-1]]
                        if "--create-home" in words or "-m" in words:
                            host(homes[words[-1]]).mkdir(parents=True)
                    elif words[0] == "groupadd":
                        pass  # (the user's group: nothing on the filesystem here)
                    elif words[0] == "chmod":
                        for path in words[2:]:
                            host(path).chmod(int(words[1], 8))
                    else:
                        pytest.fail(f"RUN step not modelled by this test: {step.strip()}")
            else:
                pytest.fail(f"Dockerfile instruction not modelled by this test: {op}")

        assert not host("/src").exists()
        assert_runtime_only(venv)

        run_env = {k: str(host(v)) if v.startswith("/") else v for k, v in env.items()}
        run_env |= {"HOME": str(host(homes[user])), "LANG": "C.UTF-8",
                    "PATH": f"{venv / 'bin'}{os.pathsep}{system_path()}"}
        state = host(env["XDG_STATE_HOME"])

        def tree() -> set[Path]:
            return set(root.rglob("*"))

        before = tree()
        command = [str(venv / "bin" / entrypoint[0]), *entrypoint[1:]]
        agent = InstalledAgent(checker, command, env=run_env, cwd=host(workdir))
        await hello_round_trip(agent, host(workdir))
        written = tree() - before
        assert written, "the session was not stored under XDG_STATE_HOME"
        strays = [p for p in written if p != state and state not in p.parents
                  and p not in state.parents]
        assert not strays, f"written outside XDG_STATE_HOME: {sorted(map(str, strays))}"
        shutil.rmtree(venv)


# ---------------------------------------------------------------- the ACP registry manifest

_PACKAGE = {
    "type": "object",
    "required": ["package"],
    "additionalProperties": False,
    "properties": {
        "package": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
# The rules of the registry's agent.schema.json and its build checks
# (github.com/agentclientprotocol/registry: FORMAT.md, CONTRIBUTING.md), restated.
REGISTRY_ENTRY = {
    "type": "object",
    "required": ["id", "name", "version", "description", "distribution"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"},
        "name": {"type": "string", "minLength": 1},
        "version": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+\.[0-9]+$"},
        "description": {"type": "string", "minLength": 1},
        "repository": {"type": "string", "format": "uri"},
        "website": {"type": "string", "format": "uri"},
        "authors": {"type": "array", "items": {"type": "string"}},
        "license": {"type": "string"},
        "icon": {"type": "string"},
        "distribution": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": False,
            "properties": {"binary": {"type": "object"}, "npx": _PACKAGE, "uvx": _PACKAGE},
        },
    },
}


class TestRegistryManifest:
    def manifest(self) -> dict[str, Any]:
        return json.loads((ROOT / "agent.json").read_text())  # type: ignore[no-any-return]

    def test_valid_entry(self) -> None:
        entry = self.manifest()
        jsonschema.validate(entry, REGISTRY_ENTRY, format_checker=jsonschema.FormatChecker())
        assert entry["version"] == __version__
        assert entry["license"] == PROJECT["license"]
        uvx = entry["distribution"]["uvx"]
        # pinned to this version (the registry rejects `latest` and mismatched pins)
        assert uvx["package"] == f"{PROJECT['name']}=={__version__}"
        build_parser().parse_args(uvx.get("args", []))  # exits on a flag the CLI lacks

    def test_uvx_runs_the_agent(self, wheel: Path) -> None:
        """`uvx <package> [args]` runs the executable named after the package: the wheel
        must provide it, and it must be the agent's entry point."""
        name = Requirement(self.manifest()["distribution"]["uvx"]["package"]).name
        scripts = wheel_metadata(zipfile.ZipFile(wheel), "entry_points.txt")
        assert re.search(rf"^{re.escape(name)} = acp_agent\.cli:main$", scripts, re.M), scripts

    def test_icon(self) -> None:
        """icon.svg as the registry wants it: 16x16, monochrome through currentColor."""
        text = (ROOT / "icon.svg").read_text()
        assert "<!--" not in text
        svg = ET.fromstring(text)
        assert svg.tag.rpartition("}")[2] == "svg"
        assert (svg.get("width"), svg.get("height")) == ("16", "16")
        paints = [value for el in svg.iter() for attr in ("fill", "stroke")
                  if (value := el.get(attr)) is not None]
        assert "currentColor" in paints
        assert {p.lower() for p in paints} <= {"currentcolor", "none", "inherit"}
        assert "style" not in text
