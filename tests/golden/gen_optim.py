"""Golden optimizer steps from torch.optim (tests/backend/optim_test.cpp): a parameter,
the gradients of three steps, and the parameter and moments (exp_avg, exp_avg_sq) after
each step, for Adam (with L2 weight decay) and AdamW."""
import torch

f64 = torch.float64


def adam_case(w, name, make):
    p = torch.randn(4, 5, dtype=f64, requires_grad=True)
    tensors = {"p": p.detach().clone()}
    opt = make([p])
    for step in range(3):
        g = torch.randn(4, 5, dtype=f64)
        p.grad = g.clone()
        opt.step()
        state = opt.state[p]
        tensors[f"g{step}"] = g
        tensors[f"p{step}"] = p.detach().clone()
        tensors[f"m{step}"] = state["exp_avg"].clone()
        tensors[f"v{step}"] = state["exp_avg_sq"].clone()
    w.case(name, **tensors)


def cases(w):
    # The options of each case are repeated in tests/backend/optim_test.cpp.
    adam_case(w, "adam", lambda ps: torch.optim.Adam(ps, lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1))
    adam_case(w, "adamw", lambda ps: torch.optim.AdamW(ps, lr=0.05, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.2))
