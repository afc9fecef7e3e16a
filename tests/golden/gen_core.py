"""Golden cases for the core types: float -> f16/bf16 -> float conversions (round to
nearest even, subnormals, overflow, inf/nan) and f16/bf16 bit patterns -> float.
Results are stored as f32 values plus the raw 16-bit patterns (as i32), so the C++ test
never needs Kiln's own conversion to read its expectations."""
import torch


def _bits(t16):
    return t16.view(torch.int16).to(torch.int32) & 0xFFFF


def cases(w):
    f16_ulp1 = 2.0 ** -10          # f16 spacing at 1
    bf16_ulp1 = 2.0 ** -7          # bf16 spacing at 1
    values = [
        0.0, -0.0, 1.0, -1.0, 0.5, 3.140625, 0.1, -0.3333333, 1e-3, 12345.678, -2.5e-6, 1e30, -1e-30,
        # ties and near-ties at 1.0: ties go to the even neighbour
        1.0 + f16_ulp1 / 2, 1.0 + 3 * f16_ulp1 / 2, 1.0 + f16_ulp1 / 2 + 2.0 ** -20,
        1.0 + bf16_ulp1 / 2, 1.0 + 3 * bf16_ulp1 / 2, 1.0 + bf16_ulp1 / 2 + 2.0 ** -20,
        # f16 range: largest finite, the last value that still rounds to it, overflow
        65504.0, 65519.0, 65519.996, 65520.0, 1e5, -1e5,
        # f16 subnormals: smallest, half of it (tie -> 0), 1.5x and 2.5x (ties to even), largest,
        # the tie between the largest subnormal and the smallest normal, the smallest normal
        2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -24, 2.5 * 2.0 ** -24, 1023 * 2.0 ** -24,
        2.0 ** -14 - 2.0 ** -25, 2.0 ** -14, -3 * 2.0 ** -24, 2.0 ** -26,
        # bf16 range: float max overflows, float subnormals survive
        3.3895e38, 3.4028234e38, -3.4028234e38, 1e-40, -1e-39, 1.17549435e-38,
        float("inf"), float("-inf"),
    ]
    x = torch.tensor(values, dtype=torch.float32)
    h = x.to(torch.float16)
    b = x.to(torch.bfloat16)
    w.case("float_to_half", x=x, out=h.to(torch.float32), bits=_bits(h))
    w.case("float_to_bfloat16", x=x, out=b.to(torch.float32), bits=_bits(b))

    # NaN: any payload stays NaN; the quiet default NaN has a fixed pattern
    nan = torch.tensor([float("nan"), -float("nan")], dtype=torch.float32)
    w.case("nan_bits", half=_bits(nan.to(torch.float16)), bfloat16=_bits(nan.to(torch.bfloat16)))

    # bit patterns -> float: zeros, subnormals, normals, largest, infinities
    patterns = [0x0000, 0x8000, 0x0001, 0x8001, 0x0200, 0x03FF, 0x0400, 0x3555, 0x3BFF, 0x3C00, 0x3C01,
                0x4248, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x1234, 0xC000]
    p = torch.tensor([v - 0x10000 if v >= 0x8000 else v for v in patterns], dtype=torch.int16)
    w.case("half_bits_to_float", bits=p.to(torch.int32) & 0xFFFF, out=p.view(torch.float16).to(torch.float32))
    bpatterns = [0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x3F80, 0x3F81, 0x4049, 0x7F7F, 0xFF7F, 0x7F80,
                 0xFF80, 0xC2F7, 0x0C00]
    q = torch.tensor([v - 0x10000 if v >= 0x8000 else v for v in bpatterns], dtype=torch.int16)
    w.case("bfloat16_bits_to_float", bits=q.to(torch.int32) & 0xFFFF, out=q.view(torch.bfloat16).to(torch.float32))
