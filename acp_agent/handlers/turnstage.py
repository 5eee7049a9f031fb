"""The second late-loaded boundary (see :mod:`.services`): what running a turn stands on.

The factory of each turn's world (:class:`~.turns.Turns`, and through it the engine, the
tools, the providers' retries) and the handlers that run turns: ``prompting``,
``steering`` and the built-in slash commands. Imported by ``Services.turns``: in the
warm-up thread once a session is open (``server.WARM_MODULES``), or by the first request
that needs a turn's world; never on the way to a ``session/new`` response.
"""

from __future__ import annotations

from . import builtins, prompting, steering
from .turns import Turns

__all__ = ["Turns", "builtins", "prompting", "steering"]
