"""Packaging glue beside pyproject.toml: the wheel carries hctune's non-Python parts as package
data, copied at build time from the checkout's top-level folders into hctune/_data/, where
hctune.paths.data_dir() finds them with importlib.resources.  Globs, so new files (a new
allocator/hc/*.c, a new template) ship without editing this file."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# (folder, globs inside it) shipped under hctune/_data/<folder>/
DATA = {
    "configs": ("**/*.toml", "**/*.txt"),
    "templates": ("**/*",),
    "allocator": ("**/*.c", "**/*.h", "**/*.mk"),
    "tracer": ("*.c", "*.h", "*.cpp", "*.mk"),
}


def data_files():
    for folder, globs in DATA.items():
        for g in globs:
            for p in sorted((HERE / folder).glob(g)):
                if p.is_file() and "__pycache__" not in p.parts:
                    yield p.relative_to(HERE)


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout's own folders
        target = Path(self.build_lib) / "hctune" / "_data"
        for rel in data_files():
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(HERE / rel, dest)


setup(cmdclass={"build_py": BuildPyWithData})
