"""Agent Skills: discovery (order, clashes, the roots), the format's rules (each broken
case reported, never a crash), the catalogue and its budget, the ``skill`` tool, and the
slash command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_agent.conversation import estimate_tokens
from acp_agent.engine import skills as sk
from acp_agent.engine.projectfiles import Refused
from acp_agent.errors import ToolError
from acp_agent.tools import ToolContext

from .tools.fake_client import FakeClient

GOOD = "---\nname: {name}\ndescription: {desc}\n---\n{body}\n"


def skill(root: Path, name: str, desc: str = "Does a thing. Use when asked.",
          body: str = "Step one.", raw: str | None = None) -> Path:  # fmt: skip
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    path.write_text(raw if raw is not None else GOOD.format(name=name, desc=desc, body=body))
    return path


def env_of(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home" / ".cfg")}


def test_the_nearest_skill_of_a_name_wins(tmp_path: Path) -> None:
    """cwd's .agents beats cwd's .claude beats the parent's (up to the repository root)
    beats the user's acp-agent directory beats ~/.agents; above the repository nothing."""
    repo = tmp_path / "repo"
    cwd = repo / "pkg"
    (repo / ".git").mkdir(parents=True)
    cwd.mkdir()
    env = env_of(tmp_path)
    skill(tmp_path / ".agents" / "skills", "outside")  # above the repository: not looked at
    skill(cwd / ".agents" / "skills", "a", "near agents")
    skill(cwd / ".claude" / "skills", "a", "near claude")
    skill(cwd / ".claude" / "skills", "b", "near claude")
    skill(repo / ".agents" / "skills", "b", "root agents")
    skill(repo / ".agents" / "skills", "c", "root agents")
    user = tmp_path / "home" / ".cfg" / "acp-agent" / "skills"
    shared = tmp_path / "home" / ".agents" / "skills"
    skill(user, "c", "user")
    skill(user, "d", "user")
    skill(shared, "d", "shared")
    skill(shared, "e", "shared")
    found = sk.discover(str(cwd), [str(cwd)], env)
    assert found.problems == ()
    got = {name: s.description for name, s in found.skills.items()}
    assert got == {"a": "near agents", "b": "near claude", "c": "root agents", "d": "user",
                   "e": "shared"}  # fmt: skip
    assert list(got) == ["a", "b", "c", "d", "e"]  # nearest first: the catalogue's order
    assert found.skills["c"].path == str(repo / ".agents" / "skills" / "c" / "SKILL.md")
    assert found.skills["d"].scope == "user" and found.skills["a"].scope == "project"


BROKEN = {
    "no-front": ("Just text.\n", "has no front matter"),
    "bad-yaml": ("---\nname: bad-yaml\ndescription: [unclosed\n---\nx\n", "not valid YAML"),
    "a-list": ("---\n- one\n- two\n---\nx\n", "not a mapping"),
    "no-name": ("---\ndescription: d\n---\nx\n", "has no `name`"),
    "upper": ("---\nname: Upper\ndescription: d\n---\nx\n", "`Upper` may hold only"),
    "dashes": ("---\nname: da--shes\ndescription: d\n---\nx\n", "`da--shes` may hold only"),
    "edge": ("---\nname: -edge\ndescription: d\n---\nx\n", "`-edge` may hold only"),
    "long": ("---\nname: " + "l" * 65 + "\ndescription: d\n---\nx\n", "65 characters long"),
    "other": ("---\nname: another\ndescription: d\n---\nx\n", "not its folder's (`other`)"),
    "no-desc": ("---\nname: no-desc\n---\nx\n", "has no `description`"),
    "blank-desc": ("---\nname: blank-desc\ndescription: '  '\n---\nx\n", "has no `description`"),
    "huge-desc": ("---\nname: huge-desc\ndescription: " + "d" * 1025 + "\n---\nx\n",
                  "1025 characters long (at most 1,024)"),
    "compat": ("---\nname: compat\ndescription: d\ncompatibility: " + "c" * 501 + "\n---\n",
               "`compatibility` must be text of 1 to 500"),
    "meta": ("---\nname: meta\ndescription: d\nmetadata: [1]\n---\n", "`metadata` must be"),
    "tools": ("---\nname: tools\ndescription: d\nallowed-tools: 3\n---\n", "`allowed-tools`"),
    "license": ("---\nname: license\ndescription: d\nlicense: [x]\n---\n", "`license` must"),
}  # fmt: skip


def test_each_broken_skill_is_skipped_with_its_file_and_problem(tmp_path: Path) -> None:
    where = tmp_path / ".agents" / "skills"
    for name, (raw, _) in BROKEN.items():
        skill(where, name, raw=raw)
    skill(where, "fine", "A good one.")
    skill(where, "big", raw=GOOD.format(name="big", desc="d", body="x" * sk.MAX_SKILL_BYTES))
    skill(where, "binary", raw="---\nname: binary\n\0---\n")
    (where / "empty-folder").mkdir()  # no SKILL.md: not a skill, nothing to say
    found = sk.discover(str(tmp_path), [str(tmp_path)], env_of(tmp_path))
    assert list(found.skills) == ["fine"]
    problems = {Path(p.path).parent.name: p.reason for p in found.problems}
    assert set(problems) == {*BROKEN, "big", "binary"}
    for name, (_, expected) in BROKEN.items():
        assert expected in problems[name], (name, problems[name])
    assert "larger than 128 KiB" in problems["big"] and "binary" in problems["binary"]
    assert all(p.path.endswith("SKILL.md") for p in found.problems)


def test_optional_fields_of_the_format_are_accepted(tmp_path: Path) -> None:
    raw = ("\ufeff---\nname: pdf\ndescription: >-\n  Extract PDF text.\n  Use for PDFs.\n"
           "license: Apache-2.0\ncompatibility: Needs poppler\nmetadata:\n  author: me\n"
           "allowed-tools: [Read, Bash(git:*)]\nargument-hint: file\n---\n# PDF\n\nRun "
           "scripts/extract.py.\n")  # fmt: skip
    skill(tmp_path / ".agents" / "skills", "pdf", raw=raw)
    found = sk.discover(str(tmp_path), [str(tmp_path)], env_of(tmp_path))
    pdf = found.skills["pdf"]
    assert pdf.description == "Extract PDF text. Use for PDFs." and pdf.hint == "file"
    assert pdf.body == "# PDF\n\nRun scripts/extract.py."
    assert pdf.expand("a.pdf").endswith("</skill>\n\na.pdf")
    assert "Skill folder: " + str(tmp_path / ".agents" / "skills" / "pdf") in pdf.expand("")


def test_a_skill_linked_out_of_the_roots_is_refused(tmp_path: Path) -> None:
    """A project's skill folder, or its SKILL.md, leading outside the roots is not read;
    the user's own skills are read inside their skills directory only."""
    outside = tmp_path / "outside"
    skill(outside, "evil", "Secret instructions.")
    skill(outside, "file-link", "Secret too.")
    project = tmp_path / "proj"
    where = project / ".agents" / "skills"
    where.mkdir(parents=True)
    os.symlink(outside / "evil", where / "evil")
    (where / "file-link").mkdir()
    os.symlink(outside / "file-link" / "SKILL.md", where / "file-link" / "SKILL.md")
    env = env_of(tmp_path)
    user = tmp_path / "home" / ".cfg" / "acp-agent" / "skills"
    skill(user, "mine", "The user's own.")
    user.joinpath("linked").mkdir()
    os.symlink(outside / "evil" / "SKILL.md", user / "linked" / "SKILL.md")
    found = sk.discover(str(project), [str(project)], env)
    assert list(found.skills) == ["mine"]
    refused = {Path(p.path).parent.name: p.reason for p in found.problems}
    assert set(refused) == {"evil", "file-link", "linked"}
    assert all("outside the session's roots" in r for r in refused.values())
    assert str(outside / "evil" / "SKILL.md") in refused["evil"]


def test_a_skill_above_the_roots_is_read_where_it_was_found(tmp_path: Path) -> None:
    """A session in a subdirectory gets the repository root's skills, but a link from
    there out of the repository is refused."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    skill(repo / ".agents" / "skills", "root-skill")
    skill(tmp_path / "elsewhere", "away")
    os.symlink(tmp_path / "elsewhere" / "away", repo / ".agents" / "skills" / "away")
    found = sk.discover(str(repo / "sub"), [str(repo / "sub")], env_of(tmp_path))
    assert list(found.skills) == ["root-skill"]
    assert [Path(p.path).parent.name for p in found.problems] == ["away"]


def test_the_catalogue_keeps_to_its_budget_and_names_what_it_left_out(tmp_path: Path) -> None:
    where = tmp_path / ".agents" / "skills"
    for i in range(60):
        skill(where, f"skill-{i:02d}", f"Skill number {i} " + "words " * 30)
    found = sk.discover(str(tmp_path), [str(tmp_path)], env_of(tmp_path))
    text, dropped = sk.catalogue(found.skills, budget=2_000)
    assert estimate_tokens([], text) <= 2_000 + 200  # the note naming the rest
    shown = [n for n in found.skills if f"- {n}: " in text]
    assert shown and dropped and shown + dropped == list(found.skills)
    assert f"{len(dropped)} more skill(s) are not listed" in text and dropped[0] in text
    assert sk.catalogue({}) == ("", [])
    whole, none = sk.catalogue(found.skills, budget=100_000)
    assert none == [] and "not listed" not in whole


def test_changes_are_told_as_a_note(tmp_path: Path) -> None:
    where = tmp_path / ".agents" / "skills"
    skill(where, "keep")
    skill(where, "edit", "Old description.")
    skill(where, "gone")
    env = env_of(tmp_path)
    before = sk.entries(sk.discover(str(tmp_path), [str(tmp_path)], env).skills)
    assert sk.changes(before, sk.discover(str(tmp_path), [str(tmp_path)], env).skills) is None
    skill(where, "edit", "New description.")
    skill(where, "fresh", "Brand new.")
    (where / "gone" / "SKILL.md").unlink()
    note = sk.changes(before, sk.discover(str(tmp_path), [str(tmp_path)], env).skills)
    assert note is not None
    assert "added:\n- fresh: Brand new." in note and "changed:\n- edit: New description." in note
    assert "removed: gone" in note and "keep" not in note


async def test_the_skill_tool_loads_instructions_and_names_the_files(tmp_path: Path) -> None:
    path = skill(tmp_path / ".agents" / "skills", "release", "Cut a release.",
                 "Run scripts/bump.sh then tag.")  # fmt: skip
    (path.parent / "scripts").mkdir()
    (path.parent / "scripts" / "bump.sh").write_text("echo bump\n")
    (path.parent / "references").mkdir()
    (path.parent / "references" / "NOTES.md").write_text("notes\n")
    tool = sk.SkillTool()

    async def emit(update: object) -> None:
        return None

    ctx = ToolContext(session_id="s", cwd=str(tmp_path), roots=[str(tmp_path)],
                      client=FakeClient(), tool_call_id="c", emit=emit,
                      env=env_of(tmp_path))  # fmt: skip
    args = tool.parse({"name": "release"})
    assert tool.describe(args, ctx).access == "none"  # no question: it was checked already
    out = await tool.run(args, ctx)
    assert "Run scripts/bump.sh then tag." in out.text and "---" not in out.text
    assert "references/NOTES.md" in out.text and "scripts/bump.sh" in out.text
    assert f"Skill folder: {path.parent}" in out.text
    with pytest.raises(ToolError, match="no skill named 'nope'; the skills: release"):
        await tool.run(tool.parse({"name": "nope"}), ctx)


def test_refused_is_a_value() -> None:
    """Loading a file that is not there reports it (a race with a deletion)."""
    got = sk.load("/nonexistent/x/SKILL.md", ["/nonexistent"])
    assert isinstance(got, Refused) and "cannot be read" in got.reason
