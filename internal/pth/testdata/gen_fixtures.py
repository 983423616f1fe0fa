"""Writes the .pth fixtures of package pth's tests with the standard library
only: fake torch/numpy classes stand in for the real ones, so the pickles
name the same globals torch.save writes (torch._utils._rebuild_tensor_v2,
torch.FloatStorage, collections.OrderedDict, numpy.core.multiarray.scalar)
without PyTorch installed. Run from this directory: python3 gen_fixtures.py
"""
import argparse
import io
import pickle
import struct
import sys
import types
import zipfile
from collections import OrderedDict


def fake_module(name):
    m = types.ModuleType(name)
    sys.modules[name] = m
    return m


torch = fake_module("torch")
torch_utils = fake_module("torch._utils")
numpy = fake_module("numpy")
fake_module("numpy.core")
multiarray = fake_module("numpy.core.multiarray")


def _global(mod, name, obj):
    obj.__module__ = mod.__name__
    obj.__qualname__ = name
    obj.__name__ = name
    setattr(mod, name, obj)
    return obj


def _rebuild_tensor_v2(*args):
    raise RuntimeError("never called")


_global(torch_utils, "_rebuild_tensor_v2", _rebuild_tensor_v2)
STORAGE = {}
for cls, fmt in [("FloatStorage", "f"), ("HalfStorage", "e"), ("DoubleStorage", "d"),
                 ("LongStorage", "q"), ("BFloat16Storage", "H"), ("BoolStorage", "?")]:
    STORAGE[cls] = (_global(torch, cls, type(cls, (), {})), fmt)


class Storage:
    def __init__(self, cls, values):
        self.cls, self.fmt = STORAGE[cls]
        self.values = values
        self.key = None

    def bytes(self):
        return struct.pack("<%d%s" % (len(self.values), self.fmt), *self.values)


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, OrderedDict())

    def __reduce_ex__(self, proto):
        return (_rebuild_tensor_v2, self.args)


def contiguous(cls, shape, values):
    stride, acc = [], 1
    for s in reversed(shape):
        stride.insert(0, acc)
        acc *= s
    return Tensor(Storage(cls, values), 0, shape, stride)


class npdtype:
    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        return (npdtype, (self.code, False, True), (3, "<", None, None, None, -1, -1, 0))


_global(numpy, "dtype", npdtype)


class npscalar:
    def __init__(self, code, raw):
        self.code, self.raw = code, raw

    def __reduce__(self):
        return (scalar, (npdtype(self.code), self.raw))


def scalar(*args):
    raise RuntimeError("never called")


_global(multiarray, "scalar", scalar)


class Saver(pickle.Pickler):
    def __init__(self, f, storages):
        super().__init__(f, protocol=2)
        self.storages = storages

    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            if obj.key is None:
                obj.key = str(len(self.storages))
                self.storages.append(obj)
            return ("storage", obj.cls, obj.key, "cpu", len(obj.values))
        return None


def save_zip(obj, path, prefix="archive"):
    storages = []
    buf = io.BytesIO()
    Saver(buf, storages).dump(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(prefix + "/data.pkl", buf.getvalue())
        z.writestr(prefix + "/byteorder", "little")
        for s in storages:
            z.writestr(prefix + "/data/" + s.key, s.bytes())
        z.writestr(prefix + "/version", "3\n")


class LegacySaver(Saver):
    def persistent_id(self, obj):
        pid = super().persistent_id(obj)
        return None if pid is None else pid + (None,)


def save_legacy(obj, path):
    storages = []
    with open(path, "wb") as f:
        pickle.dump(0x1950A86A20F9469CFC6C, f, protocol=2)
        pickle.dump(1001, f, protocol=2)
        pickle.dump({"protocol_version": 1001, "little_endian": True,
                     "type_sizes": {"short": 2, "int": 4, "long": 4}}, f, protocol=2)
        LegacySaver(f, storages).dump(obj)
        pickle.dump([s.key for s in storages], f, protocol=2)
        for s in storages:
            f.write(struct.pack("<q", len(s.values)))
            f.write(s.bytes())


def r2gen_checkpoint():
    sd = OrderedDict()
    # 2×3 weight, contiguous: values 0..5 / 4.
    sd["encoder_decoder.w"] = contiguous("FloatStorage", [2, 3], [i / 4 for i in range(6)])
    # A transposed view: logical 3×2 over a 2×3 storage (stride (1, 3)).
    tstore = Storage("FloatStorage", [float(i) for i in range(6)])
    sd["encoder_decoder.wt"] = Tensor(tstore, 0, [3, 2], [1, 3])
    # A slice sharing that storage: elements 2..4 at offset 2.
    sd["encoder_decoder.slice"] = Tensor(tstore, 2, [3], [1])
    sd["encoder_decoder.half"] = contiguous("HalfStorage", [4], [0.5, -2.0, 65504.0, 2 ** -24])
    sd["encoder_decoder.double"] = contiguous("DoubleStorage", [2], [0.1, -3.5])
    sd["encoder_decoder.bf16"] = contiguous("BFloat16Storage", [2], [0x3F80, 0xC040])  # 1, -3
    sd["visual_extractor.model.1.num_batches_tracked"] = Tensor(Storage("LongStorage", [7]), 0, [], [])
    sd._metadata = OrderedDict([("", {"version": 1})])
    step = Tensor(Storage("FloatStorage", [3.0]), 0, [], [])
    optimizer = {
        "state": {0: {"step": step,
                      "exp_avg": contiguous("FloatStorage", [2, 3], [0.0] * 6),
                      "exp_avg_sq": contiguous("FloatStorage", [2, 3], [0.0] * 6)}},
        "param_groups": [{"lr": 5e-5, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 5e-5,
                          "amsgrad": True, "params": [0, 1]}],
    }
    return {
        "epoch": 12,
        "state_dict": sd,
        "optimizer": optimizer,
        "monitor_best": npscalar("f8", struct.pack("<d", 0.1875)),
        "args": argparse.Namespace(dataset_name="iu_xray", d_model=512, seed=9233),
    }


if __name__ == "__main__":
    save_zip(r2gen_checkpoint(), "r2gen_like.pth", prefix="model_best")
    save_legacy(r2gen_checkpoint(), "r2gen_like_legacy.pth")
