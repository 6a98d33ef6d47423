"""Fuzz of what a checkpoint's tokenizer files feed the text path (``python -m superkernel generate
--prompt``): seeded random mutations of a valid tokenizer.json, tokenizer_config.json (its
chat_template included) and generation_config.json, read the way the command line reads them
(superkernel._cli: the tokenizer, the prompt through the chat template or not, the EOS ids).

Invariant: every mutated checkpoint either gives a prompt of token ids, or is refused with the
command line's configuration error (exit 3) naming the checkpoint directory or the file; nothing
else escapes (no traceback, no hang). The files are parsed by the `tokenizers` library, transformers
and jinja2; what this checks is that whatever they make of the bytes reaches the user as a message.

    SK_TOKENIZER_FUZZ_CASES=5000 SK_TOKENIZER_FUZZ_SEED=100 pytest tests/python/test_tokenizer_fuzz.py

Seeds that once failed are kept in REGRESSION_SEEDS and run first.
"""

import copy
import json
import os
import random
import shutil
import types

import pytest

from superkernel import _cli

CASES = int(os.environ.get("SK_TOKENIZER_FUZZ_CASES", "120"))
FIRST_SEED = int(os.environ.get("SK_TOKENIZER_FUZZ_SEED", "1"))
REGRESSION_SEEDS: list[int] = []
VOCAB = 64

TEMPLATE_PIECES = [
    "{% for m in messages %}", "{% endfor %}", "{{ m['content'] }}", "{{ m.role }}", "w1 ", " w2",
    "{% if add_generation_prompt %}", "{% endif %}", "{{ bos_token }}", "{{ eos_token }}",
    "{{ raise_exception('refused') }}", "{{ 1 / 0 }}", "{{ messages[7]['content'] }}", "{% set x = %}",
    "{{", "}}", "{%", "%}", "{# #}", "{{ m['content'] | upper }}", "{{ undefined_name.attr }}",
    "{% for x in range(3) %}w3 {% endfor %}", "\u00e9\u4e2d", "{{ messages | tojson }}",
]
ODD_VALUES = [None, True, False, 0, -1, 2**40, 3.5, "", "w9", "\x00", [], {}, [1, "a"], {"a": None},
              "x" * 500, [[[[[]]]]]]


def make_checkpoint(directory):
    """A word-level tokenizer over w0 .. w{VOCAB-1}, with a chat template and a generation config."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0", eos_token=f"w{VOCAB - 1}")
    fast.chat_template = "{% for m in messages %}w1 {{ m['content'] }} w2 {% endfor %}"
    fast.save_pretrained(directory)
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": VOCAB - 1, "bos_token_id": 1}, f)


def paths(tree, prefix=()):
    """Every (path, value) of a JSON tree."""
    yield prefix, tree
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree[:50]):
            yield from paths(v, prefix + (i,))


def mutate_json(rng, text, name):
    data = json.loads(text)
    for _ in range(rng.randint(1, 3)):
        spots = [p for p, _ in paths(data) if p]
        if not spots:
            return json.dumps(copy.deepcopy(rng.choice(ODD_VALUES)))
        path = rng.choice(spots)
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        what = rng.random()
        if what < 0.2 and isinstance(parent, dict):
            del parent[last]
        elif name == "tokenizer_config.json" and (last == "chat_template" or what < 0.45):
            # A new template: in the config's top level when it is an object, else at the spot.
            template = "".join(rng.choice(TEMPLATE_PIECES) for _ in range(rng.randint(1, 8)))
            if isinstance(data, dict):
                data["chat_template"] = template
            else:
                parent[last] = template
        elif what < 0.6 and isinstance(parent[last], int) and not isinstance(parent[last], bool):
            parent[last] = rng.choice([-1, 0, VOCAB, VOCAB * 1000, 2**63, parent[last] + 1])
        else:
            parent[last] = copy.deepcopy(rng.choice(ODD_VALUES))
    return json.dumps(data)


def mutate_bytes(rng, raw):
    raw = bytearray(raw)
    if rng.random() < 0.5 and raw:
        del raw[rng.randrange(len(raw)):]
    for _ in range(rng.randint(1, 8)):
        if raw:
            raw[rng.randrange(len(raw))] = rng.randrange(256)
    return bytes(raw)


def run_case(seed, base, work):
    rng = random.Random(seed)
    if os.path.exists(work):
        shutil.rmtree(work)
    shutil.copytree(base, work)
    names = ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]
    for name in rng.sample(names, rng.randint(1, 2)):
        path = os.path.join(work, name)
        if rng.random() < 0.1:
            os.remove(path)
            continue
        with open(path, "rb") as f:
            raw = f.read()
        if rng.random() < 0.75:
            out = mutate_json(rng, raw.decode("utf-8"), name).encode("utf-8")
        else:
            out = mutate_bytes(rng, raw)
        with open(path, "wb") as f:
            f.write(out)
    cfg = types.SimpleNamespace(checkpoint=work, file=os.path.join(work, "run.yaml"))
    chat = rng.random() < 0.6
    try:
        tokenizer = _cli._tokenizer(cfg)
        ids = _cli._encode(cfg, tokenizer, "w3 w4 w5", chat)
        eos = _cli._eos_ids(cfg, tokenizer)
    except _cli.CliError as e:
        assert e.code == _cli.EXIT_CONFIG, f"seed {seed}: exit {e.code}: {e}"
        assert work in str(e), f"seed {seed}: the error does not name the checkpoint: {e}"
        return "refused"
    assert all(isinstance(i, int) for i in ids), f"seed {seed}: ids {ids!r}"
    assert all(isinstance(i, int) for i in eos), f"seed {seed}: eos {eos!r}"
    return "read"


def test_mutated_tokenizer_files_are_read_or_refused_naming_the_checkpoint(tmp_path):
    base = tmp_path / "base"
    make_checkpoint(str(base))
    assert run_case(0, str(base), str(tmp_path / "unchanged")) in ("read", "refused")
    outcomes = {"read": 0, "refused": 0}
    for seed in REGRESSION_SEEDS + list(range(FIRST_SEED, FIRST_SEED + CASES)):
        outcomes[run_case(seed, str(base), str(tmp_path / "case"))] += 1
    print(f"tokenizer fuzz: {CASES} cases from seed {FIRST_SEED}: {outcomes}")
    # Both outcomes occur, or the mutations stopped reaching the parsers (or stopped breaking them).
    assert outcomes["read"] > 0 and outcomes["refused"] > 0, outcomes


def test_the_valid_checkpoint_reads_with_and_without_the_template(tmp_path):
    make_checkpoint(str(tmp_path))
    cfg = types.SimpleNamespace(checkpoint=str(tmp_path), file=str(tmp_path / "run.yaml"))
    tokenizer = _cli._tokenizer(cfg)
    assert _cli._encode(cfg, tokenizer, "w3 w4", False) == [3, 4]
    assert _cli._encode(cfg, tokenizer, "w3 w4", True) == [1, 3, 4, 2]
    assert _cli._eos_ids(cfg, tokenizer) == {VOCAB - 1}


@pytest.mark.parametrize("template, message", [
    ("{{ raise_exception('no system role') }}", "does not render: .*no system role"),
    ("{% for m in messages %}", "does not render: TemplateSyntaxError"),
])
def test_a_template_that_does_not_render_names_the_checkpoint(tmp_path, template, message):
    make_checkpoint(str(tmp_path))
    conf_path = tmp_path / "tokenizer_config.json"
    conf = json.loads(conf_path.read_text())
    conf["chat_template"] = template
    conf_path.write_text(json.dumps(conf))
    if (tmp_path / "chat_template.jinja").exists():  # newer transformers save the template beside it
        (tmp_path / "chat_template.jinja").write_text(template)
    cfg = types.SimpleNamespace(checkpoint=str(tmp_path), file=str(tmp_path / "run.yaml"))
    with pytest.raises(_cli.CliError, match=f"checkpoint {tmp_path}: its chat template .*{message}"):
        tok = _cli._tokenizer(cfg)
        _cli._encode(cfg, tok, "w3", True)
