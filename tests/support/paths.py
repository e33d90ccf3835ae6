"""Where the tests find the repository and their data, wherever the test file lies."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]      # tests/support/paths.py -> the repository
TEST_DATA = REPO / "tests" / "data"
