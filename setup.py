"""The repository root is the `foundry` import package (DESIGN.md: package-dir {"foundry": "."}).

setuptools cannot discover sub-packages under a renamed root from pyproject alone, so they are
listed here: every package below the five layer folders becomes `foundry.<path>`.
"""
from setuptools import find_packages, setup

LAYERS = ["app", "backends", "plugins", "trainer", "streaming"]
subpackages = find_packages(".", include=[f"{layer}*" for layer in LAYERS])

setup(
    packages=["foundry"] + [f"foundry.{name}" for name in subpackages],
    package_dir={"foundry": "."},
    package_data={"": ["*.tcss", "*.json", "*.yaml", "*.txt", "py.typed"]},
    include_package_data=False,
)
