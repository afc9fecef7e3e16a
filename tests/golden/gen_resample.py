"""Golden resampling layers from torch.nn (tests/nn/resample_test.cpp): MaxUnpool2d of what
MaxPool2d(return_indices=True) gave, and Upsample in each mode. Each case holds x (and for
unpooling the indices), the output y, and for the loss sum(y * r) the gradient dx. The
grid_sample cases also hold the grid and its gradient dgrid; the affine_grid ones theta and
dtheta."""
import torch
import torch.nn as nn

f64 = torch.float64


def case(w, name, forward, x, **extra):
    x = x.clone().requires_grad_(True)
    y = forward(x)
    r = torch.randn(y.shape, dtype=f64)
    (y * r).sum().backward()
    w.case(name, x=x.detach(), y=y.detach(), r=r, dx=x.grad, **extra)


def cases(w):
    g = torch.Generator().manual_seed(5)
    # Unpooling: 2x2 windows of stride 2 over [6, 6] to the default size [6, 6], and over [6, 7]
    # (pooled to [3, 3]) to [6, 7] given; then 3x3 windows of stride 2 with padding 1 over [7, 7].
    for name, pool, unpool, size, shape in [
            ("unpool", nn.MaxPool2d(2, 2, return_indices=True), nn.MaxUnpool2d(2, 2), None, (2, 3, 6, 6)),
            ("unpool_sized", nn.MaxPool2d(2, 2, return_indices=True), nn.MaxUnpool2d(2, 2), (6, 7), (2, 3, 6, 7)),
            ("unpool_padded", nn.MaxPool2d(3, 2, 1, return_indices=True), nn.MaxUnpool2d(3, 2, 1), (7, 7),
             (1, 2, 7, 7))]:
        pooled, indices = pool(torch.randn(*shape, generator=g, dtype=f64))
        case(w, name, lambda x: unpool(x, indices, output_size=size), pooled.detach(), indices=indices)
    x = torch.randn(2, 3, 4, 5, generator=g, dtype=f64)
    case(w, "upsample_nearest_scale", nn.Upsample(scale_factor=2.0, mode="nearest"), x)
    case(w, "upsample_bilinear_size", nn.Upsample(size=(7, 9), mode="bilinear", align_corners=False), x)
    case(w, "upsample_bilinear_corners", nn.Upsample(size=(7, 9), mode="bilinear", align_corners=True), x)
    case(w, "upsample_bicubic_scale",
         lambda t: nn.functional.interpolate(t, scale_factor=(1.5, 1.7), mode="bicubic", align_corners=False,
                                             recompute_scale_factor=True), x)
    x1 = torch.randn(2, 3, 5, generator=g, dtype=f64)
    case(w, "upsample_linear_1d", nn.Upsample(scale_factor=3.0, mode="linear"), x1)

    # grid_sample: points partly outside [-1, 1], every mode, padding and corner alignment.
    x = torch.randn(2, 3, 5, 6, generator=g, dtype=f64)
    grid = torch.rand(2, 4, 7, 2, generator=g, dtype=f64) * 2.6 - 1.3
    for mode in ["bilinear", "nearest"]:
        for padding in ["zeros", "border", "reflection"]:
            for corners in [False, True]:
                xg, gg = x.clone().requires_grad_(True), grid.clone().requires_grad_(True)
                y = torch.nn.functional.grid_sample(xg, gg, mode=mode, padding_mode=padding, align_corners=corners)
                r = torch.randn(y.shape, dtype=f64)
                (y * r).sum().backward()
                w.case(f"grid_sample_{mode}_{padding}_{int(corners)}", x=x, grid=grid, y=y.detach(), r=r,
                       dx=xg.grad, dgrid=gg.grad)
    theta = torch.randn(2, 2, 3, generator=g, dtype=f64)
    for corners in [False, True]:
        tg = theta.clone().requires_grad_(True)
        y = torch.nn.functional.affine_grid(tg, [2, 3, 4, 5], align_corners=corners)
        r = torch.randn(y.shape, dtype=f64)
        (y * r).sum().backward()
        w.case(f"affine_grid_{int(corners)}", theta=theta, y=y.detach(), r=r, dtheta=tg.grad)

    # The module forms of pixel (un)shuffle and unfold / fold, with every window argument.
    case(w, "pixel_shuffle", nn.PixelShuffle(2), torch.randn(2, 8, 3, 4, generator=g, dtype=f64))
    case(w, "pixel_unshuffle", nn.PixelUnshuffle(3), torch.randn(1, 2, 6, 9, generator=g, dtype=f64))
    case(w, "unfold", nn.Unfold((2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1)),
         torch.randn(2, 3, 5, 8, generator=g, dtype=f64))
    case(w, "fold", nn.Fold((5, 8), (2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1)),
         torch.randn(2, 18, 12, generator=g, dtype=f64))
