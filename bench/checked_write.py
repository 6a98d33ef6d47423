"""The benches' checked writes: the package's own module (python/superkernel/_files.py, standard
library only) loaded by its path, so a bench run by a plain ``python3`` without the built package
(llama_cpp_compare.py, llama_checkpoint.py in a GGUF tool's venv) still writes its results whole or
not at all, a failure naming the path.

    from checked_write import check_writable, write_json
    check_writable(args.json)          # before the run: a bad path fails now, not after an hour
    write_json(args.json, results)
    return json_exit_code(args.json, results, "my_bench")  # at the end of main(): 0, or 1 and why
"""

import importlib.util
import os
import sys

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "superkernel", "_files.py")
_spec = importlib.util.spec_from_file_location("superkernel_checked_files", _PATH)
_files = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _files
_spec.loader.exec_module(_files)

check_writable = _files.check_writable
write_bytes = _files.write_bytes
write_text = _files.write_text
write_json = _files.write_json
replaced = _files.replaced


def json_exit_code(path, data, prog: str, **json_args) -> int:
    """Writes `data` to `path` as JSON; the bench's exit status: 0, or 1 after printing
    "<prog>: --json: <the error naming the path>" (a result is never lost without a word)."""
    try:
        write_json(path, data, **json_args)
    except OSError as e:
        print(f"{prog}: --json: {e}", file=sys.stderr)
        return 1
    return 0
