"""docs/api.md and docs/metrics.md are what the code generates (no drift)."""

from pathlib import Path

from sluice.reference import api_markdown, metrics_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_api_reference_is_current():
    assert (DOCS / "api.md").read_text() == api_markdown(), \
        "run `python -m sluice.reference docs/`"


def test_metrics_reference_is_current():
    assert (DOCS / "metrics.md").read_text() == metrics_markdown(), \
        "run `python -m sluice.reference docs/`"
