"""Golden losses from torch.nn.functional (tests/nn/loss_test.cpp): inputs, targets, the
loss with each reduction ("none", "mean", "sum") and the input gradient of the mean loss
("dx"; of sum(loss * r) for reduction none)."""
import torch
import torch.nn.functional as F

f64 = torch.float64


def loss_case(w, name, fn, x, *rest, reductions=("none", "mean", "sum"), **extra):
    tensors = {"x": x}
    for i, t in enumerate(rest):
        tensors[f"t{i}"] = t
    tensors.update(extra)
    for reduction in reductions:
        xi = x.clone().requires_grad_(True)
        out = fn(xi, *rest, reduction=reduction)
        tensors[f"loss_{reduction}"] = out.detach()
        (out.sum() if reduction != "none" else (out * torch.linspace(0.5, 1.5, out.numel(), dtype=f64).reshape(out.shape)).sum()).backward()
        tensors[f"dx_{reduction}"] = xi.grad
    w.case(name, **tensors)


def cases(w):
    randn = lambda *s: torch.randn(*s, dtype=f64)
    x, y = randn(3, 4), randn(3, 4)
    loss_case(w, "mse", F.mse_loss, x, y)
    loss_case(w, "l1", F.l1_loss, x, y)
    loss_case(w, "huber", lambda a, b, reduction: F.huber_loss(a, b, reduction=reduction, delta=0.7), x * 2, y)
    loss_case(w, "smooth_l1", lambda a, b, reduction: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.5), x * 2, y)
    logits = randn(5, 4)
    target = torch.tensor([1, 0, 3, 3, 2])
    target_ignored = torch.tensor([1, -100, 3, 3, 2])
    weight = torch.tensor([0.5, 1.0, 2.0, 1.5], dtype=f64)
    loss_case(w, "cross_entropy", F.cross_entropy, logits, target)
    loss_case(w, "cross_entropy_weighted", lambda a, t, reduction: F.cross_entropy(a, t, weight=weight, ignore_index=-100,
                                                                                    reduction=reduction),
              logits, target_ignored, weight=weight)
    loss_case(w, "cross_entropy_smoothed", lambda a, t, reduction: F.cross_entropy(a, t, weight=weight, label_smoothing=0.2,
                                                                                    reduction=reduction),
              logits, target_ignored, weight=weight)
    loss_case(w, "cross_entropy_smoothed_unweighted",
              lambda a, t, reduction: F.cross_entropy(a, t, label_smoothing=0.1, reduction=reduction), logits, target_ignored)
    probs = torch.softmax(randn(5, 4), 1)
    loss_case(w, "cross_entropy_probs", lambda a, t, reduction: F.cross_entropy(a, t, label_smoothing=0.1, reduction=reduction),
              logits, probs)
    loss_case(w, "nll", lambda a, t, reduction: F.nll_loss(a, t, weight=weight, reduction=reduction),
              torch.log_softmax(logits, 1), target_ignored, weight=weight)
    p = torch.sigmoid(randn(3, 4))
    t = torch.rand(3, 4, dtype=f64)
    loss_case(w, "bce", F.binary_cross_entropy, p, t)
    pos_weight = torch.tensor([0.5, 1.0, 2.0, 3.0], dtype=f64)
    loss_case(w, "bce_with_logits", lambda a, b, reduction: F.binary_cross_entropy_with_logits(a, b, pos_weight=pos_weight,
                                                                                              reduction=reduction),
              randn(3, 4) * 3, t, pos_weight=pos_weight)
    logq = torch.log_softmax(randn(3, 4), 1)
    target_p = torch.softmax(randn(3, 4), 1)
    target_p[0, 1] = 0.0
    loss_case(w, "kl_div", F.kl_div, logq, target_p, reductions=("none", "mean", "sum", "batchmean"))
    loss_case(w, "kl_div_log_target", lambda a, b, reduction: F.kl_div(a, b, reduction=reduction, log_target=True),
              logq, torch.log_softmax(randn(3, 4), 1))
    x1, x2 = randn(4, 3), randn(4, 3)
    labels = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=f64)
    loss_case(w, "cosine_embedding", lambda a, b, y, reduction: F.cosine_embedding_loss(a, b, y, margin=0.1, reduction=reduction),
              x1, x2, labels)

    # ---- margin, Poisson, Gaussian and focal losses (appended: the cases above keep their inputs)
    x, y = randn(3, 4), randn(3, 4)
    signs = torch.tensor([[1.0, -1.0, 1.0, 1.0], [-1.0, -1.0, 1.0, -1.0], [1.0, 1.0, -1.0, 1.0]], dtype=f64)
    loss_case(w, "soft_margin", F.soft_margin_loss, x * 2, signs)
    loss_case(w, "margin_ranking", lambda a, b, t, reduction: F.margin_ranking_loss(a, b, t, margin=0.3,
                                                                                      reduction=reduction),
              x, y, signs)
    hinge_targets = signs.clone()
    hinge_targets[0, 0] = 0.5  # neither 1 nor -1: both terms
    loss_case(w, "hinge_embedding", lambda a, t, reduction: F.hinge_embedding_loss(a, t, margin=1.5, reduction=reduction),
              x, hinge_targets)
    counts = torch.tensor([[0.0, 1.0, 2.0, 5.0], [3.0, 0.0, 1.0, 7.0], [2.0, 2.0, 4.0, 0.0]], dtype=f64)
    loss_case(w, "poisson_nll", F.poisson_nll_loss, x * 0.5, counts)
    loss_case(w, "poisson_nll_rate_full", lambda a, t, reduction: F.poisson_nll_loss(a, t, log_input=False, full=True,
                                                                                     reduction=reduction),
              x.abs() + 0.1, counts)
    var = randn(3, 4).abs() + 0.05
    var[0, 0] = 1e-9  # below eps: clamped in the value, its gradient passes
    loss_case(w, "gaussian_nll", lambda a, t, v, reduction: F.gaussian_nll_loss(a, t, v, reduction=reduction),
              x, y, var)
    loss_case(w, "gaussian_nll_full", lambda a, t, v, reduction: F.gaussian_nll_loss(a, t, v, full=True, eps=1e-3,
                                                                                    reduction=reduction),
              x, y, var)
    a, pos, neg = randn(4, 5), randn(4, 5), randn(4, 5)
    loss_case(w, "triplet_margin", lambda q, p_, n_, reduction: F.triplet_margin_loss(q, p_, n_, margin=2.0,
                                                                                        reduction=reduction),
              a, pos, neg)
    loss_case(w, "triplet_margin_p1_swap", lambda q, p_, n_, reduction: F.triplet_margin_loss(q, p_, n_, margin=1.0, p=1,
                                                                                                swap=True,
                                                                                                reduction=reduction),
              a, pos, neg)
    labels = (torch.rand(3, 4, dtype=f64) > 0.5).to(f64)
    label_weight = torch.tensor([0.5, 1.0, 2.0, 1.5], dtype=f64)
    loss_case(w, "multilabel_soft_margin", lambda q, t, reduction: F.multilabel_soft_margin_loss(q, t, weight=label_weight,
                                                                                                 reduction=reduction),
              x * 2, labels)

    def focal(q, t, reduction, alpha=0.25, gamma=2.0):
        # torchvision.ops.sigmoid_focal_loss, written out.
        p = torch.sigmoid(q)
        ce = F.binary_cross_entropy_with_logits(q, t, reduction="none")
        p_t = p * t + (1 - p) * (1 - t)
        loss = ce * ((1 - p_t) ** gamma)
        if alpha >= 0:
            loss = (alpha * t + (1 - alpha) * (1 - t)) * loss
        return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]
    loss_case(w, "sigmoid_focal", focal, x * 2, labels)
    loss_case(w, "sigmoid_focal_no_alpha", lambda q, t, reduction: focal(q, t, reduction, alpha=-1.0, gamma=1.5),
              x * 2, labels)

    # ---- multi-class and multi-label margin losses (appended)
    scores = randn(4, 5)
    classes = torch.tensor([2, 0, 4, 2])
    class_weight = torch.tensor([0.5, 1.0, 2.0, 1.5, 0.8], dtype=f64)
    loss_case(w, "multi_margin", F.multi_margin_loss, scores, classes)
    loss_case(w, "multi_margin_p2_weighted", lambda q, t, reduction: F.multi_margin_loss(q, t, p=2, margin=0.7,
                                                                                         weight=class_weight,
                                                                                         reduction=reduction),
              scores, classes, weight=class_weight)
    # Rows list their classes up to the first -1; what follows it is ignored.
    label_lists = torch.tensor([[3, 0, -1, 1, 2], [1, -1, -1, -1, -1], [0, 1, 2, 3, 4], [-1, 2, 0, 0, 0]])
    loss_case(w, "multilabel_margin", F.multilabel_margin_loss, scores, label_lists)

    # ---- CTC (appended): x are logits [T, N, C] and the loss takes their log_softmax, where
    # torch's gradient (the true one plus exp(log_probs)) and the true one agree.
    def ctc(targets, input_lengths, target_lengths, **options):
        def fn(q, t, reduction):
            return F.ctc_loss(q.log_softmax(2), t, input_lengths, target_lengths, reduction=reduction, **options)
        return fn
    logits = randn(6, 3, 5)
    padded = torch.tensor([[1, 2, 2, 3], [4, 1, 0, 0], [2, 0, 0, 0]])
    lengths = dict(input_lengths=torch.tensor([6, 5, 3]), target_lengths=torch.tensor([4, 2, 1]))
    loss_case(w, "ctc_padded", ctc(padded, **lengths), logits, padded, **lengths)
    # Blank last, concatenated targets, an empty target, and [1, 1, 2] in 3 frames (it needs 4:
    # inf, which zero_infinity turns to 0).
    concatenated = torch.tensor([1, 1, 2, 3])
    lengths = dict(input_lengths=torch.tensor([3, 6, 4]), target_lengths=torch.tensor([3, 1, 0]))
    loss_case(w, "ctc_concatenated_zero_infinity", ctc(concatenated, blank=4, zero_infinity=True, **lengths), logits,
              concatenated, **lengths)
