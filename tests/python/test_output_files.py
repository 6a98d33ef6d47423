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
    with pytest.raises(sk.SuperkernelError, match="option 'trace': expected a path, got True"):
        sk.compile(g, {"trace": True})  # not a file named "true"
    exe = sk.compile(g, {"static_kernel_compile": True, "dump": True, "dump_dir": READ_ONLY_DIR,
                         "trace": str(tmp_path / "t.json")})
    exe.set_input("x", np.ones((1, 8), np.float32))
    with pytest.raises(sk.SuperkernelError, match=f"option 'dump_dir': cannot write '{READ_ONLY_DIR}/"):
        exe.run()
    ok = sk.compile(g, {"static_kernel_compile": True, "dump": True, "dump_dir": str(tmp_path),
                        "trace": tmp_path / "t.json"})
    ok.set_input("x", np.ones((1, 8), np.float32))
    ok.run()
    assert (tmp_path / "index.txt").exists()
    for path in ("/dev/full", f"{READ_ONLY_DIR}/trace.json"):
        with pytest.raises(sk.SuperkernelError, match=f"trace file: cannot write '{path}'"):
            ok.write_trace(path)


def test_check_writable_fails_where_a_write_would_and_changes_nothing(tmp_path):
    from superkernel._files import check_writable

    check_writable(tmp_path / "new.json")
    check_writable("/dev/full")  # opening a device for writing succeeds; its writes fail later
    assert os.listdir(tmp_path) == []
    (tmp_path / "old.json").write_text("kept")
    check_writable(tmp_path / "old.json")
    assert (tmp_path / "old.json").read_text() == "kept" and os.listdir(tmp_path) == ["old.json"]
    for bad in (f"{READ_ONLY_DIR}/sk.json", str(tmp_path / "missing" / "x.json")):
        with pytest.raises(OSError, match=f"cannot write '{bad}'"):
            check_writable(bad)
    with pytest.raises(OSError, match="it is a directory"):
        check_writable(tmp_path)


def test_the_seeded_checkpoint_writer_writes_whole_files(tmp_path):
    """bench/llama_checkpoint.py (run by a plain interpreter, through bench/checked_write.py):
    a checkpoint written whole, and a directory nobody may write refused before any weight."""
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "llama_checkpoint.py")
    args = ["--hidden", "64", "--layers", "1", "--vocab", "300"]
    done = subprocess.run([sys.executable, script, str(tmp_path / "ck"), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    names = sorted(os.listdir(tmp_path / "ck"))
    assert "config.json" in names and "model.safetensors" in names and not [n for n in names if ".tmp" in n]
    assert json.loads((tmp_path / "ck" / "config.json").read_text())["hidden_size"] == 64
    bad = subprocess.run([sys.executable, script, f"{READ_ONLY_DIR}/ck", *args], capture_output=True, text=True)
    assert bad.returncode != 0 and f"'{READ_ONLY_DIR}/ck" in bad.stderr, bad.stderr
