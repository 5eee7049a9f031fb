"""Typing during a turn (issue 28, item 3), below the screen: the composer's keys, and the
keyboard handing keys to it on a real pseudo-terminal while a question still takes its own
key. The whole chat, steering and queueing, is driven in tests/test_terminal.py."""

from __future__ import annotations

import asyncio
import termios

from acp_agent.errors import RemoteError
from acp_agent.human import Session
from acp_agent.human.checks import Options
from acp_agent.human.compose import Composer

from .limits import WAIT
from .test_human import Notes, Typist


class Typed:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bool]] = []
        self.shown: list[str] = []
        self.composer = Composer(lambda text, steer: self.sent.append((text, steer)),
                                 self.shown.append)  # fmt: skip


def test_enter_steers_tab_queues_and_the_line_is_edited() -> None:
    k = Typed()
    k.composer.feed("fix the tset")
    k.composer.feed("\x7f\x7f\x7fest")  # backspace three times
    assert k.shown[-1] == "fix the test"
    k.composer.feed("\r")
    assert k.sent == [("fix the test", True)] and k.shown[-1] == ""
    k.composer.feed("then run\tit all\n")
    assert k.sent[1:] == [("then run", False), ("it all", True)]
    k.composer.feed("\r\t   \r")  # nothing typed: nothing sent
    assert len(k.sent) == 3


def test_words_lines_escape_sequences_and_control_keys() -> None:
    k = Typed()
    k.composer.feed("one two three\x17")  # Ctrl-W: the last word
    assert k.composer.text == "one two "
    k.composer.feed("\x17\x17")
    assert k.composer.text == ""
    k.composer.feed("keep\x1b[")  # an arrow split across two reads
    k.composer.feed("D\x1bOH\x1b[1;5C\x1bx\x01\x02")  # arrows, Home, Ctrl-arrow, Alt-x, Ctrl-A/B
    assert k.composer.text == "keep"
    k.composer.feed(" é ✓\x15")  # Ctrl-U: the whole line
    assert k.composer.text == ""
    k.composer.feed("not sent")
    assert k.composer.take() == "not sent" and k.composer.text == "" and k.shown[-1] == ""
    assert k.sent == []


async def test_the_keyboard_hands_keys_over_as_typed_and_a_question_takes_its_key() -> None:
    typist = Typist(tty=True)
    kb, fd = typist.keyboard, typist.stream.fileno()
    got: list[str] = []
    arrived = asyncio.Event()

    def handler(text: str) -> None:
        got.append(text)
        arrived.set()

    kb.compose(handler)
    mode = termios.tcgetattr(fd)[3]
    assert not mode & termios.ICANON and not mode & termios.ECHO  # key by key, unechoed
    typist.type("ab")  # no Enter: the keys arrive all the same
    await asyncio.wait_for(arrived.wait(), WAIT)
    assert "".join(got) == "ab"
    kb.listen()  # a question shows: its key is its own
    typist.type("y")
    assert await asyncio.wait_for(kb.readkey(), WAIT) == "y"
    assert "".join(got) == "ab"
    assert not termios.tcgetattr(fd)[3] & termios.ICANON  # and composing goes on
    arrived.clear()
    typist.type("c")
    await asyncio.wait_for(arrived.wait(), WAIT)
    assert "".join(got) == "abc"
    kb.compose(None)  # the turn ended: lines again, still unechoed
    mode = termios.tcgetattr(fd)[3]
    assert mode & termios.ICANON and not mode & termios.ECHO
    kb.close()
    typist.close()


class SteeredClient:
    """A fake agent connection: ``steer`` answers what ``outcomes`` say, in order; a
    held steer waits for ``release``."""

    def __init__(self, steering: bool, outcomes: list[str | Exception]) -> None:
        self.steering = steering
        self.outcomes = outcomes
        self.sent: list[str] = []
        self.release = asyncio.Event()
        self.hold_first = False

    async def steer(self, session_id: str, text: str) -> str:
        self.sent.append(text)
        if self.hold_first and len(self.sent) == 1:
            await self.release.wait()
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def _session(client: SteeredClient) -> tuple[Session, Notes]:
    options = Options(command="chat", prompt=None, cwd="/", policy="deny", save=True,
                      json=False, debug=False, model="offline")  # fmt: skip
    session = Session(options, [])
    notes = Notes()
    session.view = notes
    session.client = client  # type: ignore[assignment]  # a fake: steering and steer only
    session.sid, session.in_turn = "s1", True
    return session, notes


async def _settled(session: Session) -> None:
    while (steered := session._steered) is not None and not steered.done():
        await steered


async def test_enter_queues_when_the_agent_cannot_be_steered() -> None:
    client = SteeredClient(steering=False, outcomes=[])
    session, notes = _session(client)
    session.submit("look at b.py too", steer=True)
    assert client.sent == [] and session.queued == ["look at b.py too"]
    assert notes.notes == ["queued for after this turn: look at b.py too"]


async def test_enter_after_the_turn_ended_is_queued_not_lost() -> None:
    """The agent said the turn was over (``promptRequired``): the line is the next prompt."""
    client = SteeredClient(steering=True, outcomes=["promptRequired"])
    session, notes = _session(client)
    session.submit("and the docs", steer=True)
    await _settled(session)
    assert client.sent == ["and the docs"] and session.queued == ["and the docs"]
    assert notes.notes == ["the turn had ended; queued as the next prompt: and the docs"]


async def test_steers_keep_their_order_and_a_failed_one_is_queued() -> None:
    """The second Enter waits for the first steer's answer; a refused steer is queued."""
    client = SteeredClient(
        steering=True, outcomes=["injected", RemoteError(-32603, "Internal error")]
    )
    client.hold_first = True
    session, notes = _session(client)
    session.submit("first", steer=True)
    session.submit("second", steer=True)
    for _ in range(5):  # the second is not sent while the first is unanswered
        await asyncio.sleep(0)
    assert client.sent == ["first"]
    client.release.set()
    await _settled(session)
    assert client.sent == ["first", "second"] and session.queued == ["second"]
    assert notes.notes == [
        "> first",
        "  ↳ steered: the model reads it at its next request",
        "steering failed (Internal error); queued as the next prompt: second",
    ]
