"""The user's pages point only at what a user has, and README states no verdict that is not
the checker's own printed line. (History words in every tracked file, these pages included,
are guarded by test_no_history_words.py.)"""

import re

from support.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def verdicts_outside_quotes(text: str) -> list[str]:
    """`met` / `holds` used as a verdict, except inside a code span quoting a checker's
    printed `verdict:` line."""
    # code spans taken in order, each from its opening backtick to its closing one (a
    # pattern tried at every position would take a closing backtick for an opening one)
    bare = re.sub(r"`([^`]*)`", lambda m: "" if "verdict:" in m.group(1) else m.group(0),
                  text.replace("\n", " "))
    return re.findall(r"\b(?:met|holds)\b", bare, re.IGNORECASE)


def test_the_verdict_pattern_catches_what_it_is_for():
    assert verdicts_outside_quotes("the bound was met") == ["met"]
    assert verdicts_outside_quotes("it printed `verdict: every bound met`") == []
    assert verdicts_outside_quotes("`a` then `NOT met` where the `verdict: x` says") == ["met"]


def test_no_page_points_at_files_a_user_does_not_have():
    found = [p.name for p in PAGES if "../shared" in p.read_text()]
    assert not found, f"pages naming ../shared: {found}"


def test_readme_states_no_verdict_of_its_own():
    found = verdicts_outside_quotes((REPO / "README.md").read_text())
    assert not found, f"README.md: {found} outside a quoted checker verdict"


def test_the_test_machine_is_described_once_under_its_title():
    design = (REPO / "docs" / "design.md").read_text()
    assert design.count("\n## The test machine\n") == 1
