"""Golden cases for matmul: 2-d, batched, broadcast batch dims, transposed and strided
operands (stored so that the test builds the view), and a NaN/inf row."""
import torch


def cases(w):
    f64 = torch.float64
    a = torch.randn(3, 4, dtype=f64)
    b = torch.randn(4, 5, dtype=f64)
    w.case("mm", a=a, b=b, out=a @ b)

    a = torch.randn(2, 3, 4, dtype=f64)
    b = torch.randn(2, 4, 5, dtype=f64)
    w.case("batched", a=a, b=b, out=a @ b)

    a = torch.randn(2, 1, 3, 4, dtype=f64)
    b = torch.randn(1, 5, 4, 6, dtype=f64)
    w.case("broadcast", a=a, b=b, out=a @ b)

    # One shared right operand for a batch of left ones: [2, 3, 4] @ [1, 4, 5].
    a = torch.randn(2, 3, 4, dtype=f64)
    b = torch.randn(1, 4, 5, dtype=f64)
    w.case("shared_rhs", a=a, b=b, out=a @ b)

    # The test multiplies a_t.transpose() @ b_t.transpose(): both operands are views.
    a_t = torch.randn(2, 4, 3, dtype=f64)
    b_t = torch.randn(2, 5, 4, dtype=f64)
    w.case("transposed", a_t=a_t, b_t=b_t, out=a_t.transpose(-1, -2) @ b_t.transpose(-1, -2))

    # The test takes every other column of `a_wide` (a column stride of 2).
    a_wide = torch.randn(3, 8, dtype=f64)
    b = torch.randn(4, 2, dtype=f64)
    w.case("strided", a_wide=a_wide, b=b, out=a_wide[:, ::2] @ b)

    a = torch.randn(2, 3, dtype=f64)
    a[0, 1] = float("nan")
    a[1, 2] = float("inf")
    b = torch.randn(3, 2, dtype=f64)
    w.case("nonfinite", a=a, b=b, out=a @ b)
