"""The transformers oracle checkpoints for the LongCat-Flash sample's tests.

tests/models/oracle.py writes seeded tiny checkpoints and the greedy ids and logits of
transformers' own LongcatFlashForCausalLM (float32 and float64) over 16 steps (an 11-token prompt,
then 15 cached decode steps). ctest runs it once as the fixture `models.oracle_generate` and
passes its directory in SK_ORACLE_DIR; run by hand, the cases are generated into a temporary
directory on first use.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE_SCRIPT = os.path.join(HERE, "..", "models", "oracle.py")
LONGCAT_CASES = ("longcat_packed", "longcat_per_expert", "longcat_small_lora", "longcat_yarn", "longcat_dynamic",
                 "longcat_tied_bias")
_generated = None


def oracle_dir() -> str:
    global _generated
    d = os.environ.get("SK_ORACLE_DIR")
    if d and all(os.path.isfile(os.path.join(d, c, "oracle.txt")) for c in LONGCAT_CASES):
        return d
    if _generated is None:
        _generated = tempfile.mkdtemp(prefix="sk_longcat_oracle_")
        subprocess.run([sys.executable, ORACLE_SCRIPT, _generated, *LONGCAT_CASES], check=True)
    return _generated


class Case:
    """One oracle case: its checkpoint directory, the prompt, and transformers' ids and logits."""

    def __init__(self, name: str):
        self.name = name
        self.dir = os.path.join(oracle_dir(), name)
        fields = {}
        with open(os.path.join(self.dir, "oracle.txt")) as f:
            for line in f:
                key, *values = line.split()
                fields[key] = [int(v) for v in values]
        self.prompt = fields["prompt"]
        self.steps = fields["steps"][0]
        self.ids = {dtype: fields[f"ids_{dtype}"] for dtype in ("f32", "f64")}
        self.logits = {}
        for dtype in ("f32", "f64"):
            data = np.fromfile(os.path.join(self.dir, f"logits_{dtype}.bin"), dtype="<f8")
            self.logits[dtype] = data.reshape(self.steps, -1)
