"""Package discovery for setuptools (everything else is in pyproject.toml).

Three top-level folders install under another name (pyproject's
`[tool.setuptools.package-dir]`: dialects/ -> graphfuse.dialects, ...). setuptools'
`packages.find` cannot rename what it finds, so the packages are found here: every folder
with an `__init__.py` under graphfuse/ and under each renamed folder, so a subpackage added
later is installed without editing a list.
"""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent


def package_dir() -> dict[str, str]:
    with open(ROOT / "pyproject.toml", "rb") as pyproject:
        return tomllib.load(pyproject)["tool"]["setuptools"]["package-dir"]


def packages() -> list[str]:
    found: list[str] = []
    for name, folder in package_dir().items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(str(ROOT / folder))]
    return found


setup(packages=packages())
