"""Golden cases for pooling and interpolation: max pooling (with indices), average pooling,
adaptive average pooling and interpolate, forward and backward (dx = autograd gradient of
sum(out * dy)), in 2-d and 1-d."""
import torch
import torch.nn.functional as F


def randn(*shape):
    """Normal samples rounded to 4 decimals: short fixture lines, same values for every dtype's parse."""
    return torch.randn(*shape, dtype=torch.float64).round(decimals=4)


def with_grad(fn, x):
    """Runs fn on a differentiable copy of x; returns (outputs, dy, dx) for a random dy."""
    xr = x.clone().requires_grad_(True)
    result = fn(xr)
    out = result[0] if isinstance(result, tuple) else result
    dy = randn(*out.shape)
    (dx,) = torch.autograd.grad(out, xr, dy)
    return result, dy, dx


def pool_case(w, name, x, fn, **options):
    result, dy, dx = with_grad(fn, x)
    if isinstance(result, tuple):
        w.case(name, x=x, out=result[0], indices=result[1], dy=dy, dx=dx, **options)
    else:
        w.case(name, x=x, out=result, dy=dy, dx=dx, **options)


def max2d(w, name, shape, kernel, stride, padding, dilation, ceil_mode):
    x = randn(*shape)
    pool_case(w, name, x,
              lambda t: F.max_pool2d(t, kernel, stride, padding, dilation, ceil_mode, return_indices=True),
              options=torch.tensor([*kernel, *stride, *padding, *dilation, int(ceil_mode)]))


def avg2d(w, name, shape, kernel, stride, padding, ceil_mode, count_include_pad):
    x = randn(*shape)
    pool_case(w, name, x, lambda t: F.avg_pool2d(t, kernel, stride, padding, ceil_mode, count_include_pad),
              options=torch.tensor([*kernel, *stride, *padding, int(ceil_mode), int(count_include_pad)]))


MODES = {"nearest": 0, "bilinear": 1, "bicubic": 2}


def cases(w):
    # ---- max pooling (options: kernel[2] stride[2] padding[2] dilation[2] ceil_mode)
    max2d(w, "max_k2s2", (2, 3, 5, 6), (2, 2), (2, 2), (0, 0), (1, 1), False)
    max2d(w, "max_pad_dilation_ceil", (1, 2, 7, 8), (3, 2), (2, 1), (1, 1), (2, 1), True)
    max2d(w, "max_ceil", (1, 2, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), True)
    max2d(w, "max_k3s1p1", (1, 2, 4, 5), (3, 3), (1, 1), (1, 1), (1, 1), False)
    # Ties keep the first position, NaN wins, a window of only -inf keeps its first valid position.
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[[[1.0, 1.0, -inf, -inf],
                        [1.0, 1.0, -inf, -inf],
                        [2.0, nan, 0.5, 3.0],
                        [nan, 2.0, 3.0, 0.5]]]], dtype=torch.float64)
    out, indices = F.max_pool2d(x, 2, 2, return_indices=True)
    w.case("max_ties_nan", x=x, out=out, indices=indices)

    # ---- average pooling (options: kernel[2] stride[2] padding[2] ceil_mode count_include_pad)
    avg2d(w, "avg_pad_include", (2, 2, 5, 6), (3, 3), (2, 2), (1, 1), False, True)
    avg2d(w, "avg_pad_exclude", (2, 2, 5, 6), (3, 3), (2, 2), (1, 1), False, False)
    # The last windows reach past the padding: PyTorch's include-pad divisor shrinks there.
    avg2d(w, "avg_ceil_include", (1, 2, 6, 7), (3, 3), (2, 2), (1, 1), True, True)
    avg2d(w, "avg_ceil_exclude", (1, 2, 6, 7), (3, 3), (2, 2), (1, 1), True, False)
    avg2d(w, "avg_rect", (1, 3, 4, 7), (2, 3), (1, 2), (1, 0), False, True)
    # With ceil_mode a window may be wider than the padded input (width 1, kernel 4, padding 1).
    avg2d(w, "avg_ceil_overhang_include", (1, 2, 2, 1), (2, 4), (2, 2), (1, 1), True, True)
    avg2d(w, "avg_ceil_overhang_exclude", (1, 2, 2, 1), (2, 4), (2, 2), (1, 1), True, False)
    max2d(w, "max_ceil_overhang", (1, 2, 2, 1), (2, 4), (2, 2), (1, 1), (1, 1), True)

    # ---- adaptive average pooling to sizes that do not divide the input
    for name, shape, size in [("adaptive_7x5_to_3x2", (2, 3, 7, 5), (3, 2)),
                              ("adaptive_3x4_to_5x7", (1, 2, 3, 4), (5, 7))]:
        x = randn(*shape)
        pool_case(w, name, x, lambda t: F.adaptive_avg_pool2d(t, size), size=torch.tensor(size))

    # ---- interpolate (options: mode align_corners out_h out_w)
    x = randn(1, 2, 4, 5)
    for mode in ["nearest", "bilinear", "bicubic"]:
        for align in ([False] if mode == "nearest" else [False, True]):
            # mixed up/down, down, up; nearest also at exactly twice the size (its shift path)
            for size in [(7, 3), (3, 2), (6, 9)] + ([(8, 10)] if mode == "nearest" else []):
                name = f"interp_{mode}_{'align' if align else 'noalign'}_{size[0]}x{size[1]}"
                fn = (lambda t: F.interpolate(t, size=size, mode=mode)) if mode == "nearest" else \
                     (lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align))
                pool_case(w, name, x, fn, options=torch.tensor([MODES[mode], int(align), *size]))

    # ---- non-contiguous input: x is stored [N, C, W, H] and used transposed
    x = randn(2, 3, 6, 5)
    xt = x.transpose(2, 3)
    w.case("noncontiguous", x=x,
           max=F.max_pool2d(xt, 2, 2, ceil_mode=True),
           avg=F.avg_pool2d(xt, 3, 2, 1, count_include_pad=False),
           adaptive=F.adaptive_avg_pool2d(xt, (2, 4)),
           bilinear=F.interpolate(xt, size=(7, 4), mode="bilinear", align_corners=False))

    # ---- 1-d variants on NCL
    x = randn(2, 3, 9)
    pool_case(w, "max1d", x, lambda t: F.max_pool1d(t, 3, 2, 1, 1, True, return_indices=True))
    pool_case(w, "max1d_dilation", x, lambda t: F.max_pool1d(t, 2, 1, 1, 3, False, return_indices=True))
    pool_case(w, "avg1d", x, lambda t: F.avg_pool1d(t, 3, 2, 1, True, False))
    pool_case(w, "adaptive1d", x, lambda t: F.adaptive_avg_pool1d(t, 4))
    pool_case(w, "interp1d_linear", x, lambda t: F.interpolate(t, size=5, mode="linear", align_corners=False))
    pool_case(w, "interp1d_linear_align", x, lambda t: F.interpolate(t, size=13, mode="linear", align_corners=True))
    pool_case(w, "interp1d_nearest", x, lambda t: F.interpolate(t, size=13, mode="nearest"))
