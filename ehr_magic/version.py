"""The package version, in the bottom layer so that any module may report it."""

__version__ = "0.1.0"  # keep equal to pyproject.toml's version
