"""Shared fixtures. Every test gets a schema checker; any message the agent emitted that
fails the official ACP schema fails the test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from .harness import AgentProcess
from .schema_check import SchemaChecker


@pytest.fixture(autouse=True)
def checker() -> Iterator[SchemaChecker]:
    c = SchemaChecker()
    yield c
    if c.failures:
        pytest.fail(
            f"{len(c.failures)} emitted message(s) failed schema validation:\n"
            + "\n".join(c.failures[:10]),
            pytrace=False,
        )


@pytest.fixture
def state_dir(tmp_path: Any) -> str:
    d = tmp_path / "state"
    d.mkdir()
    return str(d)


@pytest.fixture
def workspace(tmp_path: Any) -> str:
    d = tmp_path / "ws"
    d.mkdir()
    (d / "hello.txt").write_text("hello\nworld\n")
    return str(d)


@pytest.fixture
async def agent(checker: SchemaChecker, state_dir: str) -> AsyncIterator[AgentProcess]:
    """An agent subprocess on the offline model (demo mode), not yet initialized."""
    proc = AgentProcess(checker, "--state-dir", state_dir)
    await proc.start()
    try:
        yield proc
    finally:
        await proc.close()
