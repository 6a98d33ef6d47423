"""Compile options as a Python dict, with the keys and nesting of the C++ ``CompileOptions``
(docs/OPTIONS.md), plus the front-end's own keys.

    superkernel.compile_options({
        "static_kernel_compile": True,            # False: eager mode
        "super_kernel_optimize": True,            # + superkernel mode
        "super_kernel_optimize_options": {"stream_fusion": True, "early_start": 1},
        # or the same as a string: "stream_fusion=1:early_start=1"
        "super_kernel_debug_options": {"debug_sync_all": False},
    })

Every key goes through ``CompileOptions.set`` in C++, so an unknown key or a bad value raises
``InvalidArgumentError`` (a ``ValueError``) naming it, exactly as the C++ API and the CLI do.
"""

from __future__ import annotations

import os
import re

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import _superkernel
from ._errors import InvalidArgumentError

# Keys holding a nested group of options: a dict, or "key=value:key=value".
NESTED_GROUPS = ("super_kernel_optimize_options", "super_kernel_debug_options")

# Options of the torch.compile front-end that are not C++ compile options.
FRONTEND_DEFAULTS: dict[str, Any] = {
    # Parameters (and buffers the graph does not write) become external constants over torch's
    # storage, bound once at compile time; otherwise they are inputs bound again at every call
    # (still without a copy) so that replacing a parameter's tensor is seen.
    "frozen_parameter": False,
}


# The front-end's weight conversion (python/superkernel/_weight_dtype.py, docs/PYTHON.md).
WEIGHT_DTYPES = ("f32", "bf16", "f16", "w8a8", "w4a8", "w4")
WEIGHT_DEFAULTS: dict[str, Any] = {
    "weight_dtype": None,  # None: linear weights as the model holds them
    "weight_dtype_include": (),  # regexes searched in parameter names; empty: every linear weight
    "weight_dtype_exclude": (),
    "int4_group": 128,  # w4a8 / w4: values per scale along the input dimension
    "int4_symmetric": False,  # w4a8 / w4: zero point 8 (as llama.cpp's Q4_0) instead of per-group zeros
}


# Options whose value is a path: a bool there would name a file "true" (trace=True).
PATH_OPTIONS = ("trace", "dump_dir")


def _text(key: str, value: Any) -> str:
    if key in PATH_OPTIONS:
        if isinstance(value, os.PathLike):
            return os.fspath(value)
        if not isinstance(value, str):
            raise InvalidArgumentError(f"option '{key}': expected a path, got {value!r}")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)  # the regex lists (dcci_*)
    raise InvalidArgumentError(
        f"option '{key}': value {value!r} of type {type(value).__name__} is not a bool, number, string or "
        "list of strings"
    )


def _nested_items(group: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        return [(f"{group}.{k}", v) for k, v in value.items()]
    if isinstance(value, str):
        items = []
        for pair in filter(None, (p.strip() for p in value.split(":"))):
            key, sep, text = pair.partition("=")
            if not sep:
                raise InvalidArgumentError(f"option '{group}': '{pair}' is not key=value")
            items.append((f"{group}.{key.strip().replace('-', '_')}", text.strip()))
        return items
    raise InvalidArgumentError(f"option '{group}': expected a dict or a 'key=value:key=value' string, got {value!r}")


def flatten(options: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """The (key, value) pairs CompileOptions.set takes, nested groups spelled 'group.key'."""
    items: list[tuple[str, Any]] = []
    for key, value in (options or {}).items():
        if not isinstance(key, str):
            raise InvalidArgumentError(f"option key {key!r} is not a string")
        if key in NESTED_GROUPS:
            items.extend(_nested_items(key, value))
        else:
            items.append((key, value))
    return items


def compile_options(options: Mapping[str, Any] | _superkernel.CompileOptions | None = None) -> _superkernel.CompileOptions:
    """A C++ CompileOptions from a dict (None: the defaults, graph mode). Raises naming the key."""
    if isinstance(options, _superkernel.CompileOptions):
        return options
    opts = _superkernel.CompileOptions()
    for key, value in flatten(options):
        opts.set(key, _text(key, value))
    opts.validate()
    return opts


@dataclass(frozen=True)
class BackendOptions:
    """What the torch.compile backend was given: the C++ options and the front-end's own."""

    compile: _superkernel.CompileOptions
    frozen_parameter: bool
    raw: dict
    weight_dtype: str | None = None
    weight_dtype_include: tuple = ()
    weight_dtype_exclude: tuple = ()
    int4_group: int = 128
    int4_symmetric: bool = False

    @property
    def mode(self) -> str:
        return self.compile.mode


def _patterns(key: str, value: Any) -> tuple:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidArgumentError(f"option '{key}': expected a regular expression or a list of them, got {value!r}")
    for v in value:
        try:
            re.compile(v)
        except re.error as e:
            raise InvalidArgumentError(f"option '{key}': {v!r} is not a regular expression: {e}") from None
    return tuple(value)


def _weight_options(given: dict, frozen_parameter: bool) -> dict:
    out = dict(WEIGHT_DEFAULTS)
    wd = given.get("weight_dtype")
    if wd is not None and wd not in WEIGHT_DTYPES:
        raise InvalidArgumentError(f"option 'weight_dtype': {wd!r}, expected one of {', '.join(WEIGHT_DTYPES)}")
    out["weight_dtype"] = wd
    for key in ("weight_dtype_include", "weight_dtype_exclude"):
        if key in given:
            out[key] = _patterns(key, given[key])
    if "int4_group" in given:
        g = given["int4_group"]
        if isinstance(g, bool) or not isinstance(g, int) or g < 32 or g & (g - 1):
            raise InvalidArgumentError(f"option 'int4_group': {g!r}, expected a power of two >= 32")
        out["int4_group"] = g
    if "int4_symmetric" in given:
        if not isinstance(given["int4_symmetric"], bool):
            raise InvalidArgumentError(f"option 'int4_symmetric': expected a bool, got {given['int4_symmetric']!r}")
        out["int4_symmetric"] = given["int4_symmetric"]
    others = [k for k in given if k != "weight_dtype"]
    if wd is None and others:
        raise InvalidArgumentError(f"option '{others[0]}' needs option 'weight_dtype'")
    if wd is not None and not frozen_parameter:
        raise InvalidArgumentError(
            "option 'weight_dtype' converts parameters once at compile time: it needs 'frozen_parameter': True"
        )
    return out


def backend_options(options: Mapping[str, Any] | None) -> BackendOptions:
    """Splits the front-end keys off and checks everything else as C++ compile options."""
    if options is not None and not isinstance(options, Mapping):
        raise InvalidArgumentError(f"options must be a dict, got {type(options).__name__}")
    raw = dict(options or {})
    frontend = dict(FRONTEND_DEFAULTS)
    weights = {}
    rest = {}
    for key, value in raw.items():
        if key in FRONTEND_DEFAULTS:
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"option '{key}': expected a bool, got {value!r}")
            frontend[key] = value
        elif key in WEIGHT_DEFAULTS:
            weights[key] = value
        else:
            rest[key] = value
    return BackendOptions(compile_options(rest), frontend["frozen_parameter"], raw,
                          **_weight_options(weights, frontend["frozen_parameter"]))
