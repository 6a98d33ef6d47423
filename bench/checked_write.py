"""The benches' checked writes: the package's own module (python/superkernel/_files.py, standard
library only) loaded by its path, so a bench run by a plain ``python3`` without the built package
(llama_cpp_compare.py, llama_checkpoint.py in a GGUF tool's venv) still writes its results whole or
not at all, a failure naming the path.

    from checked_write import check_writable, write_json
    check_writable(args.json)          # before the run: a bad path fails now, not after an hour
    write_json(args.json, results)
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
