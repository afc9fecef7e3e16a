"""Golden cases for elementwise ops: math, activations, arithmetic with broadcasting,
comparisons, Bool logic and selection."""
import torch
import torch.nn.functional as F


def cases(w):
    x = torch.randn(3, 4, dtype=torch.float64) * 2
    w.case("exp", x=x, out=torch.exp(x))
    a = torch.randn(2, 3, 4, dtype=torch.float64)
    b = torch.randn(3, 1, dtype=torch.float64)
    w.case("add_broadcast", a=a, b=b, out=a + b)
