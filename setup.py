"""Build configuration that pyproject.toml cannot express: the skill's folders mapped into the package.

The repository keeps the skill's layout (SKILL.md, references/, profiles/, schemas/ and patches/ beside
distdoctor/). The wheel carries the same files inside the package (distdoctor/SKILL.md,
distdoctor/references/, ...; patches/ as the subpackage distdoctor.patches), so no generic top-level
name is installed; distdoctor.paths finds the bundled copy there and the checkout's copy otherwise.
"""

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# subpackage -> (folder in the repository, its data files)
BUNDLED = {
    "distdoctor.patches": ("patches", []),
    "distdoctor.references": ("references", ["*.md", "*.yaml"]),
    "distdoctor.profiles": ("profiles", ["*.md"]),
    "distdoctor.schemas": ("schemas", ["*.json"]),
}
FILES = ["SKILL.md"]  # files at the repository root, copied into distdoctor/


class BuildPy(build_py):
    """Also copy FILES into the built package (not in editable mode: there the checkout is read)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in FILES:
            target = Path(self.build_lib, "distdoctor", name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(HERE / name, target)


setup(
    packages=find_packages(include=["distdoctor", "distdoctor.*"]) + list(BUNDLED),
    package_dir={name: folder for name, (folder, _) in BUNDLED.items()},
    package_data={name: patterns for name, (_, patterns) in BUNDLED.items() if patterns},
    cmdclass={"build_py": BuildPy},
)
