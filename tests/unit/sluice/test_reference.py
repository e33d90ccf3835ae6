"""docs/api.md and docs/metrics.md are what the code generates (no drift)."""


from sluice.reference import api_markdown, metrics_markdown
from support.paths import REPO

DOCS = REPO / "docs"


def test_api_reference_is_current():
    assert (DOCS / "api.md").read_text() == api_markdown(), \
        "run `python -m sluice.reference docs/`"


def test_metrics_reference_is_current():
    assert (DOCS / "metrics.md").read_text() == metrics_markdown(), \
        "run `python -m sluice.reference docs/`"
