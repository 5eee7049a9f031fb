"""``SIGUSR1``: the configuration read again and its ``[limits]`` applied, without a
restart (``SIGHUP`` and ``SIGTERM`` end the agent, as the end of stdin does).

The file, the environment and the flags are read as at start-up (``cli.flags.load_config``);
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
from collections.abc import Callable, Mapping

from .. import log
from ..config import Config, ConfigError, Limits
from ..providers.pool import Models

Deadlines = Mapping[asyncio.Timeout, float]
"""The running turns' ``turn-timeout`` deadlines, with the loop time each turn started."""


def on_signal(models: Models, deadlines: Deadlines, load: Callable[[], Config]) -> None:
    """Reload the limits from ``load()`` on every ``SIGUSR1`` (where there is one)."""
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is None:  # pragma: no cover (not on POSIX)
        return
    asyncio.get_running_loop().add_signal_handler(usr1, reload, models, deadlines, load)


def reload(models: Models, deadlines: Deadlines, load: Callable[[], Config]) -> None:
    """Apply the ``[limits]`` of ``load()`` (a :class:`ConfigError` changes nothing)."""
    try:
        limits = load().limits
    except ConfigError as exc:
        log.warning("configuration not reloaded", error=str(exc))
        return
    old = models.config.limits
    models.set_limits(limits)
    for deadline, started in deadlines.items():
        if not deadline.expired():
            deadline.reschedule(started + limits.turn_timeout)
    changed = {
        name: getattr(limits, name)
        for name in Limits.__struct_fields__
        if getattr(limits, name) != getattr(old, name)
    }
    log.info("limits reloaded", **changed)
