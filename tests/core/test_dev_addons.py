"""`asynqpy dev` add-ons come from the asynqpy.dev_addons entry points: their options, banner lines and stop."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.core.procs import Proc, run

ADDON = '''
import argparse
from pathlib import Path
from asynqpy.plugins import DevContext, RunningAddon

class Board:
    name = "board"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--board-port", type=int, default=9999, help="port of the test board")

    def start(self, ctx: DevContext) -> RunningAddon:
        marker = ctx.state_dir / "board.stopped"
        return RunningAddon(banner=[f"Board:     http://127.0.0.1:{ctx.args.board_port}/ on {ctx.redis_url}"],
                            stop=lambda: marker.write_text("yes"))

class Broken:
    name = "broken"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def start(self, ctx: DevContext) -> RunningAddon:
        raise RuntimeError("no assets built")

board = Board()
broken = Broken()
'''


def install_addons(where: Path) -> None:
    """A module and the metadata of a distribution that declares it as two dev add-ons (found on PYTHONPATH)."""
    (where / "fakeboard.py").write_text(ADDON)
    meta = where / "fakeboard-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeboard\nVersion: 1.0\n")
    (meta / "entry_points.txt").write_text("[asynqpy.dev_addons]\nboard = fakeboard:board\n"
                                          "broken = fakeboard:broken\n")


def test_addons_add_options_banner_lines_and_are_stopped(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install_addons(site)
    pythonpath = str(site)
    res = run("dev", "--help", PYTHONPATH_EXTRA=pythonpath)
    assert res.returncode == 0 and "--board-port" in res.stdout and "board" in res.stdout, res
    assert "--board-port" not in run("dev", "--help").stdout  # without the add-on installed
    work = tmp_path / "work"
    work.mkdir()
    with Proc.asynqpy("dev", "--port", "0", "--no-demo", "--board-port", "8123", cwd=work,
                      PYTHONPATH_EXTRA=pythonpath) as dev:
        banner = dev.wait_for("Try:")
        assert "Board:     http://127.0.0.1:8123/ on redis://127.0.0.1:" in banner
        assert "broken: did not start: no assets built" in banner  # dev goes on without it, and says so
        code, out = dev.stop(signal.SIGTERM)
    assert code == 0, out
    assert (work / ".asynqpy" / "dev" / "board.stopped").read_text() == "yes"
