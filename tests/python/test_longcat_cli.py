"""``python -m superkernel run|bench|explain|generate CONFIG`` on the LongCat-Flash sample: the
command line's YAML configs with the original's keys, text in and text out through a tokenizer
made with the `tokenizers` library and saved beside a seeded oracle checkpoint (transformers'
greedy ids, decoded, are the text every mode must print), EOS and --max-new-tokens, sampling
flags, and the errors (random-weight configs have no tokenizer; unknown keys name themselves)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from longcat_oracle import Case
from superkernel import _cli
from superkernel.models import run_config

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EOS_WORD = 95  # the oracle vocabulary's last id is the tokenizer's EOS token


def make_tokenizer(directory, vocab_size):
    """A word-level tokenizer over words w0 .. w{V-1} (id i is "w{i}"), with a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"w{i}": i for i in range(vocab_size)}
    vocab[f"w{EOS_WORD}"] = EOS_WORD
    tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    from tokenizers import decoders

    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0", eos_token=f"w{EOS_WORD}")
    fast.chat_template = "{% for m in messages %}w1 {{ m['content'] }} w2 {% endfor %}"
    fast.save_pretrained(directory)


def oracle_checkpoint_with_tokenizer(d):
    """The longcat_packed oracle checkpoint copied into directory `d` with a word tokenizer; its Case."""
    case = Case("longcat_packed")
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(case.dir, name), d / name)
    make_tokenizer(str(d), 96)
    return case


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """The longcat_packed oracle checkpoint with a tokenizer, and a config file naming it."""
    d = tmp_path_factory.mktemp("ckpt")
    case = oracle_checkpoint_with_tokenizer(d)
    cfg = d / "run.yaml"
    cfg.write_text(f"""model_config:
  exe_mode: graph
  custom_params:
    enable_superkernel: true
    enable_multi_streams: 0
    enable_prefetch: false
model:
  checkpoint: {d}
decode:
  new_tokens: 16
""")
    return case, d, str(cfg)


def run_main(capsys, *argv):
    code = _cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("mode", ["eager", "graph", "superkernel"])
def test_generate_prints_transformers_greedy_text(checkpoint, capsys, mode):
    case, d, cfg = checkpoint
    prompt = " ".join(f"w{i}" for i in case.prompt)
    code, out, err = run_main(capsys, "generate", cfg, "--prompt", prompt, "--max-new-tokens", "10", "--mode", mode)
    assert code == 0, err
    want = case.ids["f32"][:10]
    assert EOS_WORD not in want
    assert out.split() == [f"w{i}" for i in want]
    assert "10 new tokens, stopped at --max-new-tokens" in err


def test_generate_stops_at_eos_and_takes_ids(checkpoint, capsys, tmp_path):
    case, d, cfg = checkpoint
    # The fifth greedy id made the EOS token: generation stops before it.
    eos = case.ids["f32"][4]
    conf = json.loads((d / "config.json").read_text())
    alt = tmp_path / "eos"
    shutil.copytree(d, alt)
    (alt / "config.json").write_text(json.dumps(dict(conf, eos_token_id=eos)))
    alt_cfg = tmp_path / "eos.yaml"
    alt_cfg.write_text(open(cfg).read().replace(str(d), str(alt)))
    ids = ",".join(map(str, case.prompt))
    code, out, err = run_main(capsys, "generate", str(alt_cfg), "--prompt-ids", ids, "--max-new-tokens", "16")
    assert code == 0, err
    assert out.split() == [f"w{i}" for i in case.ids["f32"][:4]]
    assert "stopped at EOS" in err


def test_generate_chat_template_and_sampling_flags(checkpoint, capsys):
    case, d, cfg = checkpoint
    prompt = " ".join(f"w{i}" for i in case.prompt)
    args = ["generate", cfg, "--prompt", prompt, "--max-new-tokens", "6", "-q", "--temperature", "0.8",
            "--top-k", "20", "--top-p", "0.9", "--seed", "7"]
    code, first, err = run_main(capsys, *args)
    assert code == 0, err
    code, again, _ = run_main(capsys, *args)
    assert first == again and 1 <= len(first.split()) <= 6 and all(w.startswith("w") for w in first.split())
    # The chat template's prompt ends where the tiny model may well draw EOS first: over a few
    # seeds, every run succeeds with words of the vocabulary and some make words at all.
    chats = []
    for seed in ("7", "8", "9"):
        code, chat, err = run_main(capsys, *args[:-1], seed, "--chat-template")
        assert code == 0, err
        assert all(w.startswith("w") for w in chat.split())
        chats.append(chat.split())
    assert any(chats), chats


def test_random_weight_config_has_no_tokenizer(capsys):
    code, out, err = run_main(capsys, "generate", os.path.join(ROOT, "configs", "longcat-mini.yaml"), "--prompt",
                              "hello")
    assert code == 3
    assert "random weights" in err and "no tokenizer" in err and "--prompt-ids" in err


def test_run_explain_bench_on_a_config(checkpoint, capsys, tmp_path):
    case, d, cfg = checkpoint
    code, out, err = run_main(capsys, "run", cfg, "--prompt", ",".join(map(str, case.prompt)), "--tokens", "4", "-q")
    assert code == 0, err
    assert f"ids {' '.join(map(str, case.ids['f32'][:4]))}" in out
    assert "steps: the first captured, the others replayed" in out
    # Every decode step after the first replays the captured one; --no-replay calls the compiled
    # step through torch.compile instead: the same ids either way.
    code, out, err = run_main(capsys, "run", cfg, "--prompt", ",".join(map(str, case.prompt)), "--tokens", "4", "-q",
                              "--no-replay")
    assert code == 0, err
    assert f"ids {' '.join(map(str, case.ids['f32'][:4]))}" in out
    assert "steps: called through torch.compile" in out
    code, out, err = run_main(capsys, "explain", cfg, "-q")
    assert code == 0, err
    for layer in range(2):
        for part in ("part1", "part2_moe", "part2_main"):
            assert f"scope_{layer}_{part}" in out
    # bench on the FFN-only model of the same checkpoint (small graphs: cheap to compile thrice).
    afd = tmp_path / "afd.yaml"
    afd.write_text(open(cfg).read().replace("model:\n", "model:\n  architecture: longcat_flash_afd\n")
                   .replace("new_tokens: 16", "new_tokens: 2") + "bench:\n  warmup: 1\n  runs: 2\n")
    code, out, err = run_main(capsys, "bench", str(afd), "-q", "--json", str(tmp_path / "b.json"))
    assert code == 0, err
    assert "| superkernel |" in out and "bit-identical" in out and "(the captured step replayed)" in out
    assert set(json.loads((tmp_path / "b.json").read_text())["modes"]) == {"eager", "graph", "superkernel"}
    code, out, err = run_main(capsys, "bench", str(afd), "-q", "--no-replay", "--json", "/dev/full")
    assert code == 1 and "--json: cannot write '/dev/full'" in err, err  # the table printed, the file lost: exit 1
    assert "(compiled calls)" in out


def test_original_keys_map_onto_the_project_ones(tmp_path):
    def load(text):
        p = tmp_path / "c.yaml"
        p.write_text(text)
        return run_config.load(str(p))

    model = "model:\n  architecture: longcat_flash\n"
    cfg = load("model_config:\n  exe_mode: graph\n  custom_params:\n    enable_superkernel: true\n" + model)
    assert cfg.exe_mode == "superkernel" and cfg.build_options().enable_superkernel
    cfg = load("model_config:\n  exe_mode: graph\n" + model)
    assert cfg.exe_mode == "graph" and not cfg.build_options().enable_superkernel
    cfg = load("model_config:\n  exe_mode: superkernel\n  custom_params:\n    enable_multi_streams: 2\n"
               "    enable_prefetch: true\n" + model + "runtime:\n  core_limits:\n    moe: {cube: 1, vector: 1}\n")
    opts = cfg.build_options()
    assert opts.multi_streams == 2 and opts.prefetch and opts.moe_core_limit == 1
    assert cfg.backend_options() == {"static_kernel_compile": True, "super_kernel_optimize": True,
                                     "frozen_parameter": True}
    cfg = load("model_config:\n  scope_options:\n    'scope_*_part2_moe': feed-sync-all=1\n" + model)
    assert cfg.build_options().scope("scope_3_part2_moe") == "feed-sync-all=1"
    assert cfg.build_options().scope("scope_3_part1") == ""
    for text, message in [
        ("model_config:\n  custom_params:\n    enable_superkernal: true\n" + model,
         "c.yaml:3: key 'model_config.custom_params.enable_superkernal': unknown key; did you mean "
         "'enable_superkernel'?"),
        ("model_config:\n  exe_mode: eager\n  custom_params:\n    enable_superkernel: true\n" + model,
         "c.yaml:4: key 'model_config.custom_params.enable_superkernel': super kernels need a static graph mode"),
        ("model_config:\n  custom_params:\n    enable_prefetch: true\n" + model,
         "c.yaml:3: key 'model_config.custom_params.enable_prefetch': prefetch needs multi-streams"),
        ("model_config:\n  custom_params:\n    enable_multi_streams: 3\n" + model,
         "c.yaml:3: key 'model_config.custom_params.enable_multi_streams': expected an integer in [0, 2], got '3'"),
        (model + "  colour: red\n", "c.yaml:3: key 'model.colour': unknown key"),
        ("model_config:\n  compile_options:\n    static_kernel_compile: true\n" + model,
         "key 'model_config.compile_options.static_kernel_compile': expected no execution-mode switch"),
        ("model_config:\n  compile_options:\n    prefech: false\n" + model,
         "key 'model_config.compile_options.prefech': unknown compile option; did you mean 'prefetch'?"),
        ("bench:\n  runs: 2\n", "the 'model' section is missing"),
    ]:
        with pytest.raises(ValueError) as e:
            load(text)
        assert message in str(e.value)


def test_cli_errors_and_exit_codes(capsys, tmp_path):
    mini = os.path.join(ROOT, "configs", "longcat-mini.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text(open(mini).read().replace("n_routed_experts: 8", "n_routed_experts: -8"))
    code, _, err = run_main(capsys, "run", str(bad), "-q")
    assert code == 3 and "bad.yaml:" in err and "n_routed_experts" in err, err
    # A --json nobody can write fails before the run (sysfs takes no new files, not even root's).
    code, out, err = run_main(capsys, "bench", mini, "-q", "--json", "/sys/b.json")
    assert code == 2 and "--json: cannot write '/sys/b.json'" in err and "| superkernel |" not in out, err
    code, _, err = run_main(capsys, "rnu", mini)
    assert code == 2
    code, _, err = run_main(capsys, "run", mini, "--prompt", "1,x")
    assert code == 2 and "--prompt" in err
    code, _, err = run_main(capsys, "run", os.path.join(ROOT, "configs", "llama-mini.yaml"), "-q")
    assert code == 3 and "llama" in err


def test_python_dash_m_entry_point():
    """The package runs as a module (a subprocess: the real entry point)."""
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "superkernel", "--help"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0 and "generate" in out.stdout
