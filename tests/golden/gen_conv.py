"""Golden cases for convolution: conv1d/conv2d forward with stride, padding, dilation and
groups (depthwise included), their input and weight gradients (torch.autograd), and the
transposed convolutions. The options of each case are repeated in tests/backend/conv_test.cpp."""
import torch
import torch.nn.functional as F

f64 = torch.float64


def conv2d_case(w, name, x_shape, w_shape, bias, **options):
    x = torch.randn(*x_shape, dtype=f64, requires_grad=True)
    weight = torch.randn(*w_shape, dtype=f64, requires_grad=True)
    b = torch.randn(w_shape[0], dtype=f64) if bias else None
    out = F.conv2d(x, weight, b, **options)
    dy = torch.randn_like(out)
    dx, dw = torch.autograd.grad(out, (x, weight), dy)
    tensors = dict(x=x, w=weight, out=out, dy=dy, dx=dx, dw=dw)
    if bias:
        tensors["b"] = b
    w.case(name, **tensors)


def cases(w):
    conv2d_case(w, "conv2d_basic", (2, 3, 5, 5), (4, 3, 3, 3), True)
    conv2d_case(w, "conv2d_strided_grouped", (1, 4, 7, 6), (6, 2, 3, 2), False,
                stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)
    conv2d_case(w, "conv2d_depthwise", (2, 3, 5, 5), (3, 1, 3, 3), True, padding=1, groups=3)
    # Stride 2 over an even extent: the last input row and column fall outside every window.
    conv2d_case(w, "conv2d_uncovered_edge", (1, 2, 6, 6), (3, 2, 3, 3), False, stride=2, padding=1)
    conv2d_case(w, "conv2d_channel_multiplier", (1, 2, 4, 4), (4, 1, 2, 2), False, groups=2)

    x = torch.randn(2, 4, 9, dtype=f64)
    weight = torch.randn(6, 2, 3, dtype=f64)
    b = torch.randn(6, dtype=f64)
    w.case("conv1d", x=x, w=weight, b=b, out=F.conv1d(x, weight, b, stride=2, padding=1, dilation=2, groups=2))
    x = torch.randn(1, 3, 6, dtype=f64)
    weight = torch.randn(2, 3, 2, dtype=f64)
    w.case("conv1d_plain", x=x, w=weight, out=F.conv1d(x, weight))

    x = torch.randn(2, 4, 3, 3, dtype=f64)
    weight = torch.randn(4, 3, 3, 3, dtype=f64)
    b = torch.randn(3, dtype=f64)
    w.case("conv_transpose2d", x=x, w=weight, b=b,
           out=F.conv_transpose2d(x, weight, b, stride=2, padding=1, output_padding=1))
    # output_padding 1 with stride 1 along the height (allowed by the dilation of 2).
    x = torch.randn(1, 4, 3, 4, dtype=f64)
    weight = torch.randn(4, 2, 2, 3, dtype=f64)
    w.case("conv_transpose2d_grouped_dilated", x=x, w=weight,
           out=F.conv_transpose2d(x, weight, None, stride=(1, 2), padding=(0, 1), output_padding=(1, 1),
                                  dilation=(2, 1), groups=2))

    x = torch.randn(2, 3, 5, dtype=f64)
    weight = torch.randn(3, 4, 3, dtype=f64)
    b = torch.randn(4, dtype=f64)
    w.case("conv_transpose1d", x=x, w=weight, b=b,
           out=F.conv_transpose1d(x, weight, b, stride=2, padding=1, output_padding=1))
    # output_padding 2 > padding 1: the last output position lies past every kernel tap.
    x = torch.randn(1, 2, 4, dtype=f64)
    weight = torch.randn(2, 3, 3, dtype=f64)
    b = torch.randn(3, dtype=f64)
    w.case("conv_transpose1d_dilated", x=x, w=weight, b=b,
           out=F.conv_transpose1d(x, weight, b, stride=1, padding=1, output_padding=2, dilation=3))
