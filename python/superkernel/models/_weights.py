"""Where a Python model's weights come from: a Hugging Face checkpoint directory or the seeded
random source the C++ models use without one.

A checkpoint is read as the C++ loader reads it (include/superkernel/weights.h, docs/MODELS.md):
``config.json`` plus one or more ``*.safetensors`` files, with ``model.safetensors.index.json``
naming the file of each tensor when present (otherwise every ``*.safetensors`` file of the
directory, and a tensor stored twice is an error). Tensors are converted between f32 and bf16 on
request; a tensor of another shape than the model asks for is an error naming both. After the
model is built, ``unread()`` lists the tensors it did not read, which the model turns into an
error as the C++ loader does.
"""

from __future__ import annotations

import json
import mmap
import os

import torch

from .._errors import InvalidArgumentError, NotFoundError, UnimplementedError

_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}

# As the C++ weight sources allocate (src/util/large_alloc.h): from 4 MiB up, 2 MiB aligned and
# advised as transparent huge pages, so that streaming a weight walks one TLB entry per 2 MiB;
# SK_HUGE_PAGES=0 leaves the advice out. The same placement keeps the sample's bandwidth-bound
# steps comparable with the C++ model's.
_HUGE_FROM = 4 << 20
_HUGE_PAGE = 2 << 20


def large_pages(t: torch.Tensor) -> torch.Tensor:
    """`t` copied into 2 MiB-aligned memory advised as huge pages, when it is that large."""
    nbytes = t.numel() * t.element_size()
    if nbytes < _HUGE_FROM or os.environ.get("SK_HUGE_PAGES") == "0" or not hasattr(mmap, "MADV_HUGEPAGE"):
        return t.contiguous()
    region = mmap.mmap(-1, nbytes + _HUGE_PAGE)
    start = (-_address(region)) % _HUGE_PAGE
    region.madvise(mmap.MADV_HUGEPAGE, start, (nbytes // _HUGE_PAGE) * _HUGE_PAGE or _HUGE_PAGE)
    out = torch.frombuffer(region, dtype=torch.uint8, count=nbytes, offset=start).view(t.dtype).view(t.shape)
    out.copy_(t)
    return out


def _address(region: mmap.mmap) -> int:
    import ctypes

    return ctypes.addressof(ctypes.c_char.from_buffer(region))


class WeightSource:
    """``get(name, dtype, shape, init)`` -> a torch tensor of exactly that dtype ("f32" or "bf16")
    and shape. ``init`` says how the random source fills it (linear, norm, bias, embedding, zero)."""

    def get(self, name: str, dtype: str, shape: list[int], init: str) -> torch.Tensor:
        raise NotImplementedError

    def has(self, name: str) -> bool:
        raise NotImplementedError

    def unread(self) -> list[str]:
        return []

    def describe(self) -> str:
        raise NotImplementedError


class RandomWeights(WeightSource):
    """The weights of ``sk::random_weights(seed)``: the same bytes the C++ models get, by name."""

    def __init__(self, seed: int):
        self.seed = seed

    def get(self, name, dtype, shape, init):
        from .. import cpp_models

        data = cpp_models.random_weight(self.seed, name, dtype, list(shape), init)
        return large_pages(torch.frombuffer(bytearray(data), dtype=_DTYPES[dtype]).reshape(list(shape)))

    def has(self, name):
        return True

    def describe(self):
        return f"random weights (seed {self.seed})"


class CheckpointWeights(WeightSource):
    """The tensors of a Hugging Face checkpoint directory (safetensors, sharded or not)."""

    def __init__(self, directory: str):
        from safetensors import safe_open

        self.dir = directory
        if not os.path.isfile(os.path.join(directory, "config.json")):
            raise NotFoundError(f"checkpoint {directory}: no config.json")
        index = os.path.join(directory, "model.safetensors.index.json")
        self._file_of: dict[str, str] = {}
        if os.path.isfile(index):
            with open(index) as f:
                weight_map = json.load(f).get("weight_map")
            if not isinstance(weight_map, dict):
                raise InvalidArgumentError(f"{index}: no 'weight_map' object")
            files = sorted(set(weight_map.values()))
        else:
            files = sorted(n for n in os.listdir(directory) if n.endswith(".safetensors"))
            weight_map = None
        if not files:
            raise NotFoundError(f"checkpoint {directory}: no *.safetensors file")
        self._handles = {}
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.isfile(path):
                raise NotFoundError(f"checkpoint {directory}: {index} names '{name}', which does not exist")
            handle = safe_open(path, framework="pt")
            self._handles[name] = handle
            for key in handle.keys():
                if weight_map is not None and weight_map.get(key) != name:
                    continue
                if key in self._file_of:
                    raise InvalidArgumentError(
                        f"checkpoint {directory}: tensor '{key}' is stored in both {self._file_of[key]} and {name}")
                self._file_of[key] = name
        if weight_map is not None:
            missing = sorted(k for k in weight_map if k not in self._file_of)
            if missing:
                raise NotFoundError(f"checkpoint {directory}: {index} names tensors its files lack: {', '.join(missing)}")
        self._read: set[str] = set()

    def has(self, name):
        return name in self._file_of

    def get(self, name, dtype, shape, init):
        file = self._file_of.get(name)
        if file is None:
            raise NotFoundError(f"checkpoint {self.dir}: no tensor '{name}'")
        t = self._handles[file].get_tensor(name)
        if list(t.shape) != list(shape):
            raise InvalidArgumentError(f"checkpoint {self.dir}: tensor '{name}' in {file} has shape {list(t.shape)}, "
                                       f"the model expects {list(shape)}")
        if t.dtype not in (torch.float32, torch.bfloat16):
            raise UnimplementedError(f"checkpoint {self.dir}: tensor '{name}' in {file} is {t.dtype}; f32 and bf16 "
                                     "tensors are read")
        self._read.add(name)
        return large_pages(t.to(_DTYPES[dtype]))

    def unread(self):
        return sorted(k for k in self._file_of if k not in self._read)

    def describe(self):
        return f"checkpoint {self.dir}"


def skipped_by_published_definition(name: str) -> bool:
    """Tensors transformers' LongCat-Flash itself skips: the multi-token-prediction layer and
    stored rotary inverse frequencies (recomputed from the config)."""
    return name.startswith("model.mtp.") or name.endswith("rotary_emb.inv_freq")
