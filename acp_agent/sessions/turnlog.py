"""A session's turns as ``/undo`` and ``/rewind`` see them: each prompt, where it began in
the model's history, the workspace checkpoints of the turns that changed files, and
which of those were taken back. The same :class:`TurnLog` is folded from a log by
``replay`` and kept up to date by the live session, so both agree after a restart.

A turn's place in the history is forgotten when the history is rewritten over it (a
compaction folds it into a summary; a refusal's truncation takes it out): its workspace
can still be put back, its conversation can no longer be cut there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .records import Checkpoint, FileChange, FileState, Rewind, Touched, Undone

#: What a path became is not known: its turn was cut short before its checkpoint.
UNKNOWN = FileState(kind="unknown")


@dataclass(slots=True)
class TurnMark:
    turn: str
    """The prompt's message id."""
    text: str
    at: str
    history: int | None
    """The history's length when the prompt came; ``None``: rewritten since."""


@dataclass(slots=True)
class TurnLog:
    marks: list[TurnMark] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    undone: set[str] = field(default_factory=set)
    """Turns whose checkpoint was taken back or dropped."""

    def prompt(self, turn: str, text: str, at: str, history: int | None) -> None:
        self.marks.append(TurnMark(turn, text, at, history))

    def rewritten(self, keep: int | None = None) -> None:
        """The history was replaced (``keep=None``) or cut to ``keep`` messages."""
        for mark in self.marks:
            if mark.history is not None and (keep is None or mark.history > keep):
                mark.history = None

    def rewound(self, record: Rewind) -> None:
        if record.length is not None:
            index = next((i for i, m in enumerate(self.marks) if m.turn == record.turn), None)
            if index is not None:
                del self.marks[index:]

    def checkpoint(self, record: Checkpoint) -> None:
        """A turn's checkpoint (in the place of what it touched, if it was told so)."""
        index = next((i for i, c in enumerate(self.checkpoints) if c.turn == record.turn), None)
        if index is None:
            self.checkpoints.append(record)
        else:
            self.checkpoints[index] = record

    def touch(self, record: Touched) -> None:
        """Paths a turn is about to change: until its checkpoint comes (if it ever does: a
        turn cut short), a checkpoint of those paths, what they became unknown."""
        index = next((i for i, c in enumerate(self.checkpoints) if c.turn == record.turn), None)
        known = {} if index is None else {c.path: c for c in self.checkpoints[index].files}
        for path, before in record.files.items():
            known.setdefault(path, FileChange(path=path, before=before, after=UNKNOWN))
        provisional = Checkpoint(turn=record.turn, at=record.at, files=list(known.values()))
        if index is None:
            self.checkpoints.append(provisional)
        else:
            self.checkpoints[index] = provisional

    def took_back(self, record: Undone) -> None:
        self.undone.update(record.turns)

    def live(self) -> list[Checkpoint]:
        """The checkpoints not taken back, oldest first."""
        return [c for c in self.checkpoints if c.turn not in self.undone]

    def turns(self, history_length: int) -> list[TurnMark]:
        """The turns that reached the model (the history grew after them), oldest first."""
        out: list[TurnMark] = []
        for i, mark in enumerate(self.marks):
            later = next((m.history for m in self.marks[i + 1 :] if m.history is not None), None)
            end = history_length if later is None else later
            if mark.history is None or mark.history < end:
                out.append(mark)
        return out
