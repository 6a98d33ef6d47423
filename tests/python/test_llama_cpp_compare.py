"""bench/llama_cpp_compare.py against stand-ins for the two benchmark programs: the tables it
reads, the order of the runs, the ratios it reports and its errors."""

import importlib.util
import json
import os
import stat
import sys
import textwrap

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "llama_cpp_compare.py")
_spec = importlib.util.spec_from_file_location("llama_cpp_compare", _PATH)
lcc = importlib.util.module_from_spec(_spec)
sys.modules["llama_cpp_compare"] = lcc  # dataclasses look their module up there
_spec.loader.exec_module(lcc)

# Our CLI's table (superkernel bench --format llama-bench) and llama-bench's, as they print them.
OURS = textwrap.dedent("""\
    | model                          |       size |     params | backend     | threads |            test |                  t/s |
    | ------------------------------ | ---------: | ---------: | ----------- | ------: | --------------: | -------------------: |
    | llama bf16                     | 359.57 MiB |   155.73 M | superkernel |       1 |        tg @ d64 |        79.87 ± 4.23 |
    | llama bf16                     | 359.57 MiB |   155.73 M | superkernel |       1 |           pp512 |       633.89 ± 5.00 |

    superkernel mode; pp N: ...
    """)
THEIRS = textwrap.dedent("""\
    | model                          |       size |     params | backend    | threads |            test |                  t/s |
    | ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: | -------------------: |
    | llama 1B BF16                  |   1.59 GiB |   852.56 M | CPU        |       1 |           pp512 |        613.19 ± 2.10 |
    | llama 1B BF16                  |   1.59 GiB |   852.56 M | CPU        |       1 |            tg64 |         78.58 ± 1.31 |

    build: 0c1e5709 (1)
    """)


def test_parse_table_reads_both_layouts():
    assert lcc.parse_table(OURS, "ours") == {(1, "tg"): 79.87, (1, "pp512"): 633.89}
    assert lcc.parse_table(THEIRS, "llama.cpp") == {(1, "tg"): 78.58, (1, "pp512"): 613.19}


def test_parse_table_without_a_table_names_the_source():
    with pytest.raises(lcc.CompareError, match="llama.cpp \\(bf16\\): no table"):
        lcc.parse_table("error: failed to load model\n", "llama.cpp (bf16)")


# A stand-in program: appends its name and arguments to LOG, then prints a table whose t/s is
# `base` times the thread count, `base` taken per program from a round counter in the log.
_FAKE = """\
#!{python}
import sys
log = {log!r}
with open(log, "a") as f:
    f.write({name!r} + " " + " ".join(sys.argv[1:]) + "\\n")
calls = sum(1 for line in open(log) if line.startswith({name!r}))
args = sys.argv[1:]
threads = [int(t) for t in args[args.index({tflag!r}) + 1].split(",")]
print("| model | threads | test | t/s |")
print("| --- | ---: | ---: | ---: |")
for t in threads:
    tps = {base} * t * (1.0 + 0.1 * (calls - 1))
    print("| m | %d | {tg} | %.2f ± 1.00 |" % (t, tps))
    print("| m | %d | pp512 | %.2f ± 1.00 |" % (t, 10 * tps))
"""


def _fake(tmp_path, name, base, tflag, tg):
    path = tmp_path / name
    path.write_text(_FAKE.format(python=sys.executable, log=str(tmp_path / "log"), name=name, tflag=tflag,
                                 base=base, tg=tg))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def setup(tmp_path):
    ours = _fake(tmp_path, "superkernel", 50.0, "--threads", "tg @ d64")
    theirs = _fake(tmp_path, "llama-bench", 40.0, "-t", "tg64")
    config = tmp_path / "bench.yaml"
    config.write_text("model: {}\n")
    gguf = tmp_path / "m-q4_0.gguf"
    gguf.write_bytes(b"GGUF")
    base = ["--config", str(config), "--superkernel", ours, "--llama-bench", theirs, "--gguf", f"w4a8={gguf}"]
    return tmp_path, base


def test_rounds_alternate_and_ratios_are_per_round(setup, capsys):
    tmp_path, base = setup
    out_json = tmp_path / "out.json"
    assert lcc.main(base + ["--threads", "1,2", "--rounds", "3", "--runs", "7", "--json", str(out_json)]) == 0
    log = (tmp_path / "log").read_text().splitlines()
    # Round 1 ours first, round 2 llama.cpp first, round 3 ours first.
    assert [line.split()[0] for line in log] == ["superkernel", "llama-bench", "llama-bench", "superkernel",
                                                 "superkernel", "llama-bench"]
    assert "--dtype w4a8" in log[0] and "--pp 512" in log[0] and "--runs 7" in log[0]
    assert "-t 1,2 -p 512 -n 64 -r 3" in log[1]
    rows = json.loads(out_json.read_text())["rows"]
    tg2 = next(r for r in rows if r["test"] == "tg" and r["threads"] == 2)
    # Each side's k-th call gives base * threads * (1 + 0.1 (k - 1)): the rounds pair the k-th calls.
    assert tg2["ours_tps"] == pytest.approx([100.0, 110.0, 120.0])
    assert tg2["llama_cpp_tps"] == pytest.approx([80.0, 88.0, 96.0])
    assert tg2["ratio_median"] == pytest.approx(1.25)
    table = capsys.readouterr().out
    assert "| w4a8 | m-q4_0.gguf | 1 | tg | 55.00 | 44.00 | 1.25 | 1.25-1.25 |" in table
    assert "| w4a8 | m-q4_0.gguf | 2 | pp512 | 1100.00 | 880.00 | 1.25 | 1.25-1.25 |" in table


def test_decode_only_passes_no_prompt(setup):
    tmp_path, base = setup
    assert lcc.main(base + ["--pp", "0", "--rounds", "1"]) == 0
    log = (tmp_path / "log").read_text().splitlines()
    assert "--pp" not in log[0]
    assert "-p 0" in log[1]


@pytest.mark.parametrize("extra, message", [
    (["--gguf", "q4_0=/nonexistent.gguf"], "unknown weight type 'q4_0'"),
    (["--gguf", "bf16=/nonexistent.gguf"], "no such file: /nonexistent.gguf"),
    (["--gguf", "bf16"], "expected TYPE=PATH"),
    (["--threads", "1,x"], "--threads 1,x"),
    (["--threads", "0"], "thread counts must be >= 1"),
    (["--rounds", "0"], "--rounds"),
    (["--json", "/sys/out.json"], "--json: cannot write '/sys/out.json'"),  # before any run
])
def test_bad_arguments_name_the_option(setup, capsys, extra, message):
    _, base = setup
    assert lcc.main(base + extra) == 2
    assert message in capsys.readouterr().err


def test_a_result_that_cannot_be_written_is_an_error_naming_it(setup, capsys):
    tmp_path, base = setup
    assert lcc.main(base + ["--rounds", "1", "--json", "/dev/full"]) == 1
    out, err = capsys.readouterr()
    assert "| w4a8 |" in out and "--json: cannot write '/dev/full'" in err


def test_a_failing_program_is_an_error_with_its_output(setup, capsys):
    tmp_path, base = setup
    broken = tmp_path / "llama-bench"
    broken.write_text(f"#!{sys.executable}\nimport sys\nprint('error: failed to load model', file=sys.stderr)\n"
                      "sys.exit(1)\n")
    assert lcc.main(base + ["--rounds", "1"]) == 2
    err = capsys.readouterr().err
    assert "llama.cpp (w4a8)" in err and "exited with 1" in err and "failed to load model" in err


def test_a_missing_row_on_their_side_is_an_error(setup, capsys):
    tmp_path, base = setup
    # llama-bench without the prefill row: ours has pp512, theirs does not.
    theirs = tmp_path / "llama-bench"
    theirs.write_text(f"#!{sys.executable}\n"
                      "print('| model | threads | test | t/s |')\nprint('| --- | ---: | ---: | ---: |')\n"
                      "print('| m | 1 | tg64 | 40.00 ± 1.00 |')\n")
    assert lcc.main(base + ["--rounds", "1", "--threads", "1"]) == 2
    assert "llama.cpp (w4a8): no pp512 row at 1 threads" in capsys.readouterr().err


def test_a_missing_row_on_our_side_is_an_error(setup, capsys):
    tmp_path, base = setup
    # Our table without the 2-thread rows that llama-bench's has.
    ours = tmp_path / "superkernel"
    ours.write_text(f"#!{sys.executable}\n"
                    "print('| model | threads | test | t/s |')\nprint('| --- | ---: | ---: | ---: |')\n"
                    "print('| m | 1 | tg @ d64 | 50.00 ± 1.00 |')\nprint('| m | 1 | pp512 | 500.00 ± 1.00 |')\n")
    assert lcc.main(base + ["--rounds", "1", "--threads", "1,2"]) == 2
    assert "ours (w4a8): no pp512 row at 2 threads" in capsys.readouterr().err
