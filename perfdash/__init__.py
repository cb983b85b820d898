"""perfdash: the nightly performance dashboard for PyTorch's compiler."""

__version__ = "0.1.0"
