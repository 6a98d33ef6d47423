"""The YAML run configs of the ``superkernel`` command line (docs/CONFIG.md), read for
``python -m superkernel``.

The file is read with the C++ loader's keys, types, ranges and rules (src/config): the original
system's ``model_config.exe_mode`` and ``custom_params.enable_superkernel / enable_multi_streams /
enable_prefetch`` are mapped onto the project's own settings (``exe_mode`` graph with
``enable_superkernel: true`` is superkernel mode; ``enable_superkernel`` turns the model's
``superkernel_scope`` wrappers on; ``enable_multi_streams`` puts the MoE branch on its own
stream; ``enable_prefetch`` makes the AFD model prefetch). An unknown key, a key set twice, a value
of the wrong type or range and a broken rule are errors reading ``FILE:LINE: key 'a.b': ...``,
as from the C++ command line.

    cfg = load("configs/longcat-mini.yaml")
    cfg.exe_mode, cfg.build_options(), cfg.backend_options()
"""

from __future__ import annotations

import fnmatch
import math
import os
from dataclasses import dataclass, field

from .._errors import InvalidArgumentError, NotFoundError
from ._architectures import CPP_ONLY

# model.architecture: the PyTorch samples' and the C++ model library's.
ARCHITECTURES = ("longcat_flash", "longcat_flash_afd") + CPP_ONLY


@dataclass
class RunConfig:
    file: str
    exe_mode: str = "graph"
    enable_superkernel: bool = False
    enable_multi_streams: int = 0
    enable_prefetch: bool = False
    scope_options: list = field(default_factory=list)  # [(pattern, options, line)]
    compile_options: dict = field(default_factory=dict)  # key -> value text
    architecture: str = ""
    checkpoint: str = ""
    dtype: str = "f32"
    w8a8: bool = False
    kv_cache_dtype: str = "f32"
    seed: int = 1
    model_keys: dict = field(default_factory=dict)  # config.json keys of model.config -> value text
    cores: int = 0
    cube_cores: int = 0
    load_policy: str = "adaptive"
    chunk_bytes: int = 256 << 10
    core_limits: dict = field(default_factory=dict)  # stream -> (cube, vector)
    batch: int = 1
    prompt_tokens: int = 8
    new_tokens: int = 16
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    sampling_seed: int = 0
    warmup: int = 3
    runs: int = 20
    lines: dict = field(default_factory=dict)  # dotted key -> line

    def where(self, key: str) -> str:
        return f"{self.file}:{self.lines.get(key, 0)}"

    def error(self, key: str, why: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"{self.where(key)}: key '{key}': {why}")

    def scope_options_for(self, scope: str) -> str:
        for pattern, options, _ in self.scope_options:
            if fnmatch.fnmatchcase(scope, pattern):
                return options
        return ""

    def core_limit(self, stream: str) -> int:
        cube, vector = self.core_limits.get(stream, (0, 0))
        return max(cube, vector)

    def cache_tokens(self) -> int:
        """Tokens per sequence the caches hold: the prompt, then every id but the last."""
        return self.prompt_tokens + max(self.new_tokens - 1, 1)

    def build_options(self, mode: str | None = None):
        """The model's BuildOptions, as the C++ command line derives them (block size 16, the
        context rounded up to whole blocks, one prefill of every prompt)."""
        from .longcat_flash import BuildOptions

        mode = mode or self.exe_mode
        block = 16
        cube, vector = self.core_limits.get("moe", (0, 0))
        if cube and vector and cube != vector:
            raise self.error("runtime.core_limits.moe", "different cube and vector limits are not supported by the "
                             "model builders yet; set them equal")
        return BuildOptions(
            weight_dtype="w8a8" if self.w8a8 else self.dtype, kv_cache_dtype=self.kv_cache_dtype, batch=self.batch,
            block_size=block, max_context=-(-self.cache_tokens() // block) * block,
            prefill_tokens=self.batch * self.prompt_tokens, enable_superkernel=mode == "superkernel",
            multi_streams=self.enable_multi_streams, moe_core_limit=self.core_limit("moe"),
            prefetch=self.enable_prefetch, prefetch_core_limit=self.core_limit("prefetch"),
            scope_options=self.scope_options_for)

    def runtime_options(self) -> dict:
        """superkernel.configure_runtime(**...) for the runtime section (RuntimeOptions)."""
        return {"num_cores": self.cores, "cube_cores": self.cube_cores, "load_policy": self.load_policy,
                "chunk_bytes": self.chunk_bytes}

    def backend_options(self, mode: str | None = None, *, frozen_modules: bool = False) -> dict:
        """torch.compile(backend="superkernel") options for `mode` (default: the configured one),
        with model_config.compile_options applied (``frozen_modules``: see
        longcat_flash.compile_options)."""
        from .longcat_flash import compile_options

        return compile_options(mode or self.exe_mode, dict(self.compile_options), frozen_modules=frozen_modules)


class _Reader:
    def __init__(self, cfg: RunConfig):
        self.cfg = cfg

    def line(self, node) -> int:
        return node.start_mark.line + 1

    def fail(self, key_node, path: str, why: str):
        raise InvalidArgumentError(f"{self.cfg.file}:{self.line(key_node)}: key '{path}': {why}")

    def expected(self, key_node, path, value, what):
        import yaml

        if value is None or (isinstance(value, yaml.ScalarNode) and value.tag.endswith(":null")):
            got = ", got nothing"
        elif isinstance(value, yaml.ScalarNode):
            got = f", got '{value.value}'"
        elif isinstance(value, yaml.SequenceNode):
            got = ", got a list"
        else:
            got = ", got a mapping"
        self.fail(key_node, path, f"expected {what}{got}")

    def entries(self, node, path: str, known: tuple, key_node=None):
        """(path, key node, value node) of a mapping, checking unknown and repeated keys."""
        import yaml

        if not isinstance(node, yaml.MappingNode):
            what = "a mapping" + (f" with keys {', '.join(known)}" if known else "")
            if key_node is None:
                raise InvalidArgumentError(f"{self.cfg.file}:1: expected {what}")
            self.expected(key_node, path, node, what)
        seen = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise InvalidArgumentError(f"{self.cfg.file}:{self.line(k)}: in '{path}': expected a plain key")
            full = f"{path}.{k.value}" if path else k.value
            if known and k.value not in known:
                close = [c for c in known if _close(k.value, c)]
                hint = f"; did you mean '{close[0]}'?" if close else ""
                self.fail(k, full, f"unknown key{hint}; expected one of {', '.join(known)}")
            if k.value in seen:
                self.fail(k, full, f"set twice (first at line {seen[k.value]})")
            seen[k.value] = self.line(k)
            self.cfg.lines[full] = self.line(k)
            yield full, k, v

    def scalar(self, k, path, v, what) -> str:
        import yaml

        if not isinstance(v, yaml.ScalarNode) or v.tag.endswith(":null"):
            self.expected(k, path, v, what)
        return v.value

    def boolean(self, k, path, v) -> bool:
        text = self.scalar(k, path, v, "true or false").lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        self.expected(k, path, v, "true or false")

    def integer(self, k, path, v, lo, hi) -> int:
        what = f"an integer in [{lo}, {hi}]"
        text = self.scalar(k, path, v, what)
        try:
            value = int(text, 10)
        except ValueError:
            self.expected(k, path, v, what)
        if not lo <= value <= hi or text.strip() != text or text.startswith("+"):
            self.expected(k, path, v, what)
        return value

    def number(self, k, path, v, lo, hi, lo_open) -> float:
        what = f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
        text = self.scalar(k, path, v, what)
        try:
            value = float(text)
        except ValueError:
            self.expected(k, path, v, what)
        if not math.isfinite(value) or not (value > lo if lo_open else value >= lo) or value > hi:
            self.expected(k, path, v, what)
        return value

    def choice(self, k, path, v, choices) -> str:
        what = " or ".join(f"'{c}'" for c in choices)
        text = self.scalar(k, path, v, what)
        if text not in choices:
            self.expected(k, path, v, what)
        return text


def _close(a: str, b: str) -> bool:
    """A likely slip: edit distance at most 2 (or a third of the longer name)."""
    m, n = len(a), len(b)
    prev = list(range(n + 1))
    for i in range(1, m + 1):
        cur = [i] + [0] * n
        for j in range(1, n + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return prev[n] <= max(2, max(m, n) // 3)


def _read(r: _Reader, root) -> None:
    import yaml

    cfg = r.cfg
    for path, k, v in r.entries(root, "", ("model_config", "model", "runtime", "decode", "bench")):
        if path == "model_config":
            for p, k2, v2 in r.entries(v, path, ("exe_mode", "custom_params", "scope_options", "compile_options"), k):
                if p.endswith("exe_mode"):
                    cfg.exe_mode = r.choice(k2, p, v2, ("eager", "graph", "superkernel"))
                elif p.endswith("custom_params"):
                    for p3, k3, v3 in r.entries(v2, p, ("enable_superkernel", "enable_multi_streams",
                                                        "enable_prefetch"), k2):
                        if p3.endswith("enable_superkernel"):
                            cfg.enable_superkernel = r.boolean(k3, p3, v3)
                        elif p3.endswith("enable_prefetch"):
                            cfg.enable_prefetch = r.boolean(k3, p3, v3)
                        else:
                            cfg.enable_multi_streams = r.integer(k3, p3, v3, 0, 2)
                elif p.endswith("scope_options"):
                    for p3, k3, v3 in r.entries(v2, p, (), k2):
                        if isinstance(v3, yaml.MappingNode):
                            pairs = [f"{k4.value}={r.scalar(k4, p4, v4, 'a scope option value')}"
                                     for p4, k4, v4 in r.entries(v3, p3, (), k3)]
                            text = ":".join(pairs)
                        else:
                            text = r.scalar(k3, p3, v3, 'scope options as "key=value:key=value" or a mapping')
                        for pair in filter(None, text.split(":")):
                            if "=" not in pair:
                                r.fail(k3, p3, f"'{pair}' (expected key=value)")
                        cfg.scope_options.append((k3.value, text, r.line(k3)))
                else:
                    _read_compile_options(r, k2, p, v2)
        elif path == "model":
            keys = ("architecture", "checkpoint", "dtype", "w8a8", "kv_cache_dtype", "seed", "config")
            for p, k2, v2 in r.entries(v, path, keys, k):
                name = k2.value
                if name == "architecture":
                    cfg.architecture = r.scalar(k2, p, v2, "an architecture name")
                elif name == "checkpoint":
                    d = r.scalar(k2, p, v2, "a checkpoint directory")
                    if not d:
                        r.expected(k2, p, v2, "a checkpoint directory")
                    if not os.path.isabs(d):
                        d = os.path.join(os.path.dirname(cfg.file), d)
                    cfg.checkpoint = os.path.normpath(d)
                elif name in ("dtype", "kv_cache_dtype"):
                    setattr(cfg, name, r.choice(k2, p, v2, ("f32", "bf16")))
                elif name == "w8a8":
                    cfg.w8a8 = r.boolean(k2, p, v2)
                elif name == "seed":
                    cfg.seed = r.integer(k2, p, v2, 0, 2**64 - 1)
                else:
                    for p3, k3, v3 in r.entries(v2, p, (), k2):
                        cfg.model_keys[k3.value] = r.scalar(k3, p3, v3, "a scalar value (as in config.json)")
        elif path == "runtime":
            for p, k2, v2 in r.entries(v, path, ("cores", "cube_cores", "load_policy", "chunk_bytes", "core_limits"),
                                       k):
                if k2.value in ("cores", "cube_cores"):
                    setattr(cfg, k2.value, r.integer(k2, p, v2, 0, 1024))
                elif k2.value == "load_policy":
                    policy = r.scalar(k2, p, v2, "adaptive, static or one_thread")
                    if policy not in ("adaptive", "static", "one_thread"):
                        r.fail(k2, p, f"expected adaptive, static or one_thread, got '{policy}'")
                    cfg.load_policy = policy
                elif k2.value == "chunk_bytes":
                    cfg.chunk_bytes = r.integer(k2, p, v2, 0, 1 << 30)
                    if 0 < cfg.chunk_bytes < 4096:
                        r.fail(k2, p, f"expected 0 or at least 4096, got {cfg.chunk_bytes}")
                else:
                    for p3, k3, v3 in r.entries(v2, p, ("moe", "prefetch"), k2):
                        limit = {"cube": 0, "vector": 0}
                        for p4, k4, v4 in r.entries(v3, p3, ("cube", "vector"), k3):
                            limit[k4.value] = r.integer(k4, p4, v4, 0, 1024)
                        cfg.core_limits[k3.value] = (limit["cube"], limit["vector"])
        elif path == "decode":
            for p, k2, v2 in r.entries(v, path, ("batch", "prompt_tokens", "new_tokens", "sampling"), k):
                if k2.value == "batch":
                    cfg.batch = r.integer(k2, p, v2, 1, 4096)
                elif k2.value in ("prompt_tokens", "new_tokens"):
                    setattr(cfg, k2.value, r.integer(k2, p, v2, 1, 1 << 20))
                else:
                    for p3, k3, v3 in r.entries(v2, p, ("temperature", "top_k", "top_p", "seed"), k2):
                        if k3.value == "temperature":
                            cfg.temperature = r.number(k3, p3, v3, 0.0, 1e6, False)
                        elif k3.value == "top_k":
                            cfg.top_k = r.integer(k3, p3, v3, 0, 2**31 - 1)
                        elif k3.value == "top_p":
                            cfg.top_p = r.number(k3, p3, v3, 0.0, 1.0, True)
                        else:
                            cfg.sampling_seed = r.integer(k3, p3, v3, 0, 2**64 - 1)
        else:
            for p, k2, v2 in r.entries(v, path, ("warmup", "runs"), k):
                if k2.value == "warmup":
                    cfg.warmup = r.integer(k2, p, v2, 0, 100000)
                else:
                    cfg.runs = r.integer(k2, p, v2, 1, 100000)
    if "model" not in cfg.lines:
        raise InvalidArgumentError(f"{cfg.file}:1: the 'model' section is missing")


def _read_compile_options(r: _Reader, key_node, path, node) -> None:
    import yaml

    from .. import _superkernel

    known = [k for k in _superkernel.CompileOptions.keys() if k not in ("static_kernel_compile",
                                                                        "super_kernel_optimize")]
    for p, k, v in r.entries(node, path, (), key_node):
        if k.value in ("static_kernel_compile", "super_kernel_optimize"):
            r.expected(k, p, v, "no execution-mode switch here (model_config.exe_mode and "
                       "custom_params.enable_superkernel select the mode)")
        if k.value not in known:
            close = [c for c in known if _close(k.value, c)]
            hint = f"; did you mean '{close[0]}'?" if close else ""
            r.fail(k, p, f"unknown compile option{hint}; expected one of {', '.join(known)}")
        if isinstance(v, yaml.SequenceNode):
            text = ",".join(r.scalar(k, p, item, "a scalar") for item in v.value)
        else:
            text = r.scalar(k, p, v, "a value")
        probe = _superkernel.CompileOptions()
        try:
            probe.set(k.value, text)
            probe.validate()
        except Exception as e:  # noqa: BLE001 - the C++ message explains the value
            r.fail(k, p, str(e))
        r.cfg.compile_options[k.value] = text


def _check_rules(cfg: RunConfig) -> None:
    """The rules between keys (docs/CONFIG.md, "Rules between keys")."""
    sk_key = "model_config.custom_params.enable_superkernel"
    streams = "model_config.custom_params.enable_multi_streams"
    prefetch = "model_config.custom_params.enable_prefetch"

    def set_at(key, value):
        line = cfg.lines.get(key)
        return f"({key} is {value}" + (f" at line {line})" if line else " by default)")

    mode_note = set_at("model_config.exe_mode", cfg.exe_mode)
    if cfg.exe_mode == "eager" and cfg.enable_superkernel:
        raise cfg.error(sk_key, "super kernels need a static graph mode; set exe_mode to graph or superkernel "
                        + mode_note)
    if cfg.exe_mode == "superkernel" and sk_key in cfg.lines and not cfg.enable_superkernel:
        raise cfg.error(sk_key, "false contradicts exe_mode superkernel " + mode_note)
    if cfg.exe_mode == "eager" and cfg.enable_multi_streams > 0:
        raise cfg.error(streams, "extra streams need a static graph mode; set exe_mode to graph or superkernel "
                        + mode_note)
    if cfg.enable_prefetch and cfg.enable_multi_streams == 0:
        raise cfg.error(prefetch, "prefetch needs multi-streams: set enable_multi_streams to 1 or 2 "
                        + set_at(streams, cfg.enable_multi_streams))
    if not cfg.checkpoint and not cfg.architecture:
        raise cfg.error("model", "expected 'checkpoint' (a directory) or 'architecture' with its size keys")
    if cfg.checkpoint and cfg.model_keys:
        first = next(iter(cfg.model_keys))
        raise cfg.error(f"model.config.{first}", "the sizes come from the checkpoint's config.json; remove "
                        "model.config or model.checkpoint")
    if cfg.temperature == 0.0:
        for key in ("top_k", "top_p"):
            if f"decode.sampling.{key}" in cfg.lines:
                raise cfg.error(f"decode.sampling.{key}", "has no effect with temperature 0 (argmax); set "
                                "decode.sampling.temperature above 0")
    cores = cfg.cores or len(os.sched_getaffinity(0))
    if cfg.cores > len(os.sched_getaffinity(0)):
        raise cfg.error("runtime.cores", f"expected at most {len(os.sched_getaffinity(0))} (the CPUs this process "
                        f"may use), got {cfg.cores}")
    if cfg.cube_cores and cfg.cube_cores >= cores:
        raise cfg.error("runtime.cube_cores", f"expected fewer than the {cores} cores so that the vector group keeps "
                        "a core; 0 lets every core serve both kinds")
    for stream, (cube, vector) in cfg.core_limits.items():
        key = f"runtime.core_limits.{stream}"
        if stream == "moe" and cfg.enable_multi_streams < 1:
            raise cfg.error(key, "a core limit for stream moe needs enable_multi_streams 1 or 2 "
                            + set_at(streams, cfg.enable_multi_streams))
        if stream == "prefetch" and (cfg.enable_multi_streams < 2 or not cfg.enable_prefetch):
            raise cfg.error(key, "a core limit for stream prefetch needs enable_multi_streams 2 and enable_prefetch "
                            "true")
        if cube == 0 and vector == 0:
            raise cfg.error(key, "expected a cube or vector limit above 0 (leave the stream out for no limit)")
        cube_group = cfg.cube_cores or cores
        vector_group = cores - cfg.cube_cores if cfg.cube_cores else cores
        if cube > cube_group:
            raise cfg.error(key + ".cube", f"expected at most {cube_group} (the cube group's cores), got {cube}")
        if vector > vector_group:
            raise cfg.error(key + ".vector", f"expected at most {vector_group} (the vector group's cores), got "
                            f"{vector}")


def parse(text: str, file: str) -> RunConfig:
    """A config from YAML text; `file` names it in errors and anchors a relative checkpoint."""
    import yaml

    cfg = RunConfig(file=file)
    try:
        root = yaml.compose(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise InvalidArgumentError(f"{file}:{(mark.line + 1) if mark else 1}: not valid YAML: {e.problem}") from None
    if root is None:
        raise InvalidArgumentError(f"{file}:1: the 'model' section is missing")
    _read(_Reader(cfg), root)
    _check_rules(cfg)
    # exe_mode graph with enable_superkernel is the original's spelling of superkernel mode.
    if cfg.enable_superkernel:
        cfg.exe_mode = "superkernel"
    if cfg.exe_mode == "superkernel":
        cfg.enable_superkernel = True
    return cfg


def load(path: str) -> RunConfig:
    """A YAML run config, or a checkpoint directory (config.json and its tensors): superkernel
    mode on the checkpoint's weights in the dtype config.json's ``torch_dtype`` names (bf16 and
    f16 stay so, anything else runs in f32)."""
    if os.path.isdir(path):
        return from_checkpoint(path)
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        raise NotFoundError(f"{path}: cannot open the config file") from None
    return parse(text, path)


def from_checkpoint(directory: str) -> RunConfig:
    import json

    config_json = os.path.join(directory, "config.json")
    try:
        with open(config_json, encoding="utf-8") as f:
            data = json.load(f)
    except OSError:
        raise NotFoundError(f"{directory}: a directory without config.json is not a checkpoint") from None
    except ValueError as e:
        raise InvalidArgumentError(f"{config_json}: not a JSON file: {e}") from None
    if not isinstance(data, dict):
        raise InvalidArgumentError(f"{config_json}: expected a JSON object")
    dtype = {"bfloat16": "bf16", "float16": "f16"}.get(str(data.get("torch_dtype", data.get("dtype", ""))), "f32")
    return RunConfig(file=config_json, exe_mode="superkernel", enable_superkernel=True, checkpoint=directory,
                     dtype=dtype)
