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


# RuntimeOptions' defaults, for the keys configure_for() compares.
_DEFAULTS = {"num_cores": 0, "cube_cores": 0, "load_policy": "adaptive", "chunk_bytes": 256 << 10}


def configure_for(**options) -> None:
    """As configure(), but a runtime that already runs with the same settings is fine (a command
    line called again in one process); one with other settings raises naming them."""
    with _lock:
        if _runtime is None:
            _options.update(options)
            return
        differ = [f"{k} {v!r} (running: {_options.get(k, _DEFAULTS.get(k))!r})" for k, v in options.items()
                  if _options.get(k, _DEFAULTS.get(k)) != v]
        if differ:
            raise RuntimeError("the process's runtime already runs with other settings: " + ", ".join(differ))


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
