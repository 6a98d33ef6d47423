"""Files the package, its command line and the benches write: whole or not at all, every failure
an ``OSError`` naming the path (the Python side of ``sk::OutputFile``, superkernel/output_file.h).

A regular file is written under a temporary name beside it, flushed to the disk and renamed over
the path; a path naming a device or FIFO (``/dev/null``, ``/dev/full``, ``/dev/stdout``) is written
in place, its writes and close checked all the same. A symbolic link is followed.

    from superkernel._files import check_writable, write_json, replaced
    check_writable("bench.json")                      # before a long run: fail now, not after it
    write_json("bench.json", {"rows": rows})
    with replaced("model.safetensors") as tmp:        # for libraries that write a path themselves
        safetensors.torch.save_file(tensors, tmp)
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading

__all__ = ["check_writable", "write_bytes", "write_text", "write_json", "replaced"]

_counter = 0
_lock = threading.Lock()


def _temp_name(path: str) -> str:
    global _counter
    with _lock:
        _counter += 1
        n = _counter
    return f"{path}.tmp-{os.getpid()}-{n}"


def _in_place(path: str) -> bool:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"cannot write '{path}': it is a directory")
    return not stat.S_ISREG(mode)


_error_types: dict[type, type] = {}


def _error(path: str, what: str, e: OSError) -> OSError:
    """The same kind of error (``except FileNotFoundError`` still catches it), its ``str()`` the
    message alone: "cannot write 'PATH': what: reason", without the "[Errno N]" prefix."""
    base = type(e)
    kind = _error_types.get(base)
    if kind is None:
        kind = _error_types.setdefault(base, type(base.__name__, (base,), {"__str__": lambda self: self.strerror}))
    err = kind(e.errno, f"cannot write '{path}': {what}{e.strerror or e}")
    err.filename = path
    return err


@contextlib.contextmanager
def replaced(path: str | os.PathLike):
    """Yields a path to write instead of ``path`` (a temporary one beside it, or ``path`` itself
    for a device); once the block ends without an exception the file is flushed and renamed over
    ``path``. An exception leaves ``path`` as it was and removes the temporary file."""
    path = os.fspath(path)
    if not path:
        raise ValueError("cannot write a file with an empty path")
    real = os.path.realpath(path) if os.path.islink(path) else path
    if _in_place(real):
        yield real
        return
    tmp = _temp_name(real)
    try:
        yield tmp
        try:
            fd = os.open(tmp, os.O_RDONLY)
        except FileNotFoundError as e:
            raise _error(path, "nothing was written: ", e) from None
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if os.path.exists(real):
            os.chmod(tmp, stat.S_IMODE(os.stat(real).st_mode))
        os.replace(tmp, real)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if e.filename == path:
            raise
        raise _error(path, "", e) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_writable(path: str | os.PathLike) -> None:
    """Raises the ``OSError`` (naming ``path``) that writing ``path`` would raise on opening it:
    its directory is missing, read-only or not a directory, or ``path`` is a directory. Checked by
    creating the temporary file a write would create and removing it again (as root, permission
    bits say nothing; a read-only mount or a filesystem that refuses new files still does), or by
    opening a device for writing. Nothing at ``path`` changes."""
    path = os.fspath(path)
    if not path:
        raise ValueError("cannot write a file with an empty path")
    real = os.path.realpath(path) if os.path.islink(path) else path
    target = real if _in_place(real) else _temp_name(real)
    flags = os.O_WRONLY | (0 if target == real else os.O_CREAT | os.O_EXCL)
    try:
        fd = os.open(target, flags, 0o666)
    except OSError as e:
        raise _error(path, "", e) from None
    os.close(fd)
    if target != real:
        os.unlink(target)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Writes ``data`` to ``path`` (see the module's docstring)."""
    with replaced(path) as target:
        try:
            flags = os.O_WRONLY | (os.O_TRUNC if _in_place(target) else os.O_CREAT | os.O_EXCL)
            fd = os.open(target, flags, 0o666)
        except OSError as e:
            raise _error(os.fspath(path), "", e) from None
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        except OSError as e:
            os.close(fd)
            raise _error(os.fspath(path), "write: ", e) from None
        try:
            os.close(fd)
        except OSError as e:
            raise _error(os.fspath(path), "close: ", e) from None


def write_text(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` (UTF-8) to ``path``."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj, indent: int | None = 2) -> None:
    """Writes ``obj`` as JSON (and a final newline) to ``path``."""
    write_text(path, json.dumps(obj, indent=indent) + "\n")
