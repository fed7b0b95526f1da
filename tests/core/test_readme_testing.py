"""The README's "Testing your tasks" example is the example files, and it passes as written: pytest runs
examples/test_example_tasks.py in a fresh process, with the plugin as a user's project loads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.core.readme import blocks, section

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def test_the_readme_shows_the_example_files_as_they_are() -> None:
    shown = [body for lang, body in blocks(section("Testing your tasks")) if lang == "python"]
    assert shown == [(EXAMPLES / "example_tasks.py").read_text(), (EXAMPLES / "test_example_tasks.py").read_text()]


def test_the_example_test_file_passes_as_written() -> None:
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "examples/test_example_tasks.py"], cwd=REPO, env=dict(os.environ), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "6 passed" in out.stdout, out.stdout
