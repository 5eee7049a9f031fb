"""The budget module: exact markers for known inputs, and the fixed overhead of the tools
(their descriptions and schemas are sent with every request)."""

from __future__ import annotations

from acp_agent.tools.budget import (
    cut_line,
    estimate_tokens,
    fit,
    glob_marker,
    list_marker,
    read_markers,
    read_window,
    walk_marker,
)


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


def test_estimate_tokens_counts_as_tokenizers_split() -> None:
    """Numbers in groups of three, letters four a token, each newline and punctuation
    character one, a single space joined to the word after it."""
    assert estimate_tokens("12345\n") == 3
    assert estimate_tokens("hello world\n") == 2 + 2 + 1
    assert estimate_tokens("def f():\n\treturn x\n") == 1 + 1 + 3 + 1 + 1 + 2 + 1 + 1
    assert estimate_tokens("") == 0


def test_listing_markers() -> None:
    assert fit(["a" * 9] * 5000, 10_000) == ["a" * 9] * 2000  # 20,000 bytes
    assert fit(["a", "b", "c"], 2) == ["a", "b"]
    assert glob_marker(500, 1337) == "[Showing 500 of 1,337 paths; narrow the pattern or `path`.]"
    assert list_marker(500, 501) == (
        "[Showing 500 of 501 entries; use glob to find specific names.]")
    assert glob_marker(3, 3) is None and list_marker(0, 0) is None
    assert walk_marker(200_000) == ("[The search stopped after visiting 200,000 entries, so "
                                    "results are incomplete; narrow `path`.]")
