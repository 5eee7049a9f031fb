"""The shape of the package, checked by its import arrows (ARCHITECTURE.md): the folders
are the layers, dependencies between them point one way counting every import (module
level, inside functions, under ``TYPE_CHECKING``), modules of one package form no cycle but
through imports of types, loading late is decided in a few named places, module sizes,
a light path to ``initialize``, and the map in ARCHITECTURE.md is the tree."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
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

#: The package root holds the process edge and the leaves everything uses; each with why.
ROOT_MODULES = {
    "acp_agent": "the package: its version, and the lock every import off the event loop holds",
    "acp_agent.__main__": "python -m acp_agent",
    "acp_agent._version": "the version, read by packaging",
    "acp_agent.cli": "the process edge: flags, subcommands (a package: run/chat's flags, "
    "login, sessions, permissions, doctor)",
    "acp_agent.server": "the process edge: stdio, the connection, the warm-up",
    "acp_agent.config": "a leaf: the configuration every layer reads (a package: its hints)",
    "acp_agent.errors": "a leaf: the exception tree and its JSON-RPC codes",
    "acp_agent.log": "a leaf: structured logging to stderr",
    "acp_agent.escaping": "a leaf: text the model or the project chose, made safe to show "
    "(every layer that shows it, the terminal front end too)",
    "acp_agent.conversation": "a leaf: messages, parts, tool specs (providers, tools, engine, "
    "sessions all name a message; none depends on another to do so)",
    "acp_agent.client": "a leaf: the editor as typed calls, the seam tools, engine and "
    "handlers talk to the editor through",
}

#: The folders that are layers (every other name at the root is in ``ROOT_MODULES``).
LAYER_FOLDERS = tuple(f"acp_agent.{name}" for name in (
    "transports", "handlers", "engine", "sessions", "mcp", "tools", "providers", "human", "rpc",
    "protocol", "prompts"))  # fmt: skip

#: Each layer and the layers it may import (its own always). Read top-down: a package
#: imports only what is below it in ARCHITECTURE.md's map.
LEAVES = ("acp_agent", "acp_agent._version", "acp_agent.errors", "acp_agent.log",
          "acp_agent.escaping")
ALLOWED: dict[str, tuple[str, ...]] = {
    "acp_agent": ("acp_agent._version",),
    "acp_agent._version": (),
    "acp_agent.errors": (),
    "acp_agent.log": (),
    "acp_agent.escaping": ("acp_agent.protocol",),
    "acp_agent.protocol": (),
    "acp_agent.conversation": (),
    "acp_agent.config": (),
    "acp_agent.rpc": LEAVES,
    "acp_agent.client": (*LEAVES, "acp_agent.rpc", "acp_agent.protocol"),
    "acp_agent.providers": (*LEAVES, "acp_agent.conversation", "acp_agent.config"),
    "acp_agent.tools": (*LEAVES, "acp_agent.conversation", "acp_agent.protocol",
                        "acp_agent.client", "acp_agent.rpc"),
    "acp_agent.mcp": (*LEAVES, "acp_agent.tools", "acp_agent.conversation", "acp_agent.protocol",
                      "acp_agent.client", "acp_agent.rpc"),
    "acp_agent.sessions": (*LEAVES, "acp_agent.tools", "acp_agent.mcp", "acp_agent.providers",
                           "acp_agent.conversation", "acp_agent.protocol"),
    "acp_agent.engine": (*LEAVES, "acp_agent.sessions", "acp_agent.tools", "acp_agent.mcp",
                         "acp_agent.providers", "acp_agent.client", "acp_agent.conversation",
                         "acp_agent.protocol", "acp_agent.config"),
    "acp_agent.transports": (*LEAVES, "acp_agent.server", "acp_agent.handlers",
                             "acp_agent.sessions", "acp_agent.client", "acp_agent.rpc",
                             "acp_agent.protocol", "acp_agent.config"),
    "acp_agent.handlers": (*LEAVES, "acp_agent.engine", "acp_agent.sessions", "acp_agent.tools",
                           "acp_agent.mcp", "acp_agent.providers", "acp_agent.client",
                           "acp_agent.conversation", "acp_agent.protocol", "acp_agent.rpc",
                           "acp_agent.config"),
    "acp_agent.human": (*LEAVES, "acp_agent.rpc", "acp_agent.protocol", "acp_agent.config",
                        "acp_agent.providers", "acp_agent.escaping"),
    "acp_agent.prompts": (),
}  # fmt: skip

#: Imports inside functions of the package's own modules, each decided on purpose: the
#: process edge loads what a subcommand needs; the method table loads the handlers (the
#: late-loaded boundary); a provider family's spec loads its implementation (and SDK) when
#: a provider is built; the terminal front end loads rich and the offline script's checks.
#: Anywhere else an import inside a function is a hidden dependency.
LAZY_ALLOWED = {
    "acp_agent.cli": "*",
    "acp_agent.server": "*",
    "acp_agent.handlers.agent": {"acp_agent.handlers.services"},
    "acp_agent.handlers.services": {"acp_agent.handlers.turnstage"},  # the second boundary
    "acp_agent.handlers.lifecycle": {"acp_agent.mcp"},  # for a session given MCP servers
    "acp_agent.providers.openai": {"acp_agent.providers._openai",
                                   "acp_agent.providers._responses"},
    "acp_agent.providers.anthropic": {"acp_agent.providers._anthropic"},
    "acp_agent.providers.offline": {"acp_agent.providers._offline"},
    "acp_agent.providers.pool": {"acp_agent.providers.resilient"},  # on initialize's way
    "acp_agent.human": {"acp_agent.human._rich"},
    "acp_agent.human.checks": {"acp_agent.providers._offline"},
}  # fmt: skip


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


def edges(module: str) -> Iterator[tuple[str, str]]:
    """``(kind, imported)`` for every package module ``module`` imports: ``top`` (at import
    time), ``types`` (under ``TYPE_CHECKING``) or ``lazy`` (inside a function)."""

    def visit(nodes: Sequence[ast.AST], kind: str) -> Iterator[tuple[str, str]]:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                yield from visit(node.body, "types")
                yield from visit(node.orelse, kind)
            elif isinstance(node, ast.Import):
                yield from ((kind, a.name) for a in node.names if a.name in MODULES)
            elif isinstance(node, ast.ImportFrom):
                yield from ((kind, target) for target in _resolve(module, node))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from visit(node.body, "lazy")
            else:  # every node: imports sit in `except` handlers and `match` cases too
                yield from visit(list(ast.iter_child_nodes(node)), kind)

    tree = ast.parse(MODULES[module].read_text())
    yield from ((k, m) for k, m in visit(list(tree.body), "top") if m != module)


EDGES = {m: sorted(set(edges(m))) for m in MODULES}


def unit(module: str) -> str:
    """The layer a module belongs to: its package under the root, or itself at the root."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and MODULES[module].name == "__init__.py"):
        return ".".join(parts[:2])
    return module


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return [*path[path.index(n):], n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_modules_stay_small() -> None:
    sizes = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    assert {m: n for m, n in sizes.items() if n > 500 and m not in GENERATED} == {}
    assert sizes["acp_agent.handlers.agent"] <= 300


def test_the_root_holds_the_process_edge_and_the_leaves() -> None:
    """Everything else lives in the folder of its layer."""
    assert {unit(m) for m in MODULES} - set(LAYER_FOLDERS) == set(ROOT_MODULES)


def test_every_layer_is_in_the_table() -> None:
    edge = {"acp_agent.cli", "acp_agent.server", "acp_agent.__main__"}
    assert {unit(m) for m in MODULES} - edge == set(ALLOWED)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_what_is_below_it(layer: str) -> None:
    """Counting every import: at module level, inside functions, under TYPE_CHECKING."""
    allowed = {layer, *ALLOWED[layer]}
    crossings = {
        m: sorted({n for _, n in EDGES[m] if unit(n) not in allowed})
        for m in MODULES
        if unit(m) == layer
    }
    assert {m: c for m, c in crossings.items() if c} == {}


def test_the_layers_form_no_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for m, found in EDGES.items():
        graph.setdefault(unit(m), set()).update(unit(n) for _, n in found if unit(n) != unit(m))
    assert _cycle(graph) is None


def test_modules_form_no_cycle_but_through_types() -> None:
    """Imports of types under TYPE_CHECKING may point back (a handler names the services
    it is given); nothing that runs does."""
    graph = {m: {n for kind, n in found if kind != "types"} for m, found in EDGES.items()}
    for m in graph:  # a module importing its own package's __init__ is no cycle
        graph[m] = {n for n in graph[m] if not m.startswith(n + ".")}
    assert _cycle(graph) is None


def test_loading_late_is_decided_in_named_places() -> None:
    """Function-level imports of the package's modules only where ``LAZY_ALLOWED`` says
    (optional heavy dependencies of other packages are each commented where they are)."""
    stray = {
        m: sorted(n for kind, n in found if kind == "lazy"
                  and LAZY_ALLOWED.get(unit(m)) != "*" and n not in LAZY_ALLOWED.get(m, ()))
        for m, found in EDGES.items()
    }  # fmt: skip
    assert {m: s for m, s in stray.items() if s} == {}


#: Modules of the layers below ``handlers/`` that start-up loads, each light on purpose:
#: ``session/new`` answers from them before the session stage is loaded
#: (``handlers.opening``).
LIGHT_AT_START = {
    "acp_agent.engine.probe": "whether bubblewrap works (the probe starts first thing)",
    "acp_agent.engine.modes": "the modes offered, as data",
    "acp_agent.sessions.ids": "a new session's id",
    "acp_agent.sessions.offers": "the client's systemPrompt, as a value",
    "acp_agent.engine": "(their packages: empty)",
    "acp_agent.sessions": "",
}


def test_the_way_to_initialize_stays_light() -> None:
    """Starting the server loads the method table and what ``initialize`` and the answer
    to ``session/new`` need (the configuration, the provider registry and its specs, the
    light modules above): no handler past it, no session machinery, engine, tool, MCP or
    provider implementation."""
    code = (
        "import sys, acp_agent.server, acp_agent.cli\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('acp_agent'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    assert "acp_agent.handlers.opening" in out  # (session/new's answer is ready at start)
    out = [m for m in out if m not in LIGHT_AT_START]
    heavy = [m for m in out if unit(m) in (
        "acp_agent.sessions", "acp_agent.engine", "acp_agent.tools", "acp_agent.mcp",
        "acp_agent.human", "acp_agent.transports",
    ) or m in (
        "acp_agent.handlers.services", "acp_agent.handlers.lifecycle",
        "acp_agent.handlers.prompting", "acp_agent.handlers.turns",
        "acp_agent.providers._openai", "acp_agent.providers._anthropic",
        "acp_agent.providers._offline",
    )]  # fmt: skip
    assert heavy == []


def test_the_first_session_waits_for_no_turn_engine() -> None:
    """The first late-loaded boundary (``handlers.services``, what ``session/new``
    waits for) holds the sessions, their store and the sandbox's probe; the turn engine,
    the tools a model calls, MCP and the handlers that run turns are past the second
    (``handlers.turnstage``)."""
    code = (
        "import sys, acp_agent.server, acp_agent.handlers.services\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('acp_agent'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    assert "acp_agent.sessions.session" in out  # (the boundary is where it says)
    late = [m for m in out if unit(m) == "acp_agent.mcp" or m in (
        "acp_agent.handlers.turnstage", "acp_agent.handlers.turns",
        "acp_agent.handlers.prompting", "acp_agent.handlers.steering",
        "acp_agent.handlers.builtins", "acp_agent.engine.turn", "acp_agent.engine.world",
        "acp_agent.engine.compaction", "acp_agent.engine.subagents",
        "acp_agent.tools.files", "acp_agent.tools.command", "acp_agent.tools.webfetch",
        "acp_agent.providers.resilient",
    )]  # fmt: skip
    assert late == []


def test_the_architecture_map_is_the_tree() -> None:
    """ARCHITECTURE.md's map names every folder and every module in it, and nothing else."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    block = re.search(r"## The tree\n.*?```\n(.*?)```", text, re.S)
    assert block is not None, "ARCHITECTURE.md has no '## The tree' block"
    listed: set[str] = set()
    for line in block.group(1).splitlines():
        folder, _, rest = line.partition("  ")
        folder = folder.strip()
        names = re.findall(r"\b[a-z_][a-z_0-9]*\b", rest.split("|")[0])
        if folder.endswith("/"):
            listed.add("acp_agent." + folder.rstrip("/").replace("/", "."))
            prefix = "acp_agent." + folder.rstrip("/").replace("/", ".") + "."
        elif folder == "acp_agent":
            prefix = "acp_agent."
        else:
            continue
        listed.update(prefix + n for n in names)
    tree = {m for m in MODULES if not m.rpartition(".")[2].startswith("_") or m in (
        "acp_agent.__main__", "acp_agent._version")} | {  # private modules stay unlisted
        unit(m) for m in MODULES}
    tree.discard("acp_agent")
    assert listed == tree


def test_the_network_server_stays_off_the_stdio_path() -> None:
    """`acp-agent serve`'s ASGI server (hypercorn, h2, wsproto) loads only for serve."""
    code = (
        "import sys, acp_agent.server, acp_agent.cli\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('hypercorn', 'h2', 'h11', 'wsproto'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    assert out == []


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


def late_imports_without_a_reason(module: str) -> list[int]:
    """The lines of ``module``'s function-level imports with no comment saying why: on
    the import's line, or on the line above the run of imports it belongs to."""
    lines = MODULES[module].read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    found: list[int] = []

    def said(first: int, last: int) -> bool:
        span = lines[first - 2 : last] if first >= 2 else lines[:last]
        above = span[0] if first >= 2 else ""  # a comment line, or a `try:` with one
        return "#" in above or any("#" in line for line in span[1:])

    def visit(node: ast.AST, inside: bool) -> None:
        body: list[ast.AST] = list(ast.iter_child_nodes(node))
        run: list[ast.stmt] = []
        for child in [*body, None]:
            if inside and isinstance(child, ast.Import | ast.ImportFrom):
                run.append(child)
                continue
            if run:
                first, last = run[0].lineno, run[-1].end_lineno or run[-1].lineno
                if not said(first, last):
                    found.append(first)
                run = []
            if child is not None:
                visit(child, inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    return found


def test_a_late_import_says_why() -> None:
    """An import inside a function (a dependency's, the standard library's or ours) says
    why in a comment: what it keeps off the way to ``initialize``, or which optional
    dependency it waits for. The process edge (``cli``, ``server``) defers everything,
    as its docstrings say."""
    missing = {m: lines for m in MODULES if LAZY_ALLOWED.get(unit(m)) != "*"
               if (lines := late_imports_without_a_reason(m))}  # fmt: skip
    assert missing == {}
