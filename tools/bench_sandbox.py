"""``--only sandbox``: what the command sandbox costs per command (issue 23).

Each command runs once wrapped by the sandbox at ``workspace-write``
(``Sandboxing.sandbox(...).wrap``: the command line every route runs) and once as is,
interleaved so that both see the same machine; medians. Two clocks: the process alone
(spawned, waited for: what the sandbox itself costs), and through ``run_command``'s local
route (``tools.shell.run_local``: the process group, the output pipe, and its exit
polling, which looks after 2, 6, 14, 30, 62... ms, so a few ms more can cost a step of
it: what ``run_command`` returns in). Commands:
``true`` (the fixed cost) and a short ``python -c`` (an interpreter starting inside: its
reads of the file system go through the sandbox's mounts). Per backend: bubblewrap (the
only one there is). Goal: at most 50 ms added per command.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from asyncio.subprocess import DEVNULL
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path


async def bench_sandbox(runs: int, tmp: str, median: Callable[[list[float]], float]
                        ) -> dict[str, float | str]:  # fmt: skip
    from acp_agent.config import from_mapping
    from acp_agent.engine.sandboxing import Sandboxing
    from acp_agent.tools.shell import run_local

    ws = Path(tmp) / "sandbox-ws"
    ws.mkdir(exist_ok=True)
    box = Sandboxing(from_mapping({"state-dir": str(Path(tmp) / "sandbox-state")}))
    found = await box.ready()
    if found.program is None:
        return {"sandbox_unavailable": found.why_not}
    fenced = box.sandbox("workspace-write", [str(ws)])
    commands = {"true": "true", "python_c": f"{shlex.quote(sys.executable)} -c 'print(1)'"}
    out: dict[str, float | str] = {}
    for name, line in commands.items():
        plain = ["/bin/sh", "-c", line]
        wrapped = fenced.wrap(plain, str(ws))
        times: dict[tuple[str, str], list[float]] = defaultdict(list)
        for _ in range(runs):
            for where, argv in (("inside", wrapped), ("outside", plain)):
                start = time.perf_counter()
                proc = await asyncio.create_subprocess_exec(*argv, cwd=ws, stdout=DEVNULL)
                assert await proc.wait() == 0
                times["process", where].append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                result = await run_local(argv, str(ws), 60.0)
                times["run_local", where].append((time.perf_counter() - start) * 1000)
                assert result.exit_code == 0, result.output
        for clock in ("process", "run_local"):
            inside, outside = median(times[clock, "inside"]), median(times[clock, "outside"])
            key = f"sandbox_{name}_{clock}"
            out[f"{key}_bubblewrap_ms"] = inside
            out[f"{key}_unsandboxed_ms"] = outside
            out[f"{key}_added_ms"] = inside - outside
            out[f"{key}_ratio"] = inside / outside
    return out
