"""Golden gradients from torch.autograd for Autodiff<B> (tests/autodiff/gradcheck_test.cpp).

Each case runs one op (or composite) on f64 inputs x0, x1... (integer inputs i0..., bool
masks m0...), draws an upstream gradient dy like the result, and records y = op(x) and
g<k> = d sum(y * dy) / d x<k>. The C++ twin of each case, with the same name, is in
tests/autodiff/grad_cases.hpp: keep the two in step.

Inputs stay away from kinks and discontinuities (by `away`) so that central finite
differences apply; the cases that sit on a kink on purpose are golden_only in C++.
"""
import torch
import torch.nn.functional as F

f64 = torch.float64


def rand(*shape, low=-2.0, high=2.0):
    return torch.rand(*shape, dtype=f64) * (high - low) + low


def positive(*shape):
    return rand(*shape, low=0.2, high=2.0)


def away(x, points=(0.0,), margin=0.05):
    """x with every value within `margin` of one of `points` pushed out to that distance."""
    x = x.clone()
    for p in points:
        near = (x - p).abs() < margin
        x[near] = p + torch.where(x[near] >= p, margin, -margin).to(f64)
    return x


def nonzero(*shape, margin=0.1):
    return away(rand(*shape), margin=margin)


def rem_pair(a_shape, b):
    """A dividend of a_shape whose quotients by b (broadcast) lie between integers, away from the jumps."""
    k = torch.randint(-3, 3, a_shape).to(f64)
    frac = rand(*a_shape, low=0.1, high=0.9)
    return (k + frac) * b


def case(w, name, fn, xs, ints=(), masks=(), dy=None):
    xs = [x.detach().clone().to(f64).requires_grad_() for x in xs]
    y = fn(*xs)
    if dy is None:
        dy = torch.randn_like(y)
    grads = torch.autograd.grad(y, xs, dy, allow_unused=True)
    tensors = {}
    for k, x in enumerate(xs):
        tensors[f"x{k}"] = x
    for k, i in enumerate(ints):
        tensors[f"i{k}"] = i
    for k, m in enumerate(masks):
        tensors[f"m{k}"] = m
    tensors["y"] = y
    tensors["dy"] = dy
    for k, (x, g) in enumerate(zip(xs, grads)):
        tensors[f"g{k}"] = torch.zeros_like(x) if g is None else g
    w.case(name, **tensors)


def unary_cases(w):
    case(w, "exp", torch.exp, [rand(3, 4)])
    case(w, "log", torch.log, [positive(3, 4)])
    case(w, "log1p", torch.log1p, [rand(3, 4, low=-0.6, high=2.0)])
    case(w, "sqrt", torch.sqrt, [positive(3, 4)])
    case(w, "rsqrt", torch.rsqrt, [positive(3, 4)])
    case(w, "recip", torch.reciprocal, [away(rand(3, 4), margin=0.3)])
    case(w, "sin", torch.sin, [rand(3, 4, low=-4.0, high=4.0)])
    case(w, "cos", torch.cos, [rand(3, 4, low=-4.0, high=4.0)])
    case(w, "tan", torch.tan, [rand(3, 4, low=-1.2, high=1.2)])
    case(w, "tanh", torch.tanh, [rand(3, 4)])
    case(w, "erf", torch.erf, [rand(3, 4)])
    # Piecewise constant: zero gradient (torch too); values stay off the integers and halves.
    steps = tuple(float(v) / 2 for v in range(-8, 9))
    case(w, "floor", torch.floor, [away(rand(3, 4, low=-3.0, high=3.0), steps)])
    case(w, "ceil", torch.ceil, [away(rand(3, 4, low=-3.0, high=3.0), steps)])
    case(w, "round", torch.round, [away(rand(3, 4, low=-3.0, high=3.0), steps)])
    case(w, "sign", torch.sign, [nonzero(3, 4)])
    case(w, "neg", torch.neg, [rand(3, 4)])
    case(w, "abs", torch.abs, [nonzero(3, 4)])
    # ---- activations
    case(w, "sigmoid", torch.sigmoid, [rand(3, 4, low=-4.0, high=4.0)])
    case(w, "silu", F.silu, [rand(3, 4, low=-4.0, high=4.0)])
    case(w, "softplus", F.softplus, [rand(3, 4, low=-4.0, high=4.0)])
    # beta and threshold other than the defaults: the composite (linear above threshold / beta).
    case(w, "softplus_beta_threshold", lambda x: F.softplus(x, beta=2.0, threshold=1.0),
         [away(rand(3, 4), (0.5,))])
    # Both the linear part and the saturated parts outside [-3, 3]. Written as its definition:
    # torch 1.13's CPU hardsigmoid backward multiplies by the f32 constant 1.0f / 6.0f even in f64
    # (a relative error of 3e-8); the forward values are the same.
    case(w, "hard_sigmoid", lambda x: torch.clamp(x / 6.0 + 0.5, 0.0, 1.0),
         [away(rand(3, 4, low=-5.0, high=5.0), (-3.0, 3.0))])
    case(w, "gelu", F.gelu, [rand(3, 4, low=-3.0, high=3.0)])
    case(w, "gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), [rand(3, 4, low=-3.0, high=3.0)])
    case(w, "relu", F.relu, [nonzero(3, 4)])
    case(w, "leaky_relu", F.leaky_relu, [nonzero(3, 4)])
    case(w, "leaky_relu_slope", lambda x: F.leaky_relu(x, 0.2), [nonzero(3, 4)])
    case(w, "square", torch.square, [rand(3, 4)])
    case(w, "softmax", lambda x: torch.softmax(x, 1), [rand(3, 4)])
    case(w, "softmax_dim0", lambda x: torch.softmax(x, 0), [rand(2, 3, 4)])
    case(w, "log_softmax", lambda x: torch.log_softmax(x, 1), [rand(3, 4)])
    case(w, "log_softmax_dim0", lambda x: torch.log_softmax(x, 0), [rand(3, 4)])


def binary_cases(w):
    case(w, "add_broadcast", torch.add, [rand(3, 4), rand(1, 4)])
    case(w, "add_broadcast_3d", torch.add, [rand(2, 3, 4), rand(1, 3, 1)])
    case(w, "sub_broadcast", torch.sub, [rand(3, 1), rand(3, 4)])
    case(w, "mul_broadcast", torch.mul, [rand(3, 1), rand(1, 4)])
    case(w, "div_broadcast", torch.div, [rand(3, 4), away(rand(1, 4), margin=0.5)])
    b = away(rand(3, 1), margin=0.5)
    case(w, "rem_broadcast", torch.remainder, [rem_pair((3, 4), b), b])
    case(w, "pow_broadcast", torch.pow, [positive(3, 4), rand(1, 4)])
    case(w, "maximum_broadcast", torch.maximum, [rand(3, 4), rand(1, 4)])
    case(w, "minimum_broadcast", torch.minimum, [rand(3, 1), rand(3, 4)])
    # Ties send half the gradient to each side.
    a = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.5, -1.0]], dtype=f64)
    b = torch.tensor([[1.0, -1.0, 3.0], [0.5, 2.0, -1.0]], dtype=f64)
    case(w, "maximum_ties", torch.maximum, [a, b])
    case(w, "minimum_ties", torch.minimum, [a, b])
    # ---- with a scalar
    case(w, "add_scalar", lambda x: x + 1.5, [rand(3, 4)])
    case(w, "sub_scalar", lambda x: x - 0.7, [rand(3, 4)])
    case(w, "mul_scalar", lambda x: x * -2.5, [rand(3, 4)])
    case(w, "div_scalar", lambda x: x / 3.0, [rand(3, 4)])
    case(w, "rem_scalar", lambda x: torch.remainder(x, 0.75), [rem_pair((3, 4), torch.tensor(0.75, dtype=f64))])
    case(w, "pow_scalar", lambda x: x.pow(2.5), [positive(3, 4)])
    case(w, "pow_scalar_negative_base", lambda x: x.pow(3.0), [rand(3, 4)])
    scalar = lambda v: torch.tensor(v, dtype=f64)
    case(w, "maximum_scalar", lambda x: torch.maximum(x, scalar(0.3)), [away(rand(3, 4), (0.3,))])
    case(w, "minimum_scalar", lambda x: torch.minimum(x, scalar(-0.2)), [away(rand(3, 4), (-0.2,))])
    case(w, "rsub_scalar", lambda x: 2.0 - x, [rand(3, 4)])
    case(w, "rdiv_scalar", lambda x: 2.0 / x, [away(rand(3, 4), margin=0.3)])
    case(w, "clamp", lambda x: torch.clamp(x, -0.5, 0.8), [away(rand(3, 4), (-0.5, 0.8))])
    case(w, "clamp_min", lambda x: torch.clamp(x, min=0.2), [away(rand(3, 4), (0.2,))])
    case(w, "clamp_max", lambda x: torch.clamp(x, max=-0.1), [away(rand(3, 4), (-0.1,))])


def selection_cases(w):
    mask = torch.tensor([[True, False, False, True], [False, True, True, True], [False, False, True, False]])
    case(w, "where", lambda a, b: torch.where(mask, a, b), [rand(3, 4), rand(1, 4)], masks=[mask])
    case(w, "mask_where", lambda x, v: torch.where(mask, v, x), [rand(3, 4), rand(1, 4)], masks=[mask])
    case(w, "mask_fill", lambda x: x.masked_fill(mask, 0.5), [rand(3, 4)], masks=[mask])


def whole(reduce):
    """An all-element reduction as Kiln returns it: shape [1]."""
    return lambda x: reduce(x).reshape(1)


def reduction_cases(w):
    case(w, "sum", whole(torch.sum), [rand(3, 4)])
    case(w, "mean", whole(torch.mean), [rand(3, 4)])
    case(w, "prod", whole(torch.prod), [rand(3, 4, low=0.5, high=1.5) * torch.tensor([1.0, -1.0, 1.0, 1.0], dtype=f64)])
    with_zero = rand(3, 4, low=0.5, high=1.5)
    with_zero[1, 2] = 0.0
    case(w, "prod_zero", whole(torch.prod), [with_zero])
    case(w, "sum_dim", lambda x: x.sum(1, keepdim=True), [rand(2, 3, 4)])
    case(w, "mean_dim", lambda x: x.mean(0, keepdim=True), [rand(3, 4)])
    case(w, "prod_dim", lambda x: x.prod(1, keepdim=True), [rand(3, 4, low=0.5, high=1.5)])
    # One zero in row 0 (its others get the product of the rest), two in row 1 (all zero).
    zeros = rand(3, 4, low=-1.5, high=1.5)
    zeros[0, 2] = 0.0
    zeros[1, 0] = zeros[1, 3] = 0.0
    case(w, "prod_dim_zeros", lambda x: x.prod(1, keepdim=True), [zeros])
    case(w, "max", whole(torch.max), [rand(3, 4)])
    case(w, "min", whole(torch.min), [rand(3, 4)])
    # Ties share the gradient evenly.
    ties = torch.tensor([[1.0, 3.0, -2.0, 0.0], [3.0, 2.0, -2.0, 3.0]], dtype=f64)
    case(w, "max_ties", whole(torch.max), [ties])
    case(w, "min_ties", whole(torch.min), [ties])
    case(w, "max_dim", lambda x: x.max(0, keepdim=True).values, [rand(3, 4)])
    case(w, "max_dim_3d", lambda x: x.max(2, keepdim=True).values, [rand(2, 3, 4)])
    case(w, "min_dim", lambda x: x.min(1, keepdim=True).values, [rand(3, 4)])
    # Ties: the gradient goes to the first index, as torch.max(x, dim) picks it.
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, 2.0]], dtype=f64)
    case(w, "max_dim_ties", lambda x: x.max(1, keepdim=True).values, [ties])
    case(w, "min_dim_ties", lambda x: x.min(1, keepdim=True).values, [-ties])
    case(w, "var", lambda x: torch.var(x, 1, correction=1, keepdim=True), [rand(3, 4)])
    case(w, "var_correction0", lambda x: torch.var(x, 0, correction=0, keepdim=True), [rand(3, 4)])
    case(w, "std", lambda x: torch.std(x, 1, correction=1, keepdim=True), [rand(3, 4)])
    case(w, "std_correction0", lambda x: torch.std(x, 0, correction=0, keepdim=True), [rand(3, 4)])
    for label, p in [("1", 1.0), ("2", 2.0), ("3", 3.0), ("inf", float("inf"))]:
        case(w, f"norm_dim_p{label}", lambda x: torch.linalg.vector_norm(x, p, 1, keepdim=True), [nonzero(3, 4)])
    case(w, "norm_dim_pneginf", lambda x: torch.linalg.vector_norm(x, float("-inf"), 0, keepdim=True),
         [nonzero(3, 4)])
    case(w, "norm", lambda x: torch.linalg.vector_norm(x).reshape(1), [nonzero(3, 4)])
    case(w, "norm_p3", lambda x: torch.linalg.vector_norm(x, 3.0).reshape(1), [nonzero(3, 4)])
    case(w, "logsumexp", lambda x: torch.logsumexp(x, 1, keepdim=True), [rand(3, 4)])
    case(w, "cumsum", lambda x: torch.cumsum(x, 1), [rand(3, 4)])
    case(w, "cumsum_dim0", lambda x: torch.cumsum(x, 0), [rand(2, 3, 4)])
    case(w, "cumprod", lambda x: torch.cumprod(x, 1), [away(rand(3, 4, low=-1.5, high=1.5), margin=0.5)])
    # ---- sorting (no ties)
    case(w, "sort", lambda x: torch.sort(x, 1).values, [rand(3, 4)])
    case(w, "sort_descending", lambda x: torch.sort(x, 0, descending=True).values, [rand(3, 4)])
    case(w, "topk", lambda x: torch.topk(x, 2, 1).values, [rand(3, 5)])


def matmul_cases(w):
    case(w, "matmul", torch.matmul, [rand(3, 4), rand(4, 5)])
    case(w, "matmul_batch_broadcast", torch.matmul, [rand(2, 3, 4), rand(1, 4, 5)])


def layout_cases(w):
    case(w, "reshape", lambda x: x.reshape(2, -1, 3), [rand(3, 4)])
    case(w, "flatten", lambda x: torch.flatten(x, 1, 2), [rand(2, 3, 4)])
    case(w, "unsqueeze", lambda x: x.reshape(1, 1, 3, 4), [rand(3, 4)])
    case(w, "unsqueeze_dim", lambda x: x.unsqueeze(1), [rand(3, 4)])
    case(w, "squeeze_dim", lambda x: x.squeeze(1), [rand(3, 1, 4)])
    case(w, "permute", lambda x: x.permute(2, 0, 1), [rand(2, 3, 4)])
    case(w, "swap_dims", lambda x: x.transpose(0, 2), [rand(2, 3, 4)])
    case(w, "transpose", lambda x: x.transpose(-2, -1), [rand(2, 3, 4)])
    case(w, "expand", lambda x: x.expand(2, 3, 4), [rand(3, 1)])
    case(w, "expand_as", lambda x: x.expand(3, 4), [rand(1, 4)])
    case(w, "repeat", lambda x: x.repeat(2, 3), [rand(2, 3)])
    case(w, "slice", lambda x: x[1::2, -4:-1], [rand(5, 6)])
    case(w, "slice_index", lambda x: x[-1:, 2:3], [rand(3, 4)])
    case(w, "slice_3d", lambda x: x[:, 0:3:2, 1::3], [rand(2, 4, 5)])
    def slice_assign(x, v):
        y = x.clone()
        y[0:4:2, -4:-2] = v
        return y
    case(w, "slice_assign", slice_assign, [rand(4, 5), rand(2, 2)])
    case(w, "narrow", lambda x: x.narrow(1, 1, 3), [rand(4, 5)])
    case(w, "cat", lambda a, b, c: torch.cat([a, b, c], 1), [rand(2, 3), rand(2, 1), rand(2, 2)])
    case(w, "stack", lambda a, b, c: torch.stack([a, b, c], 1), [rand(2, 3), rand(2, 3), rand(2, 3)])
    # Pieces put back in another order (and scaled) so that each one reaches the result.
    case(w, "split", lambda x: (lambda p: torch.cat([p[2], p[1], p[0] * 2.0], 0))(torch.split(x, 2, 0)),
         [rand(5, 3)])
    case(w, "split_sizes", lambda x: (lambda p: torch.cat([p[2], p[0] * p[0], p[1]], 1))(torch.split(x, [1, 3, 2], 1)),
         [rand(2, 6)])
    case(w, "chunk", lambda x: (lambda p: p[0] * p[1] + p[2])(torch.chunk(x, 3, 1)), [rand(2, 7)])
    case(w, "flip", lambda x: torch.flip(x, [0, 2]), [rand(2, 3, 4)])
    case(w, "roll", lambda x: torch.roll(torch.roll(x, 2, 1), -1, 0), [rand(3, 4)])
    case(w, "pad_constant", lambda x: F.pad(x, (1, 2, 2, 0), value=0.5), [rand(2, 3)])
    case(w, "pad_reflect", lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), [rand(1, 2, 3, 4)])
    case(w, "pad_reflect_1d", lambda x: F.pad(x, (2, 1), mode="reflect"), [rand(1, 2, 4)])
    case(w, "pad_replicate", lambda x: F.pad(x, (1, 2, 3, 1), mode="replicate"), [rand(1, 2, 3, 3)])
    case(w, "tril", lambda x: torch.tril(x), [rand(4, 4)])
    case(w, "triu", lambda x: torch.triu(x, 1), [rand(3, 4)])
    case(w, "tril_batched", lambda x: torch.tril(x, -1), [rand(2, 3, 3)])
    # ---- indexing
    index = torch.tensor([[0, 2, 2], [1, 0, 3]])
    case(w, "gather", lambda x: x.gather(1, index), [rand(2, 4)], ints=[index])
    index = torch.tensor([[3, 0], [1, 2], [2, 1]])
    case(w, "scatter", lambda x, s: x.scatter(1, index, s), [rand(3, 4), rand(3, 2)], ints=[index])
    # src larger than index: only its index-shaped corner is scattered (torch 1.13's autograd
    # rejects this shape pair, so the twin slices the corner itself; the gradient is the same).
    case(w, "scatter_src_larger", lambda x, s: x.scatter(1, index, s[:, :2]), [rand(3, 4), rand(3, 3)], ints=[index])
    index = torch.tensor([[0, 2, 2, 1], [0, 1, 2, 1]])
    case(w, "scatter_add", lambda x, s: x.scatter_add(0, index, s), [rand(3, 4), rand(2, 4)], ints=[index])
    corner = index[:, :3].contiguous()
    case(w, "scatter_add_src_larger", lambda x, s: x.scatter_add(0, corner, s[:2, :3]), [rand(3, 4), rand(3, 5)],
         ints=[corner])
    index = torch.tensor([2, 0, 2, 3])
    case(w, "index_select", lambda x: x.index_select(0, index), [rand(4, 3)], ints=[index])
    case(w, "index_select_dim1", lambda x: x.index_select(1, index), [rand(2, 5)], ints=[index])
    index = torch.tensor([1, 3, 1])
    case(w, "index_add", lambda x, v: x.index_add(0, index, v), [rand(4, 3), rand(3, 3)], ints=[index])
    case(w, "index_add_dim1", lambda x, v: x.index_add(1, index, v), [rand(3, 4), rand(3, 3)], ints=[index])


def cast_cases(w):
    case(w, "cast_f64", lambda x: x.to(f64), [rand(3, 4)])
    case(w, "to_float_f64", lambda x: x.to(f64), [rand(3, 4)])
    case(w, "to_device", lambda x: x * 1.0, [rand(3, 4)])
    # Through f32 and back: values and dy on a grid of 1/8 that f32 holds exactly.
    grid = lambda *shape: torch.randint(-16, 16, shape).to(f64) / 8
    case(w, "cast_f32_round_trip", lambda x: x.to(torch.float32).to(f64) * 3.0, [grid(3, 4)], dy=grid(3, 4))


def nn_cases(w):
    randn = lambda *shape: torch.randn(*shape, dtype=f64)
    # ---- convolution
    case(w, "conv1d", lambda x, k, b: F.conv1d(x, k, b, stride=2, padding=1, dilation=2, groups=2),
         [randn(2, 4, 7), randn(6, 2, 3), randn(6)])
    case(w, "conv1d_plain", lambda x, k: F.conv1d(x, k), [randn(1, 3, 6), randn(2, 3, 2)])
    case(w, "conv2d", lambda x, k, b: F.conv2d(x, k, b, padding=1), [randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(4)])
    case(w, "conv2d_strided_grouped",
         lambda x, k: F.conv2d(x, k, None, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2),
         [randn(1, 4, 6, 5), randn(6, 2, 3, 2)])
    case(w, "conv_transpose1d", lambda x, k, b: F.conv_transpose1d(x, k, b, stride=2, padding=1, output_padding=1),
         [randn(2, 3, 5), randn(3, 4, 3), randn(4)])
    case(w, "conv_transpose2d", lambda x, k, b: F.conv_transpose2d(x, k, b, stride=2, padding=1, output_padding=1),
         [randn(2, 3, 3, 3), randn(3, 2, 3, 3), randn(2)])
    # output_padding 1 with stride 1 along the height (allowed by the dilation of 2): the other path.
    case(w, "conv_transpose2d_grouped_dilated",
         lambda x, k: F.conv_transpose2d(x, k, None, stride=(1, 2), padding=(0, 1), output_padding=(1, 1),
                                         dilation=(2, 1), groups=2),
         [randn(1, 4, 3, 3), randn(4, 1, 2, 3)])
    # ---- pooling (random inputs: no ties in a window)
    case(w, "max_pool1d", lambda x: F.max_pool1d(x, 3, 2, 1, 1, True), [randn(2, 3, 9)])
    case(w, "max_pool1d_dilation", lambda x: F.max_pool1d(x, 2, 1, 1, 3, False), [randn(1, 2, 8)])
    case(w, "max_pool2d", lambda x: F.max_pool2d(x, 2, 2), [randn(2, 2, 4, 6)])
    case(w, "max_pool2d_unbatched", lambda x: F.max_pool2d(x, 2, 1), [randn(2, 4, 5)])
    case(w, "max_pool2d_overlap", lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 1), (1, 2), True),
         [randn(1, 2, 6, 7)])
    case(w, "avg_pool1d", lambda x: F.avg_pool1d(x, 3, 2, 1, False, True), [randn(2, 3, 8)])
    case(w, "avg_pool1d_exclude_pad_ceil", lambda x: F.avg_pool1d(x, 3, 2, 1, True, False), [randn(2, 3, 8)])
    case(w, "avg_pool1d_unbatched", lambda x: F.avg_pool1d(x, 2, 2), [randn(3, 8)])
    case(w, "avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1, False, True), [randn(1, 2, 5, 6)])
    case(w, "avg_pool2d_exclude_pad", lambda x: F.avg_pool2d(x, 3, 2, 1, False, False), [randn(1, 2, 5, 6)])
    case(w, "avg_pool2d_ceil", lambda x: F.avg_pool2d(x, (3, 2), (2, 2), (1, 0), True, True), [randn(1, 2, 6, 5)])
    case(w, "adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 3), [randn(2, 3, 7)])
    case(w, "adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [randn(1, 2, 7, 5)])
    case(w, "adaptive_avg_pool2d_up", lambda x: F.adaptive_avg_pool2d(x, (4, 5)), [randn(1, 2, 3, 4)])
    # ---- resampling
    case(w, "interpolate_nearest", lambda x: F.interpolate(x, size=(7, 3), mode="nearest"), [randn(1, 2, 4, 5)])
    case(w, "interpolate_bilinear", lambda x: F.interpolate(x, size=(6, 7), mode="bilinear", align_corners=False),
         [randn(1, 2, 4, 5)])
    case(w, "interpolate_bilinear_align", lambda x: F.interpolate(x, size=(3, 7), mode="bilinear", align_corners=True),
         [randn(1, 2, 4, 5)])
    case(w, "interpolate_bicubic", lambda x: F.interpolate(x, size=(6, 3), mode="bicubic", align_corners=False),
         [randn(1, 2, 4, 5)])
    case(w, "interpolate_bicubic_align", lambda x: F.interpolate(x, size=(5, 7), mode="bicubic", align_corners=True),
         [randn(1, 2, 4, 5)])
    case(w, "interpolate_nearest_1d", lambda x: F.interpolate(x, size=11, mode="nearest"), [randn(2, 3, 5)])
    case(w, "interpolate_linear_1d", lambda x: F.interpolate(x, size=7, mode="linear", align_corners=False),
         [randn(2, 3, 5)])
    case(w, "interpolate_linear_1d_align", lambda x: F.interpolate(x, size=8, mode="linear", align_corners=True),
         [randn(2, 3, 5)])


def cases(w):
    # ---- elementwise, unary (and softmax)
    unary_cases(w)
    # ---- elementwise, binary (with broadcasting) and with a scalar
    binary_cases(w)
    # ---- selection by a mask
    selection_cases(w)
    # ---- reductions, scans, sorting
    reduction_cases(w)
    # ---- matmul
    matmul_cases(w)
    # ---- layout and indexing
    layout_cases(w)
    # ---- dtype and device
    cast_cases(w)
    # ---- neural-network ops
    nn_cases(w)
    # ---- expm1 and atan2, appended last so that the cases above keep their random inputs
    case(w, "expm1", torch.expm1, [rand(3, 4)])
    case(w, "atan2_broadcast", torch.atan2, [rand(3, 4), nonzero(1, 4)])
    case(w, "atan2_scalar", lambda x: torch.atan2(x, torch.tensor(0.8, dtype=f64)), [rand(3, 4)])
    # ---- more activations (appended, as above). Inputs stay off each kink; the *_kinks cases
    # sit on them on purpose (golden only in C++), where torch's gradient is a convention.
    wide = lambda: rand(3, 4, low=-4.0, high=4.0)
    case(w, "elu", F.elu, [nonzero(3, 4)])
    case(w, "elu_alpha", lambda x: F.elu(x, alpha=0.7), [away(wide())])
    case(w, "selu", torch.selu, [away(wide())])
    case(w, "celu", lambda x: F.celu(x, alpha=1.5), [away(wide())])
    case(w, "hardtanh", F.hardtanh, [away(rand(3, 4), (-1.0, 1.0))])
    case(w, "hardtanh_range", lambda x: F.hardtanh(x, -0.5, 2.0), [away(wide(), (-0.5, 2.0))])
    case(w, "relu6", F.relu6, [away(rand(3, 4, low=-2.0, high=8.0), (0.0, 6.0))])
    case(w, "hardswish", F.hardswish, [away(rand(3, 4, low=-5.0, high=5.0), (-3.0, 3.0))])
    case(w, "mish", F.mish, [wide()])
    case(w, "log_sigmoid", F.logsigmoid, [rand(3, 4, low=-30.0, high=30.0)])
    case(w, "softsign", F.softsign, [wide()])
    case(w, "tanhshrink", F.tanhshrink, [wide()])
    case(w, "hardshrink", F.hardshrink, [away(rand(3, 4), (-0.5, 0.5))])
    case(w, "hardshrink_lambd", lambda x: F.hardshrink(x, 1.2), [away(wide(), (-1.2, 1.2))])
    case(w, "softshrink", F.softshrink, [away(rand(3, 4), (-0.5, 0.5))])
    case(w, "softshrink_lambd", lambda x: F.softshrink(x, 1.2), [away(wide(), (-1.2, 1.2))])
    case(w, "threshold", lambda x: F.threshold(x, 0.3, -2.0), [away(rand(3, 4), (0.3,))])
    case(w, "softmin", lambda x: F.softmin(x, 1), [rand(3, 4)])
    case(w, "softmin_dim0", lambda x: F.softmin(x, 0), [rand(3, 4)])
    case(w, "glu", lambda x: F.glu(x, -1), [rand(3, 4)])
    case(w, "glu_dim0", lambda x: F.glu(x, 0), [rand(4, 3)])
    case(w, "swiglu", lambda x: F.silu(x[..., :2]) * x[..., 2:], [rand(3, 4)])
    case(w, "rrelu_eval", lambda x: F.rrelu(x, 0.1, 0.3, training=False), [nonzero(3, 4)])
    # On the kinks: torch's gradient there is 1 on the left piece of elu (x <= 0), 0 at both
    # ends of hardtanh and relu6, 0 at +-lambd of the shrinks and at the threshold itself.
    kinks = torch.tensor([[0.0, -1.0, 1.0, 6.0], [0.5, -0.5, 0.3, 2.0], [-3.0, 3.0, 0.25, -0.25]], dtype=f64)
    case(w, "elu_kinks", F.elu, [kinks])
    case(w, "hardtanh_kinks", F.hardtanh, [kinks])
    case(w, "relu6_kinks", F.relu6, [kinks])
    case(w, "hardshrink_kinks", F.hardshrink, [kinks])
    case(w, "softshrink_kinks", F.softshrink, [kinks])
    case(w, "threshold_kinks", lambda x: F.threshold(x, 0.3, -2.0), [kinks])
    # ---- more math (appended, as above)
    inside = lambda: rand(3, 4, low=-0.95, high=0.95)
    case(w, "asin", torch.asin, [inside()])
    case(w, "acos", torch.acos, [inside()])
    case(w, "atan", torch.atan, [rand(3, 4, low=-4.0, high=4.0)])
    case(w, "sinh", torch.sinh, [rand(3, 4, low=-3.0, high=3.0)])
    case(w, "cosh", torch.cosh, [rand(3, 4, low=-3.0, high=3.0)])
    case(w, "asinh", torch.asinh, [rand(3, 4, low=-20.0, high=20.0)])
    case(w, "acosh", torch.acosh, [rand(3, 4, low=1.1, high=20.0)])
    case(w, "atanh", torch.atanh, [inside()])
    case(w, "log2", torch.log2, [positive(3, 4)])
    case(w, "log10", torch.log10, [positive(3, 4)])
    case(w, "exp2", torch.exp2, [rand(3, 4)])
    case(w, "trunc", torch.trunc, [away(rand(3, 4, low=-3.0, high=3.0), tuple(float(v) for v in range(-3, 4)))])
    case(w, "frac", torch.frac, [away(rand(3, 4, low=-3.0, high=3.0), tuple(float(v) for v in range(-3, 4)))])
    case(w, "hypot_broadcast", torch.hypot, [rand(3, 4), nonzero(1, 4)])
    case(w, "hypot_scalar", lambda x: torch.hypot(x, torch.tensor(0.8, dtype=f64)), [rand(3, 4)])
    case(w, "copysign_broadcast", torch.copysign, [nonzero(3, 4), nonzero(1, 4)])
    case(w, "copysign_scalar", lambda x: torch.copysign(x, torch.tensor(-0.8, dtype=f64)), [nonzero(3, 4)])
    case(w, "logaddexp_broadcast", torch.logaddexp, [rand(3, 4), rand(1, 4)])
    case(w, "logaddexp_scalar", lambda x: torch.logaddexp(x, torch.tensor(0.8, dtype=f64)), [rand(3, 4)])
    # ---- free-function tensor ops (kiln/tensor/rearrange.hpp, linalg.hpp), appended as above
    case(w, "movedim", lambda x: torch.movedim(x, [0, 1], [2, 0]), [rand(2, 3, 4)])
    case(w, "squeeze_all", torch.squeeze, [rand(1, 3, 1, 4)])
    case(w, "repeat_interleave", lambda x: torch.repeat_interleave(x, 3, 1), [rand(2, 3)])
    case(w, "diagonal", lambda x: torch.diagonal(x, 1, 2, 0), [rand(3, 2, 4)])
    case(w, "diag_of_matrix", lambda x: torch.diag(x, -1), [rand(4, 3)])
    case(w, "diag_of_vector", lambda x: torch.diag(x, 2), [rand(3)])
    case(w, "trace", lambda x: torch.trace(x).reshape(1), [rand(3, 4)])
    case(w, "outer", torch.outer, [rand(4), rand(3)])
    case(w, "cross", lambda a, b: torch.linalg.cross(a, b, dim=0), [rand(3, 2, 4), rand(3, 1, 4)])
    # ---- order statistics and selection (kiln/tensor/order.hpp, select.hpp), appended as above
    case(w, "cummax", lambda x: torch.cummax(x, 1).values, [rand(3, 5)])
    case(w, "cummin", lambda x: torch.cummin(x, 0).values, [rand(4, 3)])
    case(w, "median_dim", lambda x: torch.median(x, 1, keepdim=True).values, [rand(3, 5)])
    case(w, "quantile", lambda x: torch.quantile(x, 0.3, 1, keepdim=True), [rand(3, 5)])
    mask = torch.rand(3, 4) > 0.5
    case(w, "masked_select", lambda x: torch.masked_select(x, mask), [rand(3, 4)], masks=[mask])
    # ---- einsum and sliding windows (kiln/tensor/einsum.hpp, unfold.hpp), appended as above
    case(w, "einsum_batched", lambda a, b: torch.einsum("bij,bjk->ikb", a, b), [rand(2, 3, 4), rand(2, 4, 5)])
    case(w, "einsum_diagonal", lambda a, b: torch.einsum("ii,ij->ij", a, b), [rand(3, 3), rand(3, 2)])
    case(w, "unfold", lambda x: F.unfold(x, (3, 2), dilation=(2, 1), padding=(1, 2), stride=(2, 3)), [rand(2, 3, 5, 6)])
    case(w, "fold", lambda x: F.fold(x, (4, 5), (2, 3), padding=(1, 0)), [rand(2, 12, 15)])
    case(w, "pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), [rand(2, 8, 2, 3)])
    case(w, "pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2), [rand(1, 2, 4, 6)])
    case(w, "einsum_chain", lambda a, v, b: torch.einsum("bjk,j,bj->bk", a, v, b), [rand(2, 3, 4), rand(3), rand(2, 3)])
    # ---- small numeric ops (kiln/tensor/numeric.hpp), appended as above
    case(w, "lerp", lambda a, b, t: torch.lerp(a, b, t), [rand(3, 4), rand(3, 4), rand(3, 4)])
    case(w, "fmod", lambda a, b: torch.fmod(a, b), [rand(3, 4, low=-3.0, high=3.0), away(rand(3, 4), margin=0.4)])
    case(w, "diff", lambda x: torch.diff(x, n=2, dim=0), [rand(5, 3)])
    case(w, "dot", lambda a, b: torch.dot(a, b).reshape(1), [rand(6), rand(6)])
    case(w, "logcumsumexp", lambda x: torch.logcumsumexp(x, 1), [rand(3, 5)])
    case(w, "kthvalue", lambda x: torch.kthvalue(x, 2, 1, keepdim=True).values, [rand(3, 5)])
    case(w, "normalize", lambda x: F.normalize(x, p=2.0, dim=1), [rand(2, 3, 4)])
    case(w, "nan_to_num", lambda x: torch.nan_to_num(x), [rand(3, 4)])
