"""Golden learning rates from torch.optim.lr_scheduler (tests/optim/scheduler_test.cpp).

A case is named <scheduler>_<n> and holds the scheduler's arguments (f64 or i64 scalars,
milestones as an i64 vector) and `lr`, the learning rate after 0, 1, 2, ... calls of
scheduler.step() (each after an optimizer.step(), as PyTorch wants), that is, the rate of
optimizer step t. Where a case keeps only some steps, `steps` lists them. Sequential cases
(sequential_<n>) hold only `lr`: their sub-schedulers are repeated in the C++ test.
Noam's schedule is not in PyTorch; its cases are the formula, computed here.
"""
import math
import warnings

import torch
from torch.optim import lr_scheduler as L

f64, i64 = torch.float64, torch.int64


def run(make, lr, steps):
    """The learning rates at the given steps (sorted) of the scheduler make(optimizer) builds,
    on an optimizer whose lr is `lr`."""
    param = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([param], lr=lr)
    with warnings.catch_warnings():
        # SequentialLR calls scheduler.step(0) at milestones, which warns that epochs are deprecated.
        warnings.simplefilter("ignore")
        sched = make(opt)
        out, t = [], 0
        for s in steps:
            while t < s:
                opt.step()
                sched.step()
                t += 1
            out.append(sched.get_last_lr()[0])
    return out


def case(w, name, make, lr, n, steps=None, **args):
    """Writes case `name`: args as scalars/vectors, and the lrs of steps 0..n-1 (or of `steps`)."""
    tensors = {}
    for label, v in args.items():
        if isinstance(v, list):
            tensors[label] = torch.tensor(v, dtype=i64).reshape(len(v))
        else:
            tensors[label] = torch.tensor(v, dtype=i64 if isinstance(v, (int, bool)) else f64)
    if steps is not None:
        tensors["steps"] = torch.tensor(steps, dtype=i64)
    tensors["lr"] = torch.tensor(run(make, lr, steps if steps is not None else range(n)), dtype=f64)
    w.case(name, **tensors)


def noam(d_model, warmup, factor, step):
    # The Annotated Transformer's rate(): step counts from 1.
    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


def cases(w):
    for i, (lr, step_size, gamma, n) in enumerate([(0.1, 7, 0.5, 120), (1.0, 30, 0.1, 150), (0.05, 1, 0.97, 120)]):
        case(w, f"step_lr_{i}", lambda o: L.StepLR(o, step_size, gamma), lr, n,
             base_lr=lr, step_size=step_size, gamma=gamma)

    # Repeated milestones apply gamma once per occurrence (PyTorch counts them); 0 applies at once.
    for i, (lr, milestones, gamma) in enumerate([(0.1, [10, 40, 41, 90], 0.3), (0.2, [0, 50, 50, 75], 0.5)]):
        case(w, f"multi_step_lr_{i}", lambda o: L.MultiStepLR(o, milestones, gamma), lr, 120,
             base_lr=lr, milestones=milestones, gamma=gamma)

    for i, (lr, gamma, n) in enumerate([(0.1, 0.95, 150), (1.0, 0.99, 200), (0.01, 1.02, 100)]):
        case(w, f"exponential_lr_{i}", lambda o: L.ExponentialLR(o, gamma), lr, n, base_lr=lr, gamma=gamma)

    # PyTorch runs the chained (recursive) form. Past t_max it rises again; the last case
    # (t_max 1000, eta_min half the base) is where its rounding drifts from the closed form
    # by ~1e-11 beyond t_max, and keeps every 13th step over two periods plus the steps
    # around each minimum.
    cosine = [(0.1, 50, 0.0, 201), (0.1, 40, 0.001, 170), (1.0, 100, 0.5, 250), (0.1, 7, 0.01, 100),
              (0.1, 1, 0.0, 100)]
    for i, (lr, t_max, eta_min, n) in enumerate(cosine):
        case(w, f"cosine_annealing_lr_{i}", lambda o: L.CosineAnnealingLR(o, t_max, eta_min), lr, n,
             base_lr=lr, t_max=t_max, eta_min=eta_min)
    t_max = 1000
    steps = sorted(set(range(0, 4 * t_max + 3, 13)) | {t for m in (t_max, 3 * t_max) for t in range(m - 2, m + 3)})
    case(w, "cosine_annealing_lr_5", lambda o: L.CosineAnnealingLR(o, t_max, 0.5), 1.0, None, steps,
         base_lr=1.0, t_max=t_max, eta_min=0.5)

    linear = [(0.1, 1.0 / 3, 1.0, 5, 100), (0.1, 0.01, 1.0, 50, 120), (0.2, 1.0, 0.1, 80, 120),
              (0.1, 0.5, 0.5, 10, 100)]
    for i, (lr, start, end, total, n) in enumerate(linear):
        case(w, f"linear_lr_{i}", lambda o: L.LinearLR(o, start, end, total), lr, n,
             base_lr=lr, start_factor=start, end_factor=end, total_iters=total)

    for i, (lr, factor, total) in enumerate([(0.1, 1.0 / 3, 5), (0.3, 0.5, 60)]):
        case(w, f"constant_lr_{i}", lambda o: L.ConstantLR(o, factor, total), lr, 120,
             base_lr=lr, factor=factor, total_iters=total)

    # total_steps + 1 rates: PyTorch lets step() reach last_epoch == total_steps. The last
    # case has pct_start * total_steps < 1, so step 0 already lies in the second phase.
    one_cycle = [(0.1, 120, 0.3, "cos", 25.0, 1e4, False), (0.1, 100, 0.25, "linear", 10.0, 100.0, False),
                 (1.0, 150, 0.3, "cos", 25.0, 1e4, True), (0.5, 101, 0.4, "linear", 25.0, 1e4, True),
                 (0.1, 100, 0.005, "cos", 25.0, 1e4, False)]
    for i, (max_lr, total, pct, anneal, div, final_div, three) in enumerate(one_cycle):
        make = lambda o: L.OneCycleLR(o, max_lr, total_steps=total, pct_start=pct, anneal_strategy=anneal,
                                      cycle_momentum=False, div_factor=div, final_div_factor=final_div,
                                      three_phase=three)
        case(w, f"one_cycle_lr_{i}", make, max_lr, total + 1, max_lr=max_lr, total_steps=total, pct_start=pct,
             linear=anneal == "linear", div_factor=div, final_div_factor=final_div, three_phase=three)

    for i, (d_model, warmup, factor, steps) in enumerate([(512, 40, 1.0, range(150)), (64, 10, 2.0, range(120)),
                                                          (512, 4000, 2.0, range(0, 20000, 97))]):
        steps = list(steps)
        w.case(f"noam_{i}", d_model=torch.tensor(d_model, dtype=i64), warmup_steps=torch.tensor(warmup, dtype=i64),
               factor=torch.tensor(factor, dtype=f64), steps=torch.tensor(steps, dtype=i64),
               lr=torch.tensor([noam(d_model, warmup, factor, t + 1) for t in steps], dtype=f64))

    # SequentialLR; the C++ test builds the same sub-schedulers. sequential_0 is also what
    # warmup_cosine(0.1, 10, 100, 0.001, 0.01) builds.
    sequential = [
        (0.1, lambda o: [L.LinearLR(o, 0.01, 1.0, 10), L.CosineAnnealingLR(o, 90, 0.001)], [10], 130),
        (1.0, lambda o: [L.ConstantLR(o, 0.1, 2), L.ExponentialLR(o, 0.9)], [2], 100),
        (0.1, lambda o: [L.LinearLR(o, 0.1, 1.0, 5), L.StepLR(o, 10, 0.5), L.CosineAnnealingLR(o, 30, 0.0)],
         [5, 45], 120),
    ]
    for i, (lr, subs, milestones, n) in enumerate(sequential):
        case(w, f"sequential_{i}", lambda o: L.SequentialLR(o, subs(o), milestones), lr, n)

    for i, (lr, total, power, n) in enumerate([(0.1, 10, 1.0, 30), (0.5, 50, 2.0, 80), (1.0, 7, 0.5, 20)]):
        case(w, f"polynomial_lr_{i}", lambda o: L.PolynomialLR(o, total, power), lr, n,
             base_lr=lr, total_iters=total, power=power)

    restarts = [(0.1, 10, 1, 0.0, 60), (0.1, 5, 2, 0.001, 160), (1.0, 3, 3, 0.1, 150)]
    for i, (lr, t_0, t_mult, eta_min, n) in enumerate(restarts):
        case(w, f"cosine_annealing_warm_restarts_{i}", lambda o: L.CosineAnnealingWarmRestarts(o, t_0, t_mult, eta_min),
             lr, n, base_lr=lr, t_0=t_0, t_mult=t_mult, eta_min=eta_min)

    # cycle_momentum=False: the optimizer (SGD without momentum) has none to cycle.
    cyclic = [(0.01, 0.1, 5, None, "triangular", 1.0, 60), (0.001, 0.01, 4, 6, "triangular2", 1.0, 80),
              (0.01, 0.1, 10, 5, "exp_range", 0.99, 100)]
    for i, (base, peak, up, down, mode, gamma, n) in enumerate(cyclic):
        make = lambda o: L.CyclicLR(o, base, peak, step_size_up=up, step_size_down=down, mode=mode, gamma=gamma,
                                    cycle_momentum=False)
        case(w, f"cyclic_lr_{i}", make, base, n, base_lr=base, max_lr=peak, step_size_up=up,
             step_size_down=down or 0, mode=["triangular", "triangular2", "exp_range"].index(mode), gamma=gamma)

    # The factor functions are repeated in tests/optim/scheduler_test.cpp by `factor_kind`.
    factors = [lambda t: 0.95, lambda t: 0.5 if t % 3 == 0 else 1.0]
    for i, (lr, kind, n) in enumerate([(0.1, 0, 80), (1.0, 1, 40)]):
        case(w, f"multiplicative_lr_{i}", lambda o: L.MultiplicativeLR(o, factors[kind]), lr, n,
             base_lr=lr, factor_kind=kind)

    # LambdaLR: the factor functions are repeated in tests/optim/scheduler_test.cpp by `factor_kind`.
    lambdas = [lambda t: 0.97 ** t, lambda t: 1.0 / (1 + t // 4)]
    for i, (lr, kind, n) in enumerate([(0.1, 0, 60), (0.5, 1, 40)]):
        case(w, f"lambda_lr_{i}", lambda o: L.LambdaLR(o, lambdas[kind]), lr, n, base_lr=lr, factor_kind=kind)

    # ChainedScheduler of multiplicative schedules; the C++ test builds the same ones.
    chained = [
        (0.1, lambda o: [L.ConstantLR(o, 0.5, 3), L.ExponentialLR(o, 0.9)], 40),
        (1.0, lambda o: [L.LinearLR(o, 0.2, 1.0, 5), L.StepLR(o, 4, 0.5), L.PolynomialLR(o, 30, 2.0)], 40),
    ]
    for i, (lr, subs, n) in enumerate(chained):
        case(w, f"chained_{i}", lambda o: L.ChainedScheduler(subs(o)), lr, n)
