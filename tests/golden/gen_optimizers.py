"""Golden training runs of every optimizer (tests/optim/optimizer_test.cpp): a Linear(5, 3)
in f64 fitted to fixed data with a mean-squared error, 20 steps with torch.optim, the
weight and bias after steps 1, 2, 3, 5, 10 and 20 (RECORDED, 0-based). Lion is not in torch 1.13: its update is written out
here from the paper (Chen et al. 2023). The *_groups cases put the weight and the bias in
parameter groups of their own."""
import torch

f64 = torch.float64
STEPS = 20
RECORDED = (0, 1, 2, 4, 9, 19)


class Lion(torch.optim.Optimizer):
    def __init__(self, params, lr, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                m = state.setdefault("exp_avg", torch.zeros_like(p))
                direction = (m * b1 + p.grad * (1 - b1)).sign()
                p.mul_(1 - group["lr"] * group["weight_decay"]).add_(direction, alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


def run(w, name, make, schedule=None):
    torch.manual_seed(1)
    weight = torch.randn(3, 5, dtype=f64) * 0.5
    bias = torch.randn(3, dtype=f64) * 0.5
    x = torch.randn(8, 5, dtype=f64)
    y = torch.randn(8, 3, dtype=f64)
    tensors = {"weight": weight.clone(), "bias": bias.clone(), "x": x, "y": y}
    weight.requires_grad_(True)
    bias.requires_grad_(True)
    opt = make([weight, bias])
    scheduler = schedule(opt) if schedule else None
    for step in range(STEPS):
        opt.zero_grad()
        loss = ((x @ weight.T + bias - y) ** 2).mean()
        loss.backward()
        opt.step()
        if scheduler:
            scheduler.step()
        if step not in RECORDED:
            continue
        tensors[f"weight{step}"] = weight.detach().clone()
        tensors[f"bias{step}"] = bias.detach().clone()
    w.case(name, **tensors)


def cases(w):
    # The options of each case are repeated in tests/optim/optimizer_test.cpp.
    O = torch.optim
    run(w, "sgd", lambda ps: O.SGD(ps, lr=0.1))
    run(w, "sgd_momentum", lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01))
    run(w, "sgd_nesterov", lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01))
    run(w, "adam", lambda ps: O.Adam(ps, lr=0.01, betas=(0.8, 0.99), eps=1e-7, weight_decay=0.01))
    run(w, "adamw", lambda ps: O.AdamW(ps, lr=0.01, weight_decay=0.1))
    run(w, "rmsprop", lambda ps: O.RMSprop(ps, lr=0.01))
    run(w, "rmsprop_centered", lambda ps: O.RMSprop(ps, lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.01,
                                                   momentum=0.5, centered=True))
    run(w, "adagrad", lambda ps: O.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=0.01,
                                           initial_accumulator_value=0.1))
    run(w, "lion", lambda ps: Lion(ps, lr=0.01, betas=(0.9, 0.99), weight_decay=0.1))
    # Parameter groups: the bias without weight decay and at half the rate, a StepLR over both.
    run(w, "adamw_groups",
        lambda ps: O.AdamW([{"params": [ps[0]]}, {"params": [ps[1]], "weight_decay": 0.0, "lr": 0.005}],
                           lr=0.01, weight_decay=0.1),
        schedule=lambda opt: O.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5))
    # Options that differ in kind between the groups: momentum on the weight only, decay on the bias.
    run(w, "sgd_groups",
        lambda ps: O.SGD([{"params": [ps[0]], "momentum": 0.9},
                          {"params": [ps[1]], "lr": 0.1, "weight_decay": 0.01}], lr=0.05))
