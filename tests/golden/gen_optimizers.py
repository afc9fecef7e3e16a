"""Golden training runs of every optimizer (tests/optim/optimizer_test.cpp): a Linear(5, 3)
in f64 fitted to fixed data with a mean-squared error, 20 steps with torch.optim, the
weight and bias after steps 1, 2, 3, 5, 10 and 20 (RECORDED, 0-based). Lion, Adan and Muon
are not in torch 1.13: their updates are written out here from their papers' reference
formulations (Chen et al. 2023; Xie et al. 2022; Jordan et al. 2024, in f64 where the
reference iterates in bf16). NAdam is written out too: torch 1.13 multiplies mu twice into
mu_product_next, which torch 2 corrects; the case follows torch 2, with its decoupled weight
decay. The *_groups cases put the weight and the bias in parameter groups of their own."""
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


class NAdam(torch.optim.Optimizer):
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
                 decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled=decoupled_weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, wd, psi = group["lr"], group["weight_decay"], group["momentum_decay"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state.update(step=0, mu_product=1.0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                state["step"] += 1
                t = state["step"]
                g = p.grad
                if wd != 0:
                    if group["decoupled"]:
                        p.mul_(1 - lr * wd)
                    else:
                        g = g + wd * p
                mu = b1 * (1 - 0.5 * 0.96 ** (t * psi))
                mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
                state["mu_product"] *= mu
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v / (1 - b2 ** t)).sqrt() + group["eps"]
                p.addcdiv_(g, denom, value=-lr * (1 - mu) / (1 - state["mu_product"]))
                p.addcdiv_(m, denom, value=-lr * mu_next / (1 - state["mu_product"] * mu_next))


class Adan(torch.optim.Optimizer):
    def __init__(self, params, lr, betas=(0.98, 0.92, 0.99), eps=1e-8, weight_decay=0.0, no_prox=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, no_prox=no_prox))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2, b3 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                state = self.state[p]
                g = p.grad
                if not state:
                    state.update(step=0, m=torch.zeros_like(p), v=torch.zeros_like(p), n=torch.zeros_like(p),
                                 prev=g.clone())
                state["step"] += 1
                t = state["step"]
                diff = g - state["prev"]
                nesterov = g + b2 * diff
                state["m"].mul_(b1).add_(g, alpha=1 - b1)
                state["v"].mul_(b2).add_(diff, alpha=1 - b2)
                state["n"].mul_(b3).addcmul_(nesterov, nesterov, value=1 - b3)
                denom = state["n"].sqrt() / (1 - b3 ** t) ** 0.5 + group["eps"]
                update = (state["m"] / (1 - b1 ** t) + b2 * state["v"] / (1 - b2 ** t)) / denom
                if group["no_prox"]:
                    p.mul_(1 - lr * wd).add_(update, alpha=-lr)
                else:
                    p.add_(update, alpha=-lr).div_(1 + lr * wd)
                state["prev"] = g.clone()


def newton_schulz(g, steps):
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.T if g.shape[0] > g.shape[1] else g
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if g.shape[0] > g.shape[1] else x


class Muon(torch.optim.Optimizer):
    """Matrices: orthogonalized Nesterov momentum; vectors: the auxiliary AdamW update at
    adam_lr_scale times the rate."""

    def __init__(self, params, lr, momentum=0.95, weight_decay=0.0, nesterov=True, ns_steps=5,
                 adam_betas=(0.9, 0.95), adam_eps=1e-10, adam_lr_scale=0.015):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov,
                                      ns_steps=ns_steps, adam_betas=adam_betas, adam_eps=adam_eps,
                                      adam_lr_scale=adam_lr_scale))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd, beta = group["lr"], group["weight_decay"], group["momentum"]
            for p in group["params"]:
                state = self.state[p]
                g = p.grad
                if p.ndim >= 2:
                    buf = state.setdefault("momentum_buffer", torch.zeros_like(p))
                    buf.lerp_(g, 1 - beta)
                    update = (g.lerp(buf, beta) if group["nesterov"] else buf).reshape(len(p), -1)
                    update = newton_schulz(update, group["ns_steps"])
                    update = update * max(1, update.shape[0] / update.shape[1]) ** 0.5
                    p.mul_(1 - lr * wd).add_(update.reshape(p.shape), alpha=-lr)
                else:
                    b1, b2 = group["adam_betas"]
                    rate = lr * group["adam_lr_scale"]
                    if not state:
                        state.update(step=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                    state["step"] += 1
                    t = state["step"]
                    state["m"].lerp_(g, 1 - b1)
                    state["v"].lerp_(g.square(), 1 - b2)
                    update = (state["m"] / (1 - b1 ** t)) / ((state["v"] / (1 - b2 ** t)).sqrt() + group["adam_eps"])
                    p.mul_(1 - rate * wd).add_(update, alpha=-rate)


class DecoupledDecay:
    """torch 2's decoupled_weight_decay for RAdam, from torch 1.13's RAdam without decay: the
    parameters shrink by lr * weight_decay before each step, which does not read them."""

    def __init__(self, inner, lr, weight_decay):
        self.inner, self.lr, self.weight_decay = inner, lr, weight_decay

    def zero_grad(self):
        self.inner.zero_grad()

    @torch.no_grad()
    def step(self):
        for group in self.inner.param_groups:
            for p in group["params"]:
                p.mul_(1 - self.lr * self.weight_decay)
        self.inner.step()


def run(w, name, make, schedule=None, extra=None):
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
    if extra:
        extra(opt, weight, bias, tensors)
    w.case(name, **tensors)


def run_lbfgs(w, name, steps, **options):
    """L-BFGS on tanh(x W^T + b) fitted to y (not quadratic, so the line search has work): the
    weight, bias and the returned loss after each step, and the evaluations in all."""
    torch.manual_seed(1)
    weight = torch.randn(3, 5, dtype=f64) * 0.5
    bias = torch.randn(3, dtype=f64) * 0.5
    x = torch.randn(8, 5, dtype=f64)
    y = torch.randn(8, 3, dtype=f64) * 0.5
    tensors = {"weight": weight.clone(), "bias": bias.clone(), "x": x, "y": y}
    weight.requires_grad_(True)
    bias.requires_grad_(True)
    opt = torch.optim.LBFGS([weight, bias], **options)

    def closure():
        opt.zero_grad()
        loss = ((torch.tanh(x @ weight.T + bias) - y) ** 2).mean()
        loss.backward()
        return loss

    losses = []
    for step in range(steps):
        losses.append(float(opt.step(closure)))
        tensors[f"weight{step}"] = weight.detach().clone()
        tensors[f"bias{step}"] = bias.detach().clone()
    tensors["losses"] = torch.tensor(losses, dtype=f64)
    tensors["evaluations"] = torch.tensor([opt.state[opt._params[0]]["func_evals"]], dtype=torch.int64)
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
    # Appended cases (the ones above keep their inputs): amsgrad and maximize, then the
    # optimizers after Lion. ASGD averages from step 5 on: its case also holds the averages.
    run(w, "adam_amsgrad", lambda ps: O.Adam(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.01, amsgrad=True))
    run(w, "adamw_amsgrad_maximize", lambda ps: O.AdamW(ps, lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True))
    run(w, "sgd_maximize", lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01, maximize=True))
    run(w, "nadam", lambda ps: NAdam(ps, lr=0.01, weight_decay=0.01))
    run(w, "nadamw", lambda ps: NAdam(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=0.01,
                                      decoupled_weight_decay=True))
    run(w, "radam", lambda ps: O.RAdam(ps, lr=0.01, weight_decay=0.01))
    run(w, "radamw", lambda ps: DecoupledDecay(O.RAdam(ps, lr=0.01, betas=(0.8, 0.95)), 0.01, 0.1))
    run(w, "adamax", lambda ps: O.Adamax(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.01))
    run(w, "adadelta", lambda ps: O.Adadelta(ps, lr=1.0, rho=0.8, weight_decay=0.01))

    def averages(opt, weight, bias, tensors):
        tensors["weight_ax"] = opt.state[weight]["ax"].clone()
        tensors["bias_ax"] = opt.state[bias]["ax"].clone()

    # torch keeps ASGD's eta and mu as tensors of the default dtype: f64 here, not f32 rounding.
    torch.set_default_dtype(f64)
    run(w, "asgd", lambda ps: O.ASGD(ps, lr=0.05, lambd=1e-2, alpha=0.75, t0=5, weight_decay=0.01), extra=averages)
    torch.set_default_dtype(torch.float32)
    run(w, "rprop", lambda ps: O.Rprop(ps, lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-4, 0.05)))
    run(w, "adan", lambda ps: Adan(ps, lr=0.01, weight_decay=0.02))
    run(w, "adan_no_prox", lambda ps: Adan(ps, lr=0.01, betas=(0.9, 0.9, 0.95), weight_decay=0.02, no_prox=True))
    run(w, "muon", lambda ps: Muon(ps, lr=0.02, weight_decay=0.01))
    run(w, "muon_plain", lambda ps: Muon(ps, lr=0.02, momentum=0.9, nesterov=False, ns_steps=3,
                                         adam_lr_scale=0.5))
    # L-BFGS: a short history that fills and drops, then the strong Wolfe line search.
    run_lbfgs(w, "lbfgs", 4, lr=0.5, max_iter=5, history_size=3)
    run_lbfgs(w, "lbfgs_wolfe", 3, lr=1, max_iter=8, line_search_fn="strong_wolfe")
