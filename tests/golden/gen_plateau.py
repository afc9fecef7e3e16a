"""Golden learning rates of torch.optim.lr_scheduler.ReduceLROnPlateau
(tests/optim/plateau_test.cpp).

A case holds the scheduler's arguments (mode and threshold_mode as 0/1: max = 1, abs = 1),
`metric`, the values passed to scheduler.step(metric) one after another, and `lr`, the
optimizer's rate after each of those calls.
"""
import math

import torch
from torch.optim import lr_scheduler as L

f64, i64 = torch.float64, torch.int64


def case(w, name, lr, metrics, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
         cooldown=0, min_lr=0.0, eps=1e-8):
    param = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([param], lr=lr)
    sched = L.ReduceLROnPlateau(opt, mode=mode, factor=factor, patience=patience, threshold=threshold,
                                threshold_mode=threshold_mode, cooldown=cooldown, min_lr=min_lr, eps=eps)
    rates = []
    for m in metrics:
        opt.step()
        sched.step(m)
        rates.append(opt.param_groups[0]["lr"])
    w.case(name, lr=torch.tensor(lr, dtype=f64), maximize=torch.tensor(int(mode == "max"), dtype=i64),
           factor=torch.tensor(factor, dtype=f64), patience=torch.tensor(patience, dtype=i64),
           threshold=torch.tensor(threshold, dtype=f64),
           absolute=torch.tensor(int(threshold_mode == "abs"), dtype=i64),
           cooldown=torch.tensor(cooldown, dtype=i64), min_lr=torch.tensor(min_lr, dtype=f64),
           eps=torch.tensor(eps, dtype=f64), metric=torch.tensor(metrics, dtype=f64),
           rates=torch.tensor(rates, dtype=f64))


def cases(w):
    g = torch.Generator().manual_seed(7)
    # A loss that falls, then wanders on a plateau: the defaults but a short patience.
    falling = [1.0 / (1 + t) for t in range(10)]
    wander = (0.1 + 0.01 * torch.rand(40, generator=g, dtype=f64)).tolist()
    case(w, "min_rel", 0.1, falling + wander, patience=3)
    # An accuracy that rises in small steps (under an absolute threshold of 0.01 some count as
    # no better), a cooldown, and a floor that the rate reaches.
    accuracy = [min(0.9, 0.5 + 0.004 * t + 0.02 * math.sin(t)) for t in range(60)]
    case(w, "max_abs_cooldown_floor", 0.5, accuracy, mode="max", factor=0.5, patience=2, threshold=0.01,
         threshold_mode="abs", cooldown=3, min_lr=0.02)
    # Relative threshold in max mode, with a NaN metric (never better) and patience 0.
    values = [1.0, 2.0, 2.0001, float("nan"), 3.0, 2.5, 2.5, 10.0, 9.0, 9.0, 9.0]
    case(w, "max_rel_nan_patience0", 1.0, values, mode="max", factor=0.3, patience=0, threshold=0.01)
    # Absolute threshold in min mode, and a rate so small that a cut smaller than eps is skipped.
    flat = [5.0] * 12
    case(w, "min_abs_eps", 2e-8, flat, factor=0.5, patience=1, threshold=0.5, threshold_mode="abs")
    # Negative metrics: the relative threshold scales the value as it is (best * 0.95 is above
    # a negative best), as PyTorch does.
    negative = [-1.0, -0.9, -0.8, -0.85, -0.7, -0.6, -0.65, -0.5, -1.2, -1.1, -1.0, -0.9]
    case(w, "min_rel_negative", 0.01, negative, factor=0.2, patience=1, threshold=0.05)
