"""superkernel under ``mpirun``: the MPI communicator, and torch.distributed on the same ranks.

A program started as ``mpirun -np N python prog.py`` runs one process per rank. Its collectives
run over MPI, inside the super kernels (docs/COMM.md): the process-wide runtime gets the
collective kernels, and graphs address the communicator by ``communicator().group()``.

torch's functional collectives (``torch.distributed._functional_collectives``: ``all_reduce``,
``reduce_scatter_tensor``, ``all_gather_into_tensor``, ``all_to_all_single``) need an initialised
default process group to be traced. ``init_process_group()`` gives them one on the same ranks as
MPI::

    import superkernel.distributed as skd
    skd.init_process_group()          # MPI (MPI_THREAD_MULTIPLE) + torch.distributed (gloo), same ranks
    y = torch.compile(model, backend="superkernel")(x)   # its collectives: fused comm kernels over MPI

How the process group maps to the communicator: the backend lowers a collective of a process
group whose members are every rank, numbered as in MPI_COMM_WORLD (the default group, or a
``new_group`` of all ranks in order), to the collective kernels over MPI_COMM_WORLD; torch's own
backend (gloo) then serves only what runs outside compiled graphs (torch eager). Any other group
is an error naming it. A program may initialise torch.distributed itself instead (any backend,
e.g. ``env://`` with the rank and size OpenMPI sets); the backend then checks that torch's rank and
world size are MPI's.
"""

from __future__ import annotations

import atexit
import datetime
import os
import socket
import sys
import threading

from . import _runtime_default

try:
    from . import _comm
except ImportError as e:  # a build without MPI (SK_ENABLE_MPI=OFF) or without the module
    _comm = None
    _IMPORT_ERROR = str(e)

_lock = threading.RLock()
_communicator = None
_torch_initialised_here = False
_failed = False

# Environment variables that say this process was started by an MPI launcher.
_LAUNCHER_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


def available() -> bool:
    """This build has the MPI collectives (the extension module superkernel._comm)."""
    return _comm is not None


def _require():
    if _comm is None:
        from ._errors import UnimplementedError

        raise UnimplementedError(
            "superkernel.distributed: this build has no MPI collectives (superkernel._comm could not be imported: "
            f"{_IMPORT_ERROR}); build with SK_ENABLE_MPI=ON and OpenMPI installed (docs/COMM.md)"
        )


def communicator(watchdog_seconds: float | None = None):
    """The communicator of MPI_COMM_WORLD, started on first use: MPI is initialised with
    MPI_THREAD_MULTIPLE (an MPI initialised earlier with less is an error naming both levels) and
    the collective kernels are loaded into the process-wide runtime (superkernel.runtime()).
    ``watchdog_seconds`` (first call only; default: the runtime's watchdog, 30 s) bounds a wait for
    a rank outside a launch and MPI_Finalize after a failure."""
    global _communicator
    _require()
    with _lock:
        if _communicator is None:
            if watchdog_seconds is None:
                watchdog_seconds = float(_runtime_default._options.get("watchdog_seconds", 30.0))
            comm = _comm.Communicator.world(watchdog_seconds=watchdog_seconds)
            comm.load_kernels(_runtime_default.get())
            _communicator = comm
            atexit.register(_finish)
            _install_excepthook()
        return _communicator


def rank() -> int:
    return communicator().rank


def world_size() -> int:
    return communicator().size


def group():
    """The Group value graphs address MPI_COMM_WORLD by (pass it to the superkernel._comm builders)."""
    return communicator().group()


def _broadcast_text(text: str, root: int = 0) -> str:
    """Rank `root`'s text on every rank, through the comm.broadcast kernel (a one-op graph)."""
    import numpy as np

    from . import _superkernel as sk

    comm = communicator()
    capacity = 256
    data = text.encode()
    if len(data) > capacity:
        raise ValueError(f"superkernel.distributed: '{text}' is longer than {capacity} bytes")
    g = sk.Graph("superkernel_distributed_broadcast")
    x = g.input("x", sk.DType.i32, [capacity + 1])
    g.output(_comm.broadcast(g, comm.group(), x, root, "rendezvous"), "y")
    exe = _runtime_default.get().compile(g, sk.CompileOptions.for_mode("eager"))  # one kernel call
    buf = np.zeros(capacity + 1, np.int32)
    buf[0] = len(data)
    buf[1 : 1 + len(data)] = np.frombuffer(data, np.uint8)
    exe.set_input("x", buf)
    exe.run()
    y = exe.read("y")
    return bytes(y[1 : 1 + int(y[0])].astype(np.uint8)).decode()


def init_process_group(backend: str = "gloo", timeout: datetime.timedelta | None = None) -> None:
    """Initialises torch.distributed's default process group on MPI's ranks: rank and world size
    are MPI_COMM_WORLD's, and the rendezvous (a TCPStore served by rank 0) is agreed over MPI, so
    no MASTER_ADDR / MASTER_PORT is needed (they are honoured when set). ``backend`` is the torch
    backend for what runs in torch eager (gloo: CPU tensors). Idempotent; an already initialised
    process group is checked against MPI's rank and size instead."""
    global _torch_initialised_here
    import torch.distributed as dist

    comm = communicator()
    with _lock:
        if dist.is_initialized():
            check_torch_matches_mpi()
            return
        timeout = timeout or datetime.timedelta(seconds=300)
        if comm.rank == 0:
            one_machine = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") == os.environ.get("OMPI_COMM_WORLD_SIZE")
            host = os.environ.get("MASTER_ADDR") or ("127.0.0.1" if one_machine else socket.gethostname())
            port = int(os.environ.get("MASTER_PORT", "0"))
            store = dist.TCPStore(host, port, comm.size, True, timeout, wait_for_workers=False)
            address = _broadcast_text(f"{host}:{store.port}")
        else:
            address = _broadcast_text("")
            host, port = address.rsplit(":", 1)
            store = dist.TCPStore(host, int(port), comm.size, False, timeout)
        dist.init_process_group(backend, store=store, rank=comm.rank, world_size=comm.size, timeout=timeout)
        _torch_initialised_here = True


def check_torch_matches_mpi() -> None:
    """torch.distributed's rank and world size must be MPI_COMM_WORLD's (the backend maps torch's
    world to it); an error names both."""
    import torch.distributed as dist

    from ._errors import FailedPreconditionError

    comm = communicator()
    if not dist.is_initialized():
        raise FailedPreconditionError(
            "superkernel.distributed: torch.distributed is not initialised; call "
            "superkernel.distributed.init_process_group() (or torch.distributed.init_process_group) first"
        )
    if dist.get_rank() != comm.rank or dist.get_world_size() != comm.size:
        raise FailedPreconditionError(
            f"superkernel.distributed: torch.distributed has rank {dist.get_rank()} of {dist.get_world_size()}, "
            f"MPI_COMM_WORLD rank {comm.rank} of {comm.size}: the backend maps torch's world to MPI's, so they "
            "must agree (initialise with superkernel.distributed.init_process_group(), or with the rank and size "
            "of OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE)"
        )


def fail(message: str) -> str:
    """This rank failed: tells every other rank once, so that their collectives stop with
    'rank R failed: <message>' instead of waiting for the watchdog. Returns the message prefixed
    with this rank. Called by the excepthook this module installs for uncaught exceptions."""
    global _failed
    _failed = True
    return communicator().fail(message)


def _install_excepthook() -> None:
    previous = sys.excepthook

    def hook(kind, value, traceback):
        try:
            fail(f"{kind.__name__}: {value}")
        except Exception:  # noqa: BLE001 - the original error matters more
            pass
        previous(kind, value, traceback)

    sys.excepthook = hook


def _finish() -> None:
    """At exit: torch's process group first (gloo's threads), then MPI_Finalize, bounded when
    this rank failed. Without it OpenMPI ends the job with an error."""
    global _communicator
    if _torch_initialised_here:
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - finalising MPI matters more
            pass
    with _lock:
        failed = _failed or (_communicator is not None and _communicator.peer_failure() is not None)
        _communicator = None
    _comm.finalize(failed)


def launched_by_mpirun() -> bool:
    """This process was started by an MPI launcher (its rank variable is set)."""
    return any(v in os.environ for v in _LAUNCHER_RANK_VARS)
