"""The budget module: exact markers for known inputs, and the fixed overhead of the tools
(their descriptions and schemas are sent with every request)."""

from __future__ import annotations

from acp_agent.tools.budget import (
    COMMAND_MAX_BYTES,
    HeadTail,
    bound_output,
    cut_line,
    fit,
    glob_marker,
    list_marker,
    read_markers,
    read_window,
    walk_marker,
)

HINT = ("To see all of it, redirect the output to a file (`cmd > out.log 2>&1`) and read it "
        "in parts with read_file (offset/limit) or grep.")


def test_cut_line() -> None:
    assert cut_line("abc", 3) == ("abc", False)
    assert cut_line("abcdef", 3) == ("abc… [+3 chars]", True)
    assert cut_line("x" * 5003, 2000) == ("x" * 2000 + "… [+3,003 chars]", True)


def test_read_window_limit_and_markers() -> None:
    window = read_window([f"l{i}\n" for i in range(5, 10)], 5, 3)
    assert window.entries == ["     5\tl5", "     6\tl6", "     7\tl7"]
    assert (window.first, window.last, window.more, window.full) == (5, 7, True, False)
    assert read_markers(window, 9) == [
        "[Lines 5-7 of 9 shown. Call read_file with offset=8 to continue.]"]
    assert read_markers(window, None) == [
        "[Lines 5-7 shown. Call read_file with offset=8 to continue.]"]
    whole = read_window(["a\r\n", "b"], 1)
    assert whole.entries == ["     1\ta", "     2\tb"] and read_markers(whole, 2) == []


def test_head_tail_keeps_both_ends_and_counts_what_it_cut() -> None:
    capture = HeadTail(limit=40)
    for i in range(1, 101):
        capture.feed(f"line {i:03}\n".encode())
    text, cut = capture.render()
    assert cut
    assert text == ("line 001\nline 002\n"  # lines 3-98 (96 x 9 bytes) omitted
                    f"[... 864 bytes (96 lines) of output omitted. {HINT}]\n"
                    "line 099\nline 100\n")
    small = HeadTail(limit=40)
    small.feed(b"short\n")
    assert small.render() == ("short\n", False)


def test_bound_output_and_the_editors_cut() -> None:
    assert bound_output("ok\n") == ("ok\n", False)
    assert bound_output("ok\n", editor_cut=True) == (
        "[The editor's terminal cut the beginning of the output (it keeps the last 30,000 "
        f"bytes). {HINT}]\nok\n", True)
    big = "".join(f"{i}\n" for i in range(40_000))
    out, cut = bound_output(big)
    assert cut and out.startswith("0\n1\n") and out.endswith("39999\n")
    assert len(out.encode()) <= COMMAND_MAX_BYTES + 300


def test_listing_markers() -> None:
    assert fit(["a" * 9] * 5000, 10_000) == ["a" * 9] * 2000  # 20,000 bytes
    assert fit(["a", "b", "c"], 2) == ["a", "b"]
    assert glob_marker(500, 1337) == "[Showing 500 of 1,337 paths; narrow the pattern or `path`.]"
    assert list_marker(500, 501) == (
        "[Showing 500 of 501 entries; use glob to find specific names.]")
    assert glob_marker(3, 3) is None and list_marker(0, 0) is None
    assert walk_marker(200_000) == ("[The search stopped after visiting 200,000 entries, so "
                                    "results are incomplete; narrow `path`.]")
