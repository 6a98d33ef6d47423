"""The process-wide runtime the front-end compiles on (created on first use)."""

from __future__ import annotations

import threading

from . import _superkernel

_lock = threading.Lock()
_runtime = None
_options: dict = {}


def configure(**options) -> None:
    """Options of the runtime created on first use (RuntimeOptions: num_cores, cube_cores,
    pin_threads, spin_us, watchdog_seconds, kernel_packages, ...). Raises once it exists."""
    global _options
    with _lock:
        if _runtime is not None:
            raise RuntimeError("superkernel.configure_runtime: the runtime already exists; configure it before first use")
        _superkernel.Runtime.create.__doc__  # noqa: B018 (the options are checked when it starts)
        _options = dict(options)


def get() -> _superkernel.Runtime:
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = _superkernel.Runtime.create(**_options)
        return _runtime


def set_runtime(runtime: _superkernel.Runtime) -> None:
    global _runtime
    with _lock:
        _runtime = runtime
