"""Golden cases for elementwise ops: math, activations, arithmetic with broadcasting,
comparisons, Bool logic and selection, in f64, f32, f16, bf16 and the integer dtypes.

Float cases store the input once in f64 ("x" or "a"/"b"), torch's f64 result as "out"
and torch's f32 result (computed from the f32-rounded input) as "out32", so each dtype
is compared with torch computing in that dtype."""
import torch
import torch.nn.functional as F

NAN, INF = float("nan"), float("inf")

# Inputs every unary float op sees once: NaN, infinities, signed zeros, halves, large values.
SPECIAL = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -3.0, 30.0, -30.0, 100.0,
                        -100.0, 1e-7], dtype=torch.float64)

UNARY = {
    "exp": torch.exp,
    "log": torch.log,
    "log1p": torch.log1p,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "recip": torch.reciprocal,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "tanh": torch.tanh,
    "erf": torch.erf,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "hard_sigmoid": F.hardsigmoid,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "neg": torch.neg,
    "abs": torch.abs,
    "sign": torch.sign,
    "square": torch.square,
}

# Where each op is well conditioned, so that f32 and f64 results agree with torch closely.
def domain(name, shape):
    x = torch.randn(*shape, dtype=torch.float64)
    if name in ("log", "sqrt", "rsqrt"):
        return x.abs() * 3 + 0.05
    if name == "log1p":
        return x.abs() * 3 - 0.5
    if name == "recip":
        return torch.where(x >= 0, x + 0.2, x - 0.2)
    if name == "tan":
        return x.clamp(-1.2, 1.2)
    if name == "round":
        # Exact halves round to even; the rest to nearest.
        return torch.cat([torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], dtype=torch.float64), (x * 4).reshape(-1)])[
            : x.numel()].reshape(shape)
    return x * 3


def flush_subnormals(t):
    # The fixture reader parses with std::stod, which rejects subnormal doubles.
    if t.dtype == torch.float64:
        return torch.where(t.abs() < 1e-300, torch.zeros_like(t), t)
    return t


def both(w, name, fn, **inputs):
    """A case with the f64 inputs, torch's f64 result (out) and its f32 result (out32)."""
    out = flush_subnormals(fn(*inputs.values()))
    out32 = fn(*(t.float() for t in inputs.values()))
    w.case(name, **inputs, out=out, out32=out32)


def cases(w):
    # ---- unary float ops: a well-conditioned random input and the special values
    for name, fn in UNARY.items():
        both(w, f"unary_{name}", fn, x=domain(name, (3, 4)))
        both(w, f"special_{name}", fn, x=SPECIAL)
    both(w, "special_isnan", torch.isnan, x=SPECIAL)
    both(w, "special_isinf", torch.isinf, x=SPECIAL)

    # f16 computes through f32 (torch 1.13 has no f16 kernels for most CPU ops, so the
    # reference is the f32 result rounded to f16); bf16 is torch's own bf16 result.
    x = torch.randn(4, 5, dtype=torch.float64) * 2
    for name in ("exp", "tanh", "gelu", "sigmoid", "sqrt"):
        fn = UNARY[name]
        xin = x.abs() + 0.1 if name == "sqrt" else x
        w.case(f"half_{name}", x=xin, f16=fn(xin.half().float()).half(), bf16=fn(xin.bfloat16()))
    a, b = torch.randn(4, 5, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)
    w.case("half_add", a=a, b=b, f16=(a.half().float() + b.half().float()).half(), bf16=a.bfloat16() + b.bfloat16())
    w.case("half_mul_scalar", a=a, f16=(a.half().float() * 1.5).half(), bf16=a.bfloat16() * 1.5)
    w.case("half_lt", a=a, b=b, f16=a.half() < b.half(), bf16=a.bfloat16() < b.bfloat16())

    # ---- binary float ops, same shape
    a = torch.randn(3, 4, dtype=torch.float64) * 2
    b = torch.randn(3, 4, dtype=torch.float64) * 2
    b = torch.where(b.abs() < 0.2, b + 0.5, b)  # keep divisors away from 0
    binary = {
        "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "rem": torch.remainder,
        "maximum": torch.maximum, "minimum": torch.minimum,
        "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    }
    # Equal elements make eq/le/ge meaningful.
    b[0, :2] = a[0, :2]
    for name, fn in binary.items():
        both(w, f"binary_{name}", fn, a=a, b=b)
    pa = a.abs() + 0.1
    both(w, "binary_pow", torch.pow, a=pa, b=b)
    # Negative bases with integer exponents, and IEEE's special cases.
    both(w, "pow_special", torch.pow,
         a=torch.tensor([-2.0, -2.0, -3.0, 0.0, 0.0, 2.0, INF, NAN, 1.0, -1.0, -INF, 4.0, -8.0], dtype=torch.float64),
         b=torch.tensor([3.0, 2.0, -1.0, 0.0, -1.0, 0.5, 0.0, 0.0, NAN, INF, 3.0, -0.5, 1 / 3], dtype=torch.float64))
    # remainder keeps the divisor's sign
    both(w, "rem_signs", torch.remainder,
         a=torch.tensor([5.0, -5.0, 5.0, -5.0, 7.5, -7.5, 0.0, 6.0], dtype=torch.float64),
         b=torch.tensor([3.0, 3.0, -3.0, -3.0, 2.0, 2.0, 3.0, 3.0], dtype=torch.float64))
    # maximum/minimum propagate NaN from either side
    na = torch.tensor([NAN, 1.0, NAN, -INF, 2.0, 0.0], dtype=torch.float64)
    nb = torch.tensor([1.0, NAN, NAN, 3.0, INF, -0.0], dtype=torch.float64)
    both(w, "maximum_nan", torch.maximum, a=na, b=nb)
    both(w, "minimum_nan", torch.minimum, a=na, b=nb)
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        both(w, f"compare_nan_{name}", binary[name], a=na, b=nb)

    # ---- broadcasting with size-1 dims on both sides: [2, 1, 4] op [3, 1] -> [2, 3, 4]
    ba = torch.randn(2, 1, 4, dtype=torch.float64)
    bb = torch.randn(3, 1, dtype=torch.float64) + 3
    for name in ("add", "sub", "mul", "div", "maximum", "lt"):
        both(w, f"broadcast_{name}", binary[name], a=ba, b=bb)
    a = torch.randn(2, 3, 4, dtype=torch.float64)
    b = torch.randn(3, 1, dtype=torch.float64)
    w.case("add_broadcast", a=a, b=b, out=a + b)

    # ---- tensor op scalar, scalar op tensor
    x = torch.randn(3, 4, dtype=torch.float64) * 3
    scalar_ops = {
        "add": lambda t: t + 2.5, "sub": lambda t: t - 2.5, "mul": lambda t: t * 2.5, "div": lambda t: t / 2.5,
        "rem": lambda t: torch.remainder(t, 2.5), "rem_neg": lambda t: torch.remainder(t, -2.5),
        "pow2": lambda t: torch.pow(t, 2.0), "pow3": lambda t: torch.pow(t, 3.0),
        "maximum": lambda t: torch.clamp_min(t, 0.5), "minimum": lambda t: torch.clamp_max(t, 0.5),
        "clamp": lambda t: torch.clamp(t, -1.0, 1.5),
        "eq": lambda t: t == x[0, 0].item(), "ne": lambda t: t != x[0, 0].item(), "lt": lambda t: t < 0.5,
        "le": lambda t: t <= x[0, 0].item(), "gt": lambda t: t > 0.5, "ge": lambda t: t >= x[0, 0].item(),
        "rsub": lambda t: 2 - t, "rdiv": lambda t: 2 / t, "radd": lambda t: 2 + t, "rmul": lambda t: 2 * t,
    }
    for name, fn in scalar_ops.items():
        both(w, f"scalar_{name}", fn, x=x)
    px = x.abs() + 0.1
    for e in ("0.5", "-0.5", "-1", "1.7", "-2"):
        both(w, f"scalar_pow_{e}", lambda t, e=float(e): torch.pow(t, e), x=px)
    # The special-cased exponents agree with torch on negative and special bases too.
    for e in ("2", "3", "0.5", "-0.5", "-1", "-2", "1.7"):
        both(w, f"special_pow_{e}", lambda t, e=float(e): torch.pow(t, e), x=SPECIAL)

    # ---- non-contiguous inputs: a transposed view and a strided slice
    base = torch.randn(4, 3, dtype=torch.float64)
    grid = torch.randn(6, 8, dtype=torch.float64)
    sliced = grid[0:6:2, 1:8:2]  # [3, 4]
    w.case("strided_inputs", base=base, grid=grid, exp_t=torch.exp(base.t()), gelu_s=F.gelu(sliced),
           add=base.t() + sliced, mul_scalar=base.t() * 3.0, lt=base.t() < sliced,
           sign_s=torch.sign(sliced))

    # ---- integers: floor division, remainder with negative operands, powers, comparisons
    ia = torch.tensor([7, -7, 7, -7, 0, 5, -9, 12, 3, -1, 100, -100], dtype=torch.int64)
    ib = torch.tensor([2, 2, -2, -2, 3, 5, 4, -5, 1, 3, 7, 7], dtype=torch.int64)
    w.case("int_ops", a=ia, b=ib, add=ia + ib, sub=ia - ib, mul=ia * ib,
           div=torch.div(ia, ib, rounding_mode="floor"), rem=torch.remainder(ia, ib),
           pow=torch.pow(ia, ib.abs()), abs=ia.abs(), neg=-ia, sign=torch.sign(ia),
           maximum=torch.maximum(ia, ib), minimum=torch.minimum(ia, ib),
           eq=ia == ib, ne=ia != ib, lt=ia < ib, le=ia <= ib, gt=ia > ib, ge=ia >= ib,
           add_s=ia + 3, mul_s=ia * -2, div_s=torch.div(ia, 3, rounding_mode="floor"),
           rem_s=torch.remainder(ia, -3), pow_s=torch.pow(ia, 2), lt_s=ia < 3, clamp=torch.clamp(ia, -5, 5),
           rsub=10 - ia, rdiv=torch.div(10, ib, rounding_mode="floor"))

    # ---- Bool logic and selection
    p = torch.tensor([[True, False, True, False], [True, True, False, False], [False, True, True, False]])
    q = torch.tensor([[True, True, False, False], [False, True, False, True], [True, False, True, True]])
    w.case("logic", p=p, q=q, and_=p & q, or_=p | q, xor=p ^ q, not_p=~p, eq=p == q, ne=p != q)
    cond = torch.tensor([[True], [False], [True]])
    wa = torch.randn(3, 4, dtype=torch.float64)
    wb = torch.tensor([[NAN, 1.0, -2.0, INF]], dtype=torch.float64)
    w.case("where", cond=cond, a=wa, b=wb, out=torch.where(cond, wa, wb))
    mask = wa > 0
    w.case("mask", x=wa, value=wb.expand(3, 4).contiguous(), mask=mask,
           mask_where=torch.where(mask, wb.expand(3, 4), wa), mask_fill=wa.masked_fill(mask, -7.5))
    wi = torch.tensor([[1, -2, 3, -4], [5, -6, 7, -8], [9, -10, 11, -12]], dtype=torch.int64)
    w.case("mask_int", x=wi, mask=wi > 2, mask_fill=wi.masked_fill(wi > 2, 0))

    # ---- softmax / log_softmax along every dim, including values that overflow a naive exp
    s = torch.randn(3, 4, 5, dtype=torch.float64) * 3
    large = s * 200 + 1e4
    for dim in (0, 1, -1):
        name = f"dim{dim}".replace("-", "m")
        both(w, f"softmax_{name}", lambda t, d=dim: torch.softmax(t, d), x=s)
        both(w, f"log_softmax_{name}", lambda t, d=dim: torch.log_softmax(t, d), x=s)
        both(w, f"softmax_large_{name}", lambda t, d=dim: torch.softmax(t, d), x=large)
        both(w, f"log_softmax_large_{name}", lambda t, d=dim: torch.log_softmax(t, d), x=large)

    # The exp case kept from the first fixture set.
    x = torch.randn(3, 4, dtype=torch.float64) * 2
    w.case("exp", x=x, out=torch.exp(x))

    # ---- expm1 and atan2, appended last so that the cases above keep their random inputs
    both(w, "unary_expm1", torch.expm1, x=torch.randn(3, 4, dtype=torch.float64) * 3)
    both(w, "special_expm1", torch.expm1, x=SPECIAL)
    ta = torch.randn(3, 4, dtype=torch.float64) * 2
    tb = torch.randn(3, 4, dtype=torch.float64) * 2
    both(w, "binary_atan2", torch.atan2, a=ta, b=tb)
    # Every quadrant and axis, signed zeros and infinities.
    za = torch.tensor([0.0, 0.0, -0.0, -0.0, 1.0, -1.0, 0.0, -0.0, INF, INF, -INF, 2.0, -2.0, INF, NAN, 1.0, -3.0],
                      dtype=torch.float64)
    zb = torch.tensor([1.0, -1.0, 1.0, -1.0, 0.0, -0.0, 0.0, -0.0, INF, -INF, 5.0, INF, -INF, 1.0, 1.0, NAN, -4.0],
                      dtype=torch.float64)
    both(w, "atan2_special", torch.atan2, a=za, b=zb)

    # ---- inverse trigonometric and hyperbolic functions, log2 / log10 / exp2, trunc / frac,
    # hypot / copysign / logaddexp (appended, as above). Each unary op: a well-conditioned
    # random input and the special values; the binary ops: random pairs and special pairs.
    r = torch.randn(3, 4, dtype=torch.float64)
    more = {
        "asin": (torch.asin, torch.tanh(r) * 0.98),
        "acos": (torch.acos, torch.tanh(r) * 0.98),
        "atan": (torch.atan, r * 4),
        "sinh": (torch.sinh, r * 4),
        "cosh": (torch.cosh, r * 4),
        "asinh": (torch.asinh, r * 20),
        "acosh": (torch.acosh, r.abs() * 20 + 1.01),
        "atanh": (torch.atanh, torch.tanh(r) * 0.98),
        "log2": (torch.log2, r.abs() * 10 + 0.05),
        "log10": (torch.log10, r.abs() * 100 + 0.05),
        "exp2": (torch.exp2, r * 10),
        "trunc": (torch.trunc, r * 4),
        "frac": (torch.frac, r * 4),
    }
    for name, (fn, x) in more.items():
        both(w, f"unary_{name}", fn, x=x)
        both(w, f"special_{name}", fn, x=SPECIAL)
    ha = torch.randn(3, 4, dtype=torch.float64) * 3
    hb = torch.randn(3, 4, dtype=torch.float64) * 3
    hb[0, 0] = -0.0
    for name, fn in (("hypot", torch.hypot), ("copysign", torch.copysign), ("logaddexp", torch.logaddexp)):
        both(w, f"binary_{name}", fn, a=ha, b=hb)
    sa = torch.tensor([0.0, -0.0, 3.0, -3.0, INF, -INF, INF, -INF, NAN, 1.0, 1e30, 2.0, 5.0], dtype=torch.float64)
    sb = torch.tensor([0.0, 0.0, -0.0, 0.0, 1.0, 1.0, INF, -INF, 1.0, NAN, 1e30, -INF, 5.0], dtype=torch.float64)
    for name, fn in (("hypot", torch.hypot), ("copysign", torch.copysign), ("logaddexp", torch.logaddexp)):
        both(w, f"{name}_special", fn, a=sa, b=sb)
