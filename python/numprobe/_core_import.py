"""The compiled module, with a clear message when the package was not built."""
try:
    from . import _core  # noqa: F401
except ImportError as e:  # pragma: no cover - only without a build
    raise ImportError("numprobe._core is not built: pip install ./python (README, 'Python')") from e
core = _core
