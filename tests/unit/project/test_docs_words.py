"""The user's pages speak of the software, not of how it was made: no work sessions,
rounds or issue numbers, no machine a user never saw, and no verdict in README that is
not the checker's own printed line."""

import re

import pytest

from support.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
HISTORY = re.compile(r"\b(issues?|sessions?|rounds?|stops?) #?\d+|\b2-core machine\b|"
                     r"parallel workers' runs|\.\./shared", re.IGNORECASE)


def history_words(text: str) -> list[str]:
    return [m.group(0) for m in HISTORY.finditer(text)]


def verdicts_outside_quotes(text: str) -> list[str]:
    """`met` / `holds` used as a verdict, except inside a code span quoting a checker's
    printed `verdict:` line."""
    bare = re.sub(r"`[^`\n]*verdict:[^`\n]*`", "", text.replace("\n", " "))
    return re.findall(r"\b(?:met|holds)\b", bare, re.IGNORECASE)


def test_the_patterns_catch_what_they_are_for():
    assert history_words("as in issue 47 (session 24), round 5; the 2-core machine") == \
        ["issue 47", "session 24", "round 5", "2-core machine"]
    assert history_words("a DRR round of every flow; two sessions of the user") == []
    assert verdicts_outside_quotes("the bound was met") == ["met"]
    assert verdicts_outside_quotes("it printed `verdict: every bound met`") == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_has_no_history(page):
    found = history_words(page.read_text())
    assert not found, f"{page.relative_to(REPO)}: {found}"


def test_readme_states_no_verdict_of_its_own():
    found = verdicts_outside_quotes((REPO / "README.md").read_text())
    assert not found, f"README.md: {found} outside a quoted checker verdict"


def test_the_test_machine_is_described_once_under_its_title():
    design = (REPO / "docs" / "design.md").read_text()
    assert design.count("\n## The test machine\n") == 1
