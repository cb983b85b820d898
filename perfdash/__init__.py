"""perfdash: the nightly performance dashboard for PyTorch's compiler."""

# The one place the version is written: pyproject.toml reads it ([tool.setuptools.dynamic]), so the installed
# package's metadata carries it, and `perfdash --version` prints it. CHANGELOG.md says what each version changed.
__version__ = "0.7.0"
