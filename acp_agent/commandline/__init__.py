"""The commands of ``acp-agent COMMAND`` (see ``cli.SUBCOMMANDS``) other than the agent
itself: ``run``/``chat``'s command line (:mod:`.human`, the front end is ``human/``),
``sessions``, ``permissions`` and ``doctor``. Each prints for a person, on stderr what is
not its answer, and returns an exit status; none is on the agent's way to ``initialize``."""
