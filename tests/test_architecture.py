"""The shape of the package, checked by its import arrows (ARCHITECTURE.md): module sizes,
no import-time cycles, the layers' boundaries, and a light path to ``initialize``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "acp_agent"
GENERATED = {"acp_agent.protocol.types"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _resolve(module: str, node: ast.ImportFrom) -> list[str]:
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    if node.level:
        base = package
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        target = f"{base}.{node.module}" if node.module else base
    else:
        target = node.module or ""
    names = [f"{target}.{alias.name}" for alias in node.names]
    return [n for n in names if n in MODULES] or ([target] if target in MODULES else [])


def imports(module: str, *, import_time: bool) -> set[str]:
    """The package modules ``module`` imports: at import time only (top level, not under
    ``TYPE_CHECKING``), or anywhere (lazy imports included)."""
    tree = ast.parse(MODULES[module].read_text())
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in MODULES)
            elif isinstance(node, ast.ImportFrom):
                found.update(_resolve(module, node))
            elif not import_time or isinstance(node, ast.If | ast.Try | ast.With):
                visit([n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt)])

    visit(tree.body)
    if not import_time:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                found.update(_resolve(module, node))
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in MODULES)
    found.discard(module)
    return found


def test_modules_stay_small() -> None:
    sizes = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    assert {m: n for m, n in sizes.items() if n > 500 and m not in GENERATED} == {}
    assert sizes["acp_agent.handlers.agent"] <= 300


def test_no_import_time_cycles() -> None:
    graph = {m: imports(m, import_time=True) for m in MODULES}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1 and not m.startswith(n + "."):  # a package's own init
                cycle = [*path[path.index(n):], n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize(("layer", "allowed"), [
    ("acp_agent.protocol", ("acp_agent.protocol",)),
    ("acp_agent.conversation", ()),
    ("acp_agent.rpc", ("acp_agent.rpc", "acp_agent.errors", "acp_agent.log")),
    ("acp_agent.providers", ("acp_agent.providers", "acp_agent.conversation", "acp_agent.errors",
                             "acp_agent.log", "acp_agent.config")),
    ("acp_agent.tools", ("acp_agent.tools", "acp_agent.conversation", "acp_agent.errors",
                         "acp_agent.log", "acp_agent.protocol", "acp_agent.client",
                         "acp_agent.rpc")),
    ("acp_agent.sessions.store", ("acp_agent.sessions.records", "acp_agent.sessions.diskwriter", "acp_agent.sessions.sessionlog",
                         "acp_agent.protocol", "acp_agent.conversation", "acp_agent.log")),
    ("acp_agent.sessions.sessionlog", ("acp_agent.sessions.records", "acp_agent.sessions.diskwriter", "acp_agent.sessions.store",
                              "acp_agent.protocol", "acp_agent.conversation", "acp_agent.log")),
    ("acp_agent.sessions.records", ("acp_agent.protocol", "acp_agent.conversation", "acp_agent.log")),
])
def test_layer_boundaries(layer: str, allowed: tuple[str, ...]) -> None:
    """Providers know nothing of ACP, tools nothing of providers, the store nothing of
    either; the wire types and the conversation stand on nothing of ours."""
    members = [m for m in MODULES if _under(m, (layer,))]
    crossings = {
        m: sorted(n for n in imports(m, import_time=False) if not _under(n, allowed))
        for m in members
    }
    assert {m: c for m, c in crossings.items() if c} == {}


def test_the_way_to_initialize_stays_light() -> None:
    """Starting the server loads no session machinery, tool, engine or provider code."""
    code = (
        "import sys, acp_agent.server, acp_agent.cli\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('acp_agent'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    heavy = [m for m in out if _under(m, (
        "acp_agent.sessions.session", "acp_agent.sessions.store", "acp_agent.sessions.sessionlog", "acp_agent.sessions.replay",
        "acp_agent.sessions.transcript",
        "acp_agent.engine.turn",
        "acp_agent.engine.toolcall", "acp_agent.tools", "acp_agent.engine.subagents", "acp_agent.mcp",
        "acp_agent.handlers.lifecycle", "acp_agent.handlers.catalog", "acp_agent.handlers.prompting", "acp_agent.handlers.options",
        "acp_agent.handlers.endpoints", "acp_agent.engine.permissions", "acp_agent.conversation",
        "acp_agent.providers._openai", "acp_agent.providers._anthropic",
        "acp_agent.providers._offline", "acp_agent.providers.resilient",
    ))]
    assert heavy == []


def test_a_preset_is_one_module_and_one_registry_line() -> None:
    """The OpenAI-compatible presets are named nowhere but in their own module and in
    ``FAMILIES``: adding one is a new file and one line (issue 13). Each names an example
    model, which ``--model <family>`` without a model quotes."""
    from acp_agent.providers.registry import FAMILIES, spec

    for family in ("ollama", "openrouter"):
        own = f"acp_agent.providers.{family}"
        assert FAMILIES[family] == own
        assert spec(family).example
        named = []
        for module, path in MODULES.items():
            if module in (own, "acp_agent.providers.registry"):
                continue
            strings = [n.value for n in ast.walk(ast.parse(path.read_text()))
                       if isinstance(n, ast.Constant) and isinstance(n.value, str)]  # fmt: skip
            if any(s == family or s.startswith(f"{family}:") for s in strings):
                named.append(module)
        assert named == [], family
