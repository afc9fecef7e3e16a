"""Golden values of the small numeric ops of kiln/tensor/numeric.hpp (tests/backend/
numeric_test.cpp): lerp, fmod, isfinite, nan_to_num, count_nonzero, diff, dot,
logcumsumexp, kthvalue, linspace and F.normalize. Their gradients are in gen_grad.py."""
import torch

f64, i64 = torch.float64, torch.int64


def cases(w):
    g = torch.Generator().manual_seed(17)
    randn = lambda *s: torch.randn(*s, generator=g, dtype=f64)
    a, b, t = randn(3, 4), randn(3, 4), torch.rand(3, 4, generator=g, dtype=f64)
    w.case("lerp", a=a, b=b, t=t, scalar=torch.lerp(a, b, 0.3), tensor=torch.lerp(a, b, t))
    x = randn(3, 5) * 4
    x[0, 0] = -6.0  # an exact multiple: fmod 0 with the dividend's sign
    d = torch.tensor([1.5, -2.0, 0.75, -1.25, 3.0], dtype=f64).expand(3, 5).contiguous()
    w.case("fmod", x=x, d=d, scalar=torch.fmod(x, -1.5), tensor=torch.fmod(x, d))
    y = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -2.5, 0.0], dtype=f64)
    w.case("nan_to_num", x=y, isfinite=torch.isfinite(y), default=torch.nan_to_num(y),
           given=torch.nan_to_num(y, nan=1.5, posinf=100.0, neginf=-7.0),
           f32=torch.nan_to_num(y.float()).double())
    z = (torch.randint(-2, 3, (4, 6), generator=g)).to(f64)
    w.case("count_nonzero", x=z, all=torch.count_nonzero(z).reshape(1),
           dim1=torch.count_nonzero(z, dim=1).reshape(4, 1), dim0=torch.count_nonzero(z, dim=0).reshape(1, 6))
    v = randn(3, 6)
    w.case("diff", x=v, once=torch.diff(v), twice=torch.diff(v, n=2), rows=torch.diff(v, dim=0),
           ints=torch.diff(z.to(i64), dim=1))
    p, q = randn(7), randn(7)
    w.case("dot", a=p, b=q, out=torch.dot(p, q).reshape(1))
    big = randn(3, 6) * 30
    big[1] = -float("inf")
    big[2, 3] = -float("inf")
    w.case("logcumsumexp", x=big, dim1=torch.logcumsumexp(big, 1), dim0=torch.logcumsumexp(big, 0))
    k = randn(4, 7)
    k[0, 2] = k[0, 5]  # a tie
    values, indices = torch.kthvalue(k, 3, dim=1, keepdim=True)
    values0, indices0 = torch.kthvalue(k, 2, dim=0, keepdim=True)
    w.case("kthvalue", x=k, values=values, indices=indices, values0=values0, indices0=indices0)
    w.case("linspace", odd=torch.linspace(-1.0, 2.5, 7, dtype=f64), even=torch.linspace(0.1, 1.0, 10, dtype=f64),
           one=torch.linspace(3.0, 5.0, 1, dtype=f64), f32=torch.linspace(0.0, 1.0, 11).double())
    n = randn(2, 3, 4)
    n[1, :, 2] = 0.0  # a zero vector: divided by eps
    w.case("normalize", x=n, default=torch.nn.functional.normalize(n),
           l1_last=torch.nn.functional.normalize(n, p=1.0, dim=-1, eps=1e-3))
