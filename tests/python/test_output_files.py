"""Every file the package writes goes through a checked write: the Python helper
(superkernel._files) and the C++ writers reached from Python (traces, the data dump) fail on a
full device and in a directory nobody may write, naming the path, and leave no partial file."""

import errno
import json
import os

import numpy as np
import pytest

import superkernel as sk
from superkernel._files import replaced, write_bytes, write_json, write_text

# sysfs: no process may create files there, root included.
READ_ONLY_DIR = "/sys"


def leftovers(dirpath, name):
    return [f for f in os.listdir(dirpath) if f.startswith(name + ".tmp")]


def test_replaces_a_file_whole_and_keeps_its_permissions(tmp_path):
    path = tmp_path / "out.json"
    write_text(path, "old contents, longer than the new ones")
    os.chmod(path, 0o640)
    write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert leftovers(tmp_path, "out.json") == []


def test_a_failure_in_the_block_leaves_the_old_file(tmp_path):
    path = tmp_path / "model.safetensors"
    write_bytes(path, b"old")
    with pytest.raises(RuntimeError):
        with replaced(path) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"half")
            raise RuntimeError("the writer failed")
    assert path.read_bytes() == b"old"
    assert leftovers(tmp_path, "model.safetensors") == []


def test_a_writer_that_wrote_nothing_is_an_error(tmp_path):
    with pytest.raises(OSError, match="cannot write .*nothing was written"):
        with replaced(tmp_path / "x.bin"):
            pass


def test_full_device_and_read_only_directory_name_the_path(tmp_path):
    with pytest.raises(OSError, match="cannot write '/dev/full': write: ") as e:
        write_bytes("/dev/full", b"x" * 65536)
    assert e.value.errno == errno.ENOSPC
    write_text("/dev/null", "fine")  # a device is written in place
    with pytest.raises(OSError, match=f"cannot write '{READ_ONLY_DIR}/sk.json'"):
        write_json(f"{READ_ONLY_DIR}/sk.json", {})
    with pytest.raises(OSError, match="it is a directory"):
        write_text(tmp_path, "x")


def test_traces_and_dumps_from_python_fail_naming_the_path(tmp_path):
    g = sk.Graph("written")
    x = g.input("x", sk.DType.f32, [1, 8])
    g.output(sk.ops.add(g, x, x), "y")
    exe = sk.compile(g, {"static_kernel_compile": True, "dump": True, "dump_dir": READ_ONLY_DIR,
                         "trace": True})
    exe.set_input("x", np.ones((1, 8), np.float32))
    with pytest.raises(sk.SuperkernelError, match=f"option 'dump_dir': cannot write '{READ_ONLY_DIR}/"):
        exe.run()
    ok = sk.compile(g, {"static_kernel_compile": True, "dump": True, "dump_dir": str(tmp_path), "trace": True})
    ok.set_input("x", np.ones((1, 8), np.float32))
    ok.run()
    assert (tmp_path / "index.txt").exists()
    for path in ("/dev/full", f"{READ_ONLY_DIR}/trace.json"):
        with pytest.raises(sk.SuperkernelError, match=f"trace file: cannot write '{path}'"):
            ok.write_trace(path)
