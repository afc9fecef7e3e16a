#!/usr/bin/python3
"""Writes the weights-I/O fixtures of tests/store into tests/golden/store/.

Usage: /usr/bin/python3 tests/golden/gen_store.py   (Debian's python3-torch; also run by
generate.py). The files are small and committed; the expected values are repeated in
tests/store/fixtures.hpp, so a change here needs the same change there.

  state_dict.pt       torch.save of every dtype Kiln has, views (transposed, sliced,
                      strided, expanded), a storage shared by several tensors, a 0-d, an
                      empty tensor and an nn.Parameter
  module.pt           an nn.Linear's state_dict() (an OrderedDict with _metadata, set by BUILD)
  nested.pt           a checkpoint dict: nested dicts of tensors beside an int and a string
  python.safetensors  the plain tensors of state_dict.pt, written by hand below (the
                      safetensors package is not installed), with __metadata__
  zip64.pt            state_dict.pt's entries in a zip that uses ZIP64 records throughout
  compressed.pt       state_dict.pt's entries, deflate-compressed (Kiln must refuse it)
  legacy.pt           the pre-1.6 torch.save format (Kiln must refuse it; its bytes change
                      on every run, as that format keys storages by memory address)
  evil_reduce.pt      torch.save of an object whose __reduce__ calls os.system
  evil_os_system.pt   a hand-written pickle that calls os.system
  unknown_opcode.pt   a pickle with the byte 0xff where an opcode belongs
"""
import collections
import json
import math
import os
import pathlib
import pickletools
import struct
import zipfile
import zlib

import torch

OUT = pathlib.Path(__file__).resolve().parent / "store"


def plain_tensors():
    """One tensor per dtype, with edge values; the same values are in fixtures.hpp."""
    sd = collections.OrderedDict()
    sd["f32"] = torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.5 - 2
    sd["f64"] = torch.tensor([[-1.25, 0.0, 1e300], [5e-324, -0.0, math.pi]], dtype=torch.float64)
    sd["f16"] = torch.tensor([1.5, -2.0, 65504.0, 2.0**-14, 2.0**-24, math.inf], dtype=torch.float16)
    sd["bf16"] = torch.tensor([1.0, -0.5, 256.0, 2.0**-130, -math.inf], dtype=torch.bfloat16)
    sd["i32"] = torch.tensor([-(2**31), -1, 0, 2**31 - 1], dtype=torch.int32)
    sd["i64"] = torch.tensor([[-(2**63), -1], [0, 2**63 - 1]], dtype=torch.int64)
    sd["u8"] = torch.tensor([0, 1, 127, 255], dtype=torch.uint8)
    sd["bool"] = torch.tensor([True, False, True])
    sd["scalar"] = torch.tensor(7.25)
    sd["empty"] = torch.zeros(0, 3)
    return sd


def state_dict():
    sd = plain_tensors()
    sd["transposed"] = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()  # strides (1, 3)
    shared = torch.arange(10, dtype=torch.int64)
    sd["shared.whole"] = shared
    sd["shared.slice"] = shared[2:7]  # storage offset 2
    sd["shared.strided"] = shared[1::3]  # offset 1, stride 3
    sd["shared.again"] = shared  # the same tensor under a second name
    sd["expanded"] = torch.tensor([1.0, 2.0]).expand(3, 2)  # stride 0
    sd["param"] = torch.nn.Parameter(torch.full((2,), 0.5))
    assert not sd["transposed"].is_contiguous() and sd["shared.slice"].storage_offset() == 2
    return sd


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


SAFETENSORS_DTYPES = {
    torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8", torch.bool: "BOOL",
}


def write_safetensors(path, tensors, metadata):
    """The format, by hand: u64 little-endian header length, JSON header, data."""
    header = {"__metadata__": metadata}
    data = bytearray()
    for name, t in tensors.items():
        raw = tensor_bytes(t)
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the reference writer pads to 8 bytes with spaces
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))


def write_zip(path, entries, zip64=False, method=0):
    """A zip of (name, bytes) entries, stored (method 0) or deflated (8); with zip64, every
    size and offset goes through the ZIP64 extra field and end records."""
    out, central = bytearray(), bytearray()
    date = (1 << 5) | 1  # 1980-01-01, as torch.save writes
    for name, data in entries:
        encoded = name.encode()
        crc = zlib.crc32(data)
        if method == 8:
            compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
            stored = compressor.compress(data) + compressor.flush()
        else:
            stored = data
        offset = len(out)
        if zip64:
            local_extra = struct.pack("<HHQQ", 1, 16, len(data), len(stored))
            central_extra = struct.pack("<HHQQQ", 1, 24, len(data), len(stored), offset)
            sizes, local_offset, version = (0xFFFFFFFF, 0xFFFFFFFF), 0xFFFFFFFF, 45
        else:
            local_extra = central_extra = b""
            sizes, local_offset, version = (len(stored), len(data)), offset, 20
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0, method, 0, date, crc, *sizes,
                           len(encoded), len(local_extra)) + encoded + local_extra + stored
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, version, version, 0, method, 0, date, crc,
                               *sizes, len(encoded), len(central_extra), 0, 0, 0, 0, local_offset)
        central += encoded + central_extra
    directory_offset = len(out)
    out += central
    count = len(entries)
    if zip64:
        record = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(central),
                           directory_offset)
        out += struct.pack("<IIQI", 0x07064B50, 0, record, 1)
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(central), directory_offset, 0)
    path.write_bytes(bytes(out))


def zip_entries(path):
    with zipfile.ZipFile(path) as z:
        return [(info.filename, z.read(info)) for info in z.infolist()]


class Evil:
    """Unpickling this calls os.system (posix.system on Linux): a checkpoint must never do that."""

    def __reduce__(self):
        return (os.system, ("echo kiln-was-tricked",))


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and tensor_bytes(a) == tensor_bytes(b)


def main():
    OUT.mkdir(exist_ok=True)
    sd = state_dict()
    torch.save(sd, OUT / "state_dict.pt")

    linear = torch.nn.Linear(3, 2)
    with torch.no_grad():
        linear.weight.copy_(torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4)
        linear.bias.copy_(torch.tensor([0.5, -0.5]))
    torch.save(linear.state_dict(), OUT / "module.pt")

    nested = {"epoch": 3, "model": {"w": torch.ones(2), "inner": {"b": torch.zeros(1, dtype=torch.int64)}},
              "name": "run1"}
    torch.save(nested, OUT / "nested.pt")

    write_safetensors(OUT / "python.safetensors", plain_tensors(), {"format": "pt", "writer": "gen_store.py"})

    entries = zip_entries(OUT / "state_dict.pt")
    write_zip(OUT / "zip64.pt", entries, zip64=True)
    write_zip(OUT / "compressed.pt", entries, method=8)
    torch.save(plain_tensors(), OUT / "legacy.pt", _use_new_zipfile_serialization=False)

    torch.save({"weight": torch.ones(1), "payload": Evil()}, OUT / "evil_reduce.pt")
    version = ("archive/version", b"3\n")
    # {'payload': os.system('echo kiln-was-tricked')}, protocol 2 as torch.save writes it.
    def text(value):
        return b"X" + struct.pack("<I", len(value)) + value

    evil = (b"\x80\x02}q\x00" + text(b"payload") + b"q\x01cos\nsystem\nq\x02" + text(b"echo kiln-was-tricked")
            + b"q\x03\x85q\x04Rq\x05s.")
    write_zip(OUT / "evil_os_system.pt", [("archive/data.pkl", evil), version])
    write_zip(OUT / "unknown_opcode.pt", [("archive/data.pkl", b"\x80\x02}q\x00\xff."), version])

    # The fixtures Kiln must read are read back by PyTorch first (never the evil ones).
    for name in ("state_dict.pt", "zip64.pt"):
        loaded = torch.load(OUT / name)
        assert list(loaded) == list(sd) and all(same(loaded[k], sd[k]) for k in sd), name
    assert list(torch.load(OUT / "module.pt")) == ["weight", "bias"]
    with zipfile.ZipFile(OUT / "compressed.pt") as z:
        assert z.testzip() is None
    for name in ("evil_os_system.pt", "unknown_opcode.pt"):  # well-formed zips (the pickles are not run)
        with zipfile.ZipFile(OUT / name) as z:
            assert z.testzip() is None
    evil_ops = [op.name for op, _, _ in pickletools.genops(evil)]
    assert evil_ops[-4:] == ["REDUCE", "BINPUT", "SETITEM", "STOP"], evil_ops
    for path in sorted(OUT.iterdir()):
        print(f"{path.relative_to(OUT.parent.parent.parent)}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
