"""Golden cases for reductions, arg-reductions, composites (var, std, norm, logsumexp,
any/all), scans and sorting. Reductions over a dim keep it (keepdim=True); reductions over
all elements are stored with shape [1], as Kiln returns them."""
import math

import torch

INF = math.inf
NAN = math.nan


def keep(fn, x, dim):
    return fn(x, dim=dim, keepdim=True)


def flat(t):
    return t.reshape(1)


def cases(w):
    # sum, mean, prod, max (amax), min (amin) over all elements and over every dim.
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    out = {"x": x}
    for name, fn in [("sum", torch.sum), ("mean", torch.mean), ("prod", None), ("max", torch.amax),
                     ("min", torch.amin)]:
        out[f"{name}_all"] = flat(torch.prod(x) if name == "prod" else fn(x))
        for d in range(3):
            out[f"{name}_{d}"] = torch.prod(x, dim=d, keepdim=True) if name == "prod" else keep(fn, x, d)
    w.case("basic", **out)

    # argmax/argmin with ties: the first index wins.
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 1.0, 2.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    w.case("arg_ties", x=x,
           argmax_0=x.argmax(0, keepdim=True), argmax_1=x.argmax(1, keepdim=True),
           argmin_0=x.argmin(0, keepdim=True), argmin_1=x.argmin(1, keepdim=True),
           max_1=x.amax(1, keepdim=True), min_0=x.amin(0, keepdim=True))

    # NaN propagates through max/min/sum and counts as the max and the min for argmax/argmin.
    x = torch.tensor([[1.0, NAN, 3.0, NAN], [NAN, 0.0, 5.0, 1.0], [2.0, -1.0, 7.0, 7.0]], dtype=torch.float64)
    w.case("nan", x=x,
           max_1=x.amax(1, keepdim=True), min_1=x.amin(1, keepdim=True), sum_1=x.sum(1, keepdim=True),
           max_0=x.amax(0, keepdim=True), max_all=flat(x.max()), sum_all=flat(x.sum()),
           argmax_1=x.argmax(1, keepdim=True), argmin_1=x.argmin(1, keepdim=True),
           argmax_0=x.argmax(0, keepdim=True))

    # var/std with correction 0 and 1 over both dims.
    x = torch.randn(3, 5, dtype=torch.float64)
    out = {"x": x}
    for c in (0, 1):
        for d in (0, 1):
            out[f"var_c{c}_{d}"] = torch.var(x, dim=d, correction=c, keepdim=True)
            out[f"std_c{c}_{d}"] = torch.std(x, dim=d, correction=c, keepdim=True)
    w.case("var_std", **out)

    # p-norms, with zeros in the input so that p = 0 counts something.
    x = torch.randn(3, 4, dtype=torch.float64)
    x[0, 1] = 0.0
    x[2, 0] = 0.0
    x[2, 3] = 0.0
    out = {"x": x}
    for label, p in [("1", 1.0), ("2", 2.0), ("3", 3.0), ("inf", INF), ("0", 0.0), ("ninf", -INF)]:
        out[f"norm_{label}_1"] = torch.linalg.vector_norm(x, ord=p, dim=1, keepdim=True)
        out[f"norm_{label}_0"] = torch.linalg.vector_norm(x, ord=p, dim=0, keepdim=True)
        out[f"norm_{label}_all"] = flat(torch.linalg.vector_norm(x, ord=p))
    w.case("norm", **out)

    # logsumexp: a row of -inf gives -inf, large values do not overflow, +inf gives +inf.
    x = torch.randn(5, 4, dtype=torch.float64)
    x[1, :] = -INF
    x[2, :] = torch.tensor([1000.0, 1001.0, 999.5, 1000.25])
    x[3, 0] = -INF
    x[4, 2] = INF
    w.case("logsumexp", x=x, lse_1=torch.logsumexp(x, 1, keepdim=True), lse_0=torch.logsumexp(x, 0, keepdim=True))

    # scans
    x = torch.randn(3, 4, dtype=torch.float64)
    w.case("cumulative", x=x, cumsum_0=x.cumsum(0), cumsum_1=x.cumsum(1), cumprod_0=x.cumprod(0),
           cumprod_1=x.cumprod(1))

    # any/all on Bool, Int and Float tensors (NaN is non-zero, hence true).
    b = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    i = torch.tensor([[0, 2, 0], [0, 0, 0], [1, -1, 3]], dtype=torch.int64)
    f = torch.tensor([[0.0, 0.5, NAN], [0.0, 0.0, 0.0], [1.0, -2.0, 3.0]], dtype=torch.float64)
    for label, t in [("bool", b), ("int", i), ("float", f)]:
        w.case(f"any_all_{label}", x=t, any_all=flat(t.any()), all_all=flat(t.all()),
               any_0=t.any(0, keepdim=True), any_1=t.any(1, keepdim=True),
               all_0=t.all(0, keepdim=True), all_1=t.all(1, keepdim=True))

    # stable sort with duplicates, NaN and infinities, both directions, both dims.
    x = torch.tensor([[3.0, 1.0, NAN, 1.0, 2.0, 3.0, -INF, 1.0, NAN, 0.0],
                      [0.0, -1.0, 0.0, NAN, 5.0, INF, 0.0, -1.0, 2.0, 2.0],
                      [4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]], dtype=torch.float64)
    out = {"x": x}
    for d in (0, 1):
        for desc in (False, True):
            v, idx = torch.sort(x, dim=d, descending=desc, stable=True)
            tag = f"{'desc' if desc else 'asc'}_{d}"
            out[f"{tag}_values"] = v
            out[f"{tag}_indices"] = idx
    w.case("sort", **out)

    # topk without ties (torch's order among ties is unspecified).
    x = torch.randn(3, 6, dtype=torch.float64)
    v1, i1 = torch.topk(x, 3, dim=1)
    v0, i0 = torch.topk(x, 2, dim=0)
    w.case("topk", x=x, top3_1_values=v1, top3_1_indices=i1, top2_0_values=v0, top2_0_indices=i0)

    # Int tensors (i64): sums and products stay i64.
    x = torch.randint(-5, 6, (3, 4), dtype=torch.int64)
    x[1, 2] = x[1, 0]  # a tie for argmax/argmin
    w.case("int", x=x, sum_all=flat(x.sum()), sum_1=x.sum(1, keepdim=True), sum_0=x.sum(0, keepdim=True),
           prod_0=x.prod(0, keepdim=True), prod_all=flat(x.prod()), max_1=x.amax(1, keepdim=True),
           min_all=flat(x.min()), argmax_1=x.argmax(1, keepdim=True), argmin_0=x.argmin(0, keepdim=True),
           cumsum_1=x.cumsum(1), cumprod_0=x.cumprod(0),
           sort_1_values=torch.sort(x, dim=1, stable=True)[0], sort_1_indices=torch.sort(x, dim=1, stable=True)[1])

    # Non-contiguous input: Kiln transposes x ([4, 3]) into a [3, 4] view; expected values are of x.T.
    x = torch.randn(4, 3, dtype=torch.float64)
    t = x.t()
    v, idx = torch.sort(t, dim=1, stable=True)
    w.case("transposed", x=x, sum_1=t.sum(1, keepdim=True), sum_0=t.sum(0, keepdim=True),
           max_0=t.amax(0, keepdim=True), mean_all=flat(t.mean()), argmax_1=t.argmax(1, keepdim=True),
           cumsum_1=t.cumsum(1), sort_1_values=v, sort_1_indices=idx, var_1=t.var(1, keepdim=True))
