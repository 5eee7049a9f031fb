"""``SIGHUP``: the configuration read again and its ``[limits]`` applied, without a restart.

The file, the environment and the flags are read as at start-up (``cli.load_config``);
only ``[limits]`` changes: the model, the endpoints, the state directory and logging stay
as the process started (``max-message-bytes`` too: it sized the input reader). A new limit
applies to what starts afterwards (the next model request's retries and timeouts, the next
wait for MCP servers, the next turn), and ``turn-timeout`` also to the turns running now,
each bounded again from its own start (lowered below what a turn has run, it ends that
turn at once). A family whose HTTP timeout backstop moves with the limits gets new
providers for its next request. A configuration that cannot be read changes nothing and
says why in the log.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from .. import log
from ..config import Config, ConfigError, Limits

if TYPE_CHECKING:
    from .runtime import Runtime


def on_hangup(rt: Runtime, load: Callable[[], Config]) -> None:
    """Reload ``rt``'s limits from ``load()`` on every ``SIGHUP`` (where there is one)."""
    hangup = getattr(signal, "SIGHUP", None)
    if hangup is None:  # pragma: no cover (not on POSIX)
        return
    asyncio.get_running_loop().add_signal_handler(hangup, reload, rt, load)


def reload(rt: Runtime, load: Callable[[], Config]) -> None:
    """Apply the ``[limits]`` of ``load()`` (a :class:`ConfigError` changes nothing)."""
    try:
        limits = load().limits
    except ConfigError as exc:
        log.warning("configuration not reloaded", error=str(exc))
        return
    old = rt.config
    rt.config = msgspec.structs.replace(old, limits=limits)
    from ..providers.registry import FAMILIES, http_timeout

    for family in FAMILIES:
        if http_timeout(old, family) != http_timeout(rt.config, family):
            rt.reroute(family)
    for deadline, started in rt.turn_deadlines.items():
        if not deadline.expired():
            deadline.reschedule(started + limits.turn_timeout)
    changed = {
        name: getattr(limits, name)
        for name in Limits.__struct_fields__
        if getattr(limits, name) != getattr(old.limits, name)
    }
    log.info("limits reloaded", **changed)
