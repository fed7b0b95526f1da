"""Build hook: ship the top-level templates/ and static/ inside the wheel as webui/templates and webui/static.

The repository keeps them at the top level (the project's layout); webui.create_app looks inside the package
first and falls back to the repository's folders, so editable installs need no copy.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithAssets(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in ("templates", "static"):
            src, dst = ROOT / name, Path(self.build_lib) / "webui" / name
            if src.is_dir():
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(src, dst)


setup(cmdclass={"build_py": BuildPyWithAssets})
