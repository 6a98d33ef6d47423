"""Exceptions raised for C++ errors (sk::Status codes), each also an instance of the built-in
exception its code resembles, so ``except ValueError`` catches a bad option or operand."""


class SuperkernelError(Exception):
    """Base class: a failed sk::Status. ``code`` is the C++ StatusCode name."""

    code = "INTERNAL"


class InvalidArgumentError(SuperkernelError, ValueError):
    """A bad graph, option, operand or input (INVALID_ARGUMENT)."""

    code = "INVALID_ARGUMENT"


class NotFoundError(SuperkernelError, LookupError):
    """A missing kernel, tensor name or file (NOT_FOUND)."""

    code = "NOT_FOUND"


class UnimplementedError(SuperkernelError, NotImplementedError):
    """A recognised feature this build does not support (UNIMPLEMENTED)."""

    code = "UNIMPLEMENTED"


class FailedPreconditionError(SuperkernelError, RuntimeError):
    """A call in the wrong state, e.g. an input never set (FAILED_PRECONDITION)."""

    code = "FAILED_PRECONDITION"


class KernelError(SuperkernelError, RuntimeError):
    """A kernel (or a host op) failed at run time (KERNEL_ERROR)."""

    code = "KERNEL_ERROR"


class DeadlockError(SuperkernelError, RuntimeError):
    """The watchdog found a wait that cannot finish (DEADLOCK)."""

    code = "DEADLOCK"


class InternalError(SuperkernelError, RuntimeError):
    """A broken invariant (INTERNAL)."""

    code = "INTERNAL"


_BY_CODE = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        UnimplementedError,
        FailedPreconditionError,
        KernelError,
        DeadlockError,
        InternalError,
    )
}


def error_class(code: str) -> type:
    """The exception class of a StatusCode name (used by the C++ translator)."""
    return _BY_CODE.get(code, SuperkernelError)
