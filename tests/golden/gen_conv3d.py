"""Golden cases for the 3-d convolution and pooling composed from 2-d ops (functional conv3d,
conv_transpose3d, max_pool3d, avg_pool3d: forward and the gradients of sum(out * dy)), the
circular padding of F.pad, and the layers Conv3d, ConvTranspose3d, MaxPool3d, AvgPool3d and
Conv1d / 2d / 3d with padding_mode and padding="same" (as gen_nn.py: parameters "w.<name>",
x, y, r and the gradients of sum(y * r), "dx" and "d.<name>"). The options are repeated in
tests/backend/conv3d_test.cpp and tests/nn/conv3d_test.cpp."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from gen_nn import layer_case

f64 = torch.float64


def randn(*shape):
    return torch.randn(*shape, dtype=f64)


def conv_case(w, name, fn, x_shape, w_shape, bias_size, **options):
    x = randn(*x_shape).requires_grad_(True)
    weight = randn(*w_shape).requires_grad_(True)
    b = randn(bias_size).requires_grad_(True) if bias_size else None
    out = fn(x, weight, b, **options)
    dy = torch.randn_like(out)
    inputs = (x, weight, b) if b is not None else (x, weight)
    grads = torch.autograd.grad(out, inputs, dy)
    tensors = dict(x=x.detach(), w=weight.detach(), out=out.detach(), dy=dy, dx=grads[0], dw=grads[1])
    if b is not None:
        tensors.update(b=b.detach(), db=grads[2])
    w.case(name, **tensors)


def pool_case(w, name, fn, x):
    x = x.clone().requires_grad_(True)
    result = fn(x)
    out = result[0] if isinstance(result, tuple) else result
    dy = torch.randn_like(out)
    (dx,) = torch.autograd.grad(out, x, dy)
    tensors = dict(x=x.detach(), out=out.detach(), dy=dy, dx=dx)
    if isinstance(result, tuple):
        tensors["indices"] = result[1]
    w.case(name, **tensors)


def cases(w):
    # ---- functional
    conv_case(w, "conv3d_basic", F.conv3d, (2, 3, 4, 5, 4), (4, 3, 3, 2, 3), 4)
    conv_case(w, "conv3d_strided_grouped", F.conv3d, (1, 4, 7, 5, 5), (4, 2, 3, 3, 2), 0,
              stride=(2, 1, 2), padding=(1, 2, 0), dilation=(2, 1, 1), groups=2)
    conv_case(w, "conv3d_depthwise", F.conv3d, (1, 3, 4, 4, 5), (3, 1, 2, 3, 3), 3, padding=1, groups=3)
    conv_case(w, "conv_transpose3d", F.conv_transpose3d, (1, 4, 3, 2, 3), (4, 3, 3, 3, 2), 3,
              stride=2, padding=1, output_padding=1)
    # output_padding 1 with stride 1 along the depth (allowed by the dilation of 2).
    conv_case(w, "conv_transpose3d_grouped_dilated", F.conv_transpose3d, (1, 4, 3, 3, 2), (4, 2, 2, 3, 2), 0,
              stride=(1, 2, 1), padding=(0, 1, 0), output_padding=(1, 1, 0), dilation=(2, 1, 1), groups=2)
    pool_case(w, "max_pool3d", lambda t: F.max_pool3d(t, (3, 2, 2), (2, 2, 1), (1, 1, 0), (1, 1, 2), ceil_mode=True,
                                                      return_indices=True), randn(1, 3, 6, 7, 5))
    pool_case(w, "max_pool3d_unbatched", lambda t: F.max_pool3d(t, 2, 2, return_indices=True), randn(3, 4, 5, 6))
    pool_case(w, "avg_pool3d", lambda t: F.avg_pool3d(t, (3, 3, 2), (2, 2, 1), (1, 1, 0), ceil_mode=True,
                                                      count_include_pad=False), randn(1, 3, 7, 6, 5))
    pool_case(w, "avg_pool3d_include_pad", lambda t: F.avg_pool3d(t, 3, 2, 1), randn(1, 2, 6, 7, 5))
    pool_case(w, "pad_circular_1d", lambda t: F.pad(t, (2, 3), mode="circular"), randn(2, 3, 4))
    pool_case(w, "pad_circular_2d", lambda t: F.pad(t, (1, 0, 3, 2), mode="circular"), randn(1, 2, 3, 5))

    # ---- layers
    layer_case(w, "Conv3d", nn.Conv3d(4, 6, (3, 2, 3), stride=(2, 1, 1), padding=(1, 0, 1), dilation=(1, 2, 1),
                                      groups=2), randn(1, 4, 5, 5, 4))
    layer_case(w, "ConvTranspose3d", nn.ConvTranspose3d(2, 4, (3, 2, 2), stride=2, padding=(1, 0, 1),
                                                        output_padding=(1, 0, 1), groups=2), randn(1, 2, 3, 3, 2))
    layer_case(w, "MaxPool3d", nn.MaxPool3d(3, stride=2, padding=1), randn(1, 3, 6, 5, 7))
    layer_case(w, "AvgPool3d", nn.AvgPool3d((3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1), ceil_mode=True,
                                            count_include_pad=False), randn(1, 2, 6, 5, 7))
    for mode in ("zeros", "reflect", "replicate", "circular"):
        layer_case(w, f"Conv1d_{mode}", nn.Conv1d(3, 4, 3, padding=2, padding_mode=mode), randn(2, 3, 6))
        layer_case(w, f"Conv2d_{mode}", nn.Conv2d(3, 4, (3, 2), stride=(1, 2), padding=(1, 2), padding_mode=mode),
                   randn(2, 3, 5, 6))
        layer_case(w, f"Conv3d_{mode}", nn.Conv3d(2, 3, 3, padding=(1, 2, 1), padding_mode=mode),
                   randn(1, 2, 4, 3, 5))
    # padding="same": odd totals put the extra cell at the end.
    layer_case(w, "Conv1d_same_even_kernel", nn.Conv1d(3, 4, 4, padding="same"), randn(2, 3, 7))
    layer_case(w, "Conv1d_same_dilated", nn.Conv1d(3, 4, 3, padding="same", dilation=2), randn(2, 3, 7))
    layer_case(w, "Conv2d_same", nn.Conv2d(3, 4, (3, 4), padding="same"), randn(2, 3, 5, 6))
    layer_case(w, "Conv2d_same_reflect", nn.Conv2d(3, 4, (2, 3), padding="same", padding_mode="reflect"),
               randn(2, 3, 5, 6))
    layer_case(w, "Conv3d_same", nn.Conv3d(2, 3, (2, 3, 2), padding="same"), randn(1, 2, 4, 5, 3))
    layer_case(w, "Conv3d_same_circular", nn.Conv3d(2, 3, (3, 2, 3), padding="same", padding_mode="circular"),
               randn(1, 2, 4, 5, 3))
