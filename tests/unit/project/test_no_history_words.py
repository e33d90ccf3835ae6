"""No tracked file speaks of how the project was made: a user never saw its work items.

Comments, docstrings, test names, data files, documents and file names say what the code
does and why, and results are dated by day and commit. Numbered work sessions, rounds of
work, issue numbers, stops, the machine the work ran on and parallel workers' runs are
not the product's words. The test lists every tracked file (``git ls-files``; binary files
have only their path checked) and fails naming ``path:line`` for each line that matches
one of :data:`PATTERNS`, and each path that does.

History told without numbers ("the earlier version", "used to") cannot be told from
ordinary English by a pattern; reviews catch that. The examples below are split into
adjacent string literals so that this file's own lines do not match its patterns.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from support.paths import REPO

# name -> pattern (case-insensitive), each with why it is there. One place: the scan, the
# path check and the examples below all use these. The comments write a number as N so
# that they do not match; HISTORY below gives each pattern's real examples.
PATTERNS: dict[str, re.Pattern[str]] = {name: re.compile(rx, re.IGNORECASE) for name, rx in {
    # a numbered work session: "session N", "sessions N-M", "sessionN"
    # ("requests.Session", a "session fixture", a process's own session carry no number)
    "numbered session": r"(?<!--)\bsessions?[ _-]?#?\d+",
    # a session named in parentheses after a figure, numbered or not
    "session in parentheses": r"[(]sessions?\b",
    # a numbered round of work: "round N", "roundN", "rounds N-M", "round-N"
    # ("round(x, 2)", "round trip", a ps-lite message round carry no number after the word;
    # a command's option such as bench_controller's "--rounds N" is a count, not a round, and
    # the exchange model's "start-up rounds N" counts ps-lite message rounds)
    "numbered round": r"(?<!--)(?<!start-up )\brounds?[ _-]?#?\d+",
    # a run or file name carrying its round of work: "...-all-rN.md", "runs rN, rM"
    # (a rack named rN stands alone, never after a hyphen or the word "run")
    "round suffix": r"[-_]r\d+(?=[-_.*/\s`'\")]|$)|\bruns? r\d+\b",
    # an issue by number: "issue N", "issue #N", "Issue N's", "issues N and M",
    # "issueN-usability", "issue_N"
    "numbered issue": r"(?<!--)\bissues?[ _-]?#?\d+",
    # an item of an issue with the number left out
    "an issue's item": r"\bissue items?\b",
    # a numbered stop of the work: "stop N" (a duration such as "stop 2 s" or "stops 30 ms"
    # is a figure, not a stop)
    "numbered stop": (r"(?<!--)\bstops?[ _-]?#?\d+\b"
                      r"(?!\s*(?:s|ms|us|seconds?|min|minutes?|h|hours?)\b)"),
    # the machine the work ran on, by its core count: "the N-core machine", "a shared
    # N-core development machine" (a fact about small hosts reads "a host with two cores",
    # docs/design.md, "The test machine")
    "the work's machine": r"\b(?:2|two)[- ]core\s+(?:[\w-]+\s+){0,2}?machine\b",
    # parallel workers' runs beside a measurement: the others' runs, work, tests, benches
    # or builds on the shared machine, and the machine named after them ("helpers" as a
    # word of code, "the helpers tests share", stays an ordinary word)
    "parallel workers' runs": (
        r"\bother helpers\b|\banother helper's\b|\bthis helper's\b|\bhelper machine\b"
        r"|\bhelpers' (?:runs?|work|tests?|benches|fabric)\b|\bparallel (?:helpers|sessions)\b"
        r"|\bother engineers' (?:runs?|builds?|tests?|work)\b|\bcoordinator's (?:CI|runs?)\b"),
}.items()}


def history_words(text: str) -> list[tuple[str, str]]:
    """(pattern name, matched text) for every pattern of :data:`PATTERNS` in ``text``."""
    return [(name, m.group(0)) for name, rx in PATTERNS.items() for m in rx.finditer(text)]


def hits_in(path: str, data: bytes) -> list[str]:
    """'path:line: name: "text"' for each line of a file's bytes (and its path, as line 0)
    that speaks of how the project was made; a binary file (a NUL byte in its first 8 KiB)
    has only its path checked."""
    out = [f"{path}:0 (path): {name}: {text!r}" for name, text in history_words(path)]
    if b"\0" in data[:8192]:
        return out
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        out += [f"{path}:{number}: {name}: {text!r}" for name, text in history_words(line)]
    return out


def tracked_files(repo: Path = REPO) -> list[str]:
    """Every path git tracks in ``repo`` (README, docs, tests and bench included)."""
    done = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True)
    if done.returncode != 0:
        pytest.fail(f"git ls-files in {repo} failed (this test needs a git checkout): "
                    f"{done.stderr.decode(errors='replace').strip()}")
    return [p for p in done.stdout.decode().split("\0") if p]


def scan(paths: list[str], repo: Path = REPO) -> list[str]:
    """The hits of :func:`hits_in` over ``paths`` (relative to ``repo``); a tracked path
    deleted in the work tree is skipped (git still lists it until the deletion is staged)."""
    out: list[str] = []
    for rel in paths:
        file = repo / rel
        if file.is_file():
            out += hits_in(rel, file.read_bytes())
    return out


def test_no_tracked_file_speaks_of_how_the_project_was_made():
    paths = tracked_files()
    assert len(paths) > 100, f"git ls-files listed {len(paths)} files: not this repository?"
    hits = scan(paths)
    assert not hits, (f"{len(hits)} lines speak of how the project was made (say what the "
                      f"code does and why instead):\n" + "\n".join(hits))


# Each of these must match (the pattern named): what the scan exists to find.
HISTORY = [
    ("numbered session", "measured in session" " 24, before the fix"),
    ("numbered session", "see sessions" " 16-18"),
    ("session in parentheses", "the short FIFO's depth (sess" "ion 20)"),
    ("numbered round", "bench/HISTORY.md, round" " 5"),
    ("numbered round", "heavy-tail-0.7-round" "5.md"),
    ("round suffix", "bench/results/heavy-tail-0.7-all-r" "11.md"),
    ("round suffix", "judged on runs r" "11, r13 and r12"),
    ("numbered issue", "the bounds of issue" " 47 item 6"),
    ("numbered issue", "see issue" " #47"),
    ("numbered issue", "Issue" " 47's analysis"),
    ("numbered issue", "the points of issues" " 45 and 47"),
    ("numbered issue", "bench/results/issue" "16-usability.md"),
    ("an issue's item", "Failure policy (issue" " item 5)"),
    ("numbered stop", "the clean-clone CI of stop" " 59 failed"),
    ("the work's machine", "on the 2-core" " machine the CPU is the bottleneck"),
    ("the work's machine", "26 s on the 2-core" " development machine"),
    ("the work's machine", "a loaded two-core" " machine"),
    ("parallel workers' runs", "load average 12 (other" " helpers'" " runs)"),
    ("parallel workers' runs", "shared with four other" " helpers"),
    ("parallel workers' runs", "2 cores shared with four other engineers'" " builds"),
]

# None of these may match: ordinary words of the product that look alike.
ORDINARY = [
    "each one's JSON round trip, and the round trips of a request",
    "one push + pull round through the PS; a message round waits a DRR round",
    'return round(100 * (b - a) / a, 1)',
    "flow_mods_per_round = rounds(8, 3)",
    "python -m bench.controller.bench_controller --reports 1000 --rounds 3 --json",
    "session = requests.Session()",
    "the session fixture fabric_env; a child leads its own session",
    "stop 2 s after the last batch, then stops 30 ms later",
    '"racks": [{"name": "r1", "tor": "t1"}], rack: r2',
    "rmse, r2 = ev['random_holdout']",
    "the helpers tests share (tests/support/); # ---- helpers ----",
    "measured on a host with two cores (docs/design.md, 'The test machine')",
    "we issue BEGIN/COMMIT ourselves; every issued key's sum has landed",
    "around 5 ms; 2 rounds of 8 keys",
]


@pytest.mark.parametrize("name,text", HISTORY)
def test_each_pattern_finds_the_history_it_is_there_for(name, text):
    assert name in {n for n, _ in history_words(text)}, (name, text)


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_words_are_left_alone(text):
    assert history_words(text) == [], text


def test_every_pattern_has_an_example_it_finds():
    assert {name for name, _ in HISTORY} == set(PATTERNS)


def test_a_hit_names_its_file_and_line_and_a_path_is_checked_too():
    text = "fine line\nthe 2-core" " machine\n"
    assert hits_in("docs/a.md", text.encode()) == [
        "docs/a.md:2: the work's machine: '2-core" " machine'"]
    assert hits_in("bench/results/x-round" "4.json", b"{}") == [
        "bench/results/x-round" "4.json:0 (path): numbered round: 'round" "4'"]
    # a binary file: only its path counts, whatever its bytes hold
    assert hits_in("bench/plots/x-round" "4.png", b"\x89PNG\0 session" b" 24") == [
        "bench/plots/x-round" "4.png:0 (path): numbered round: 'round" "4'"]
    assert hits_in("bench/plots/x.png", b"\x89PNG\0 session" b" 24") == []
