"""Classification metrics from scikit-learn (tests/train/metric_test.cpp): precision, recall
and F-beta (beta 1 and 0.5) with each `average`, and the confusion matrix, of scores [N, C]
(the prediction is the argmax) against class indices [N]. Needs python3-sklearn.

Each case holds `scores`, `targets`, `confusion` [C, C] (rows: true class) and one scalar
per metric, named <metric>_<average> (precision, recall, f1, f0_5).

The task metrics' cases (tests/train/task_metric_test.cpp), after those: regression (sklearn's
MAE, MSE, RMSE, R²), the Hamming loss, perplexity (torch's cross-entropy), AUROC and average
precision (sklearn, with tied scores), CER / WER (a plain Levenshtein below) and PSNR / SSIM
(explicit torch formulas below, SSIM as skimage's Gaussian-window definition)."""
import torch

try:
    from sklearn.metrics import confusion_matrix, fbeta_score, precision_score, recall_score
except ImportError as e:  # generate.py without arguments regenerates every family
    raise SystemExit("gen_metrics.py needs scikit-learn: apt-get install -y python3-sklearn") from e

f64, i64 = torch.float64, torch.int64


def case(w, name, scores, targets, averages):
    predicted = scores.argmax(1).numpy()
    truth = targets.numpy()
    classes = scores.shape[1]
    tensors = {"scores": scores, "targets": targets,
               "confusion": torch.tensor(confusion_matrix(truth, predicted, labels=list(range(classes))), dtype=i64)}
    for average in averages:
        tensors[f"precision_{average}"] = torch.tensor(
            precision_score(truth, predicted, average=average, zero_division=0), dtype=f64)
        tensors[f"recall_{average}"] = torch.tensor(
            recall_score(truth, predicted, average=average, zero_division=0), dtype=f64)
        tensors[f"f1_{average}"] = torch.tensor(
            fbeta_score(truth, predicted, beta=1.0, average=average, zero_division=0), dtype=f64)
        tensors[f"f0_5_{average}"] = torch.tensor(
            fbeta_score(truth, predicted, beta=0.5, average=average, zero_division=0), dtype=f64)
    w.case(name, **tensors)


def cases(w):
    g = torch.Generator().manual_seed(3)
    # Four classes, 64 examples, predictions right about half the time.
    targets = torch.randint(0, 4, (64,), generator=g)
    scores = torch.randn(64, 4, generator=g, dtype=f64)
    scores[torch.arange(64), targets] += 0.8
    case(w, "multiclass", scores, targets, ["macro", "micro", "weighted"])
    # Five score columns, but class 4 is in neither the targets nor the predictions (macro
    # leaves it out, as scikit-learn's labels do), and class 3 is never predicted (its
    # precision divides by zero: 0).
    targets = torch.randint(0, 4, (48,), generator=g)
    scores = torch.randn(48, 5, generator=g, dtype=f64)
    scores[torch.arange(48), targets] += 1.0
    scores[:, 3] = -10.0
    scores[:, 4] = -20.0
    case(w, "absent_classes", scores, targets, ["macro", "micro", "weighted"])
    # Two classes: class 1 is the positive one.
    targets = torch.randint(0, 2, (40,), generator=g)
    scores = torch.randn(40, 2, generator=g, dtype=f64)
    scores[torch.arange(40), targets] += 0.6
    case(w, "binary", scores, targets, ["binary", "macro", "micro", "weighted"])

    # ---- the task metrics of include/kiln/train/task_metric.hpp (tests/train/task_metric_test.cpp)
    task_cases(w)


def levenshtein(a, b):
    """The edit distance (insertions, deletions, substitutions) between two sequences."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            cur = min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
            prev, row[j] = row[j], cur
    return row[len(b)]


def code_points(sentences):
    """Sentences as one i64 tensor of Unicode code points, each sentence ended by 0."""
    return torch.tensor([c for s in sentences for c in [ord(ch) for ch in s] + [0]], dtype=i64)


def gaussian_ssim(x, y, data_range):
    """SSIM of images [N, C, H, W]: an 11x11 Gaussian window (sigma 1.5, normalized), the valid
    region only, population (co)variances, K1 = 0.01, K2 = 0.03; the mean over each image's
    channels and pixels, then over the images. Returns the per-image values [N]."""
    c = x.shape[1]
    r = torch.arange(11, dtype=f64) - 5
    g = torch.exp(-r * r / (2 * 1.5 * 1.5))
    g = g / g.sum()
    window = (g[:, None] * g[None, :]).expand(c, 1, 11, 11)

    def filt(t):
        return torch.nn.functional.conv2d(t, window, groups=c)

    mx, my = filt(x), filt(y)
    vx = filt(x * x) - mx * mx
    vy = filt(y * y) - my * my
    cxy = filt(x * y) - mx * my
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return s.mean(dim=(1, 2, 3))


def task_cases(w):
    from sklearn.metrics import (average_precision_score, hamming_loss, mean_absolute_error, mean_squared_error,
                                 r2_score, roc_auc_score)
    from sklearn.preprocessing import label_binarize
    g = torch.Generator().manual_seed(11)
    t = lambda v: torch.tensor(float(v), dtype=f64)
    # Regression: sklearn's mean_absolute_error, mean_squared_error (squared=False for RMSE:
    # the mean over the outputs of each output's RMSE) and r2_score, multioutput uniform_average.
    for name, shape in [("regression_1d", (50,)), ("regression_2d", (40, 3))]:
        targets = torch.randn(*shape, generator=g, dtype=f64) * 2 + 1
        output = targets + torch.randn(*shape, generator=g, dtype=f64) * 0.7
        if len(shape) == 2:
            output[:, 2] += 0.5  # a biased column
        y, p = targets.numpy(), output.numpy()
        w.case(name, output=output, targets=targets, mae=t(mean_absolute_error(y, p)),
               mse=t(mean_squared_error(y, p)), rmse=t(mean_squared_error(y, p, squared=False)),
               r2=t(r2_score(y, p)))
    # Multi-label: probabilities (threshold 0.5, and 0.3) and logits (sigmoid, then 0.5).
    targets = (torch.rand(30, 5, generator=g) < 0.4).to(i64)
    logits = torch.randn(30, 5, generator=g, dtype=f64) + (targets * 2 - 1).to(f64) * 0.6
    probs = torch.sigmoid(logits)
    y = targets.numpy()
    w.case("hamming", probs=probs, logits=logits, targets=targets,
           hamming=t(hamming_loss(y, (probs > 0.5).to(i64).numpy())),
           hamming_0_3=t(hamming_loss(y, (probs > 0.3).to(i64).numpy())))
    # Perplexity: exp of the mean cross-entropy over the tokens, ignore_index -100 left out.
    scores = torch.randn(3, 7, 6, generator=g, dtype=f64) * 1.5
    targets = torch.randint(0, 6, (3, 7), generator=g)
    targets[1, 5:] = -100
    ce = torch.nn.functional.cross_entropy(scores.reshape(-1, 6), targets.reshape(-1), ignore_index=-100)
    w.case("perplexity", scores=scores, targets=targets, perplexity=torch.exp(ce))
    # AUROC and average precision, binary: scores rounded to one decimal so that many tie.
    targets = torch.randint(0, 2, (60,), generator=g)
    scores = torch.round((torch.rand(60, generator=g, dtype=f64) + targets * 0.3) * 10) / 10
    w.case("ranking_binary", scores=scores, targets=targets, auroc=t(roc_auc_score(targets.numpy(), scores.numpy())),
           average_precision=t(average_precision_score(targets.numpy(), scores.numpy())))
    # Binary from two columns of logits: the probability of class 1 is softmax's second column.
    logits = torch.round(torch.randn(50, 2, generator=g, dtype=f64) * 4) / 4
    targets = torch.randint(0, 2, (50,), generator=g)
    logits[:, 1] += targets * 0.8
    p1 = torch.softmax(logits, 1)[:, 1].numpy()
    w.case("ranking_binary_logits", scores=logits, targets=targets, auroc=t(roc_auc_score(targets.numpy(), p1)),
           average_precision=t(average_precision_score(targets.numpy(), p1)))
    # Multi-class one-vs-rest, macro: probabilities with ties, and logits (softmax first).
    targets = torch.randint(0, 4, (80,), generator=g)
    logits = torch.randn(80, 4, generator=g, dtype=f64)
    logits[torch.arange(80), targets] += 1.0
    probs = torch.round(torch.softmax(logits, 1) * 20) / 20
    probs[:, 3] = 1 - probs[:, :3].sum(1)  # rows sum to 1 (scikit-learn checks), with ties
    y = targets.numpy()
    onehot = label_binarize(y, classes=[0, 1, 2, 3])
    w.case("ranking_multiclass", probs=probs, logits=logits, targets=targets,
           auroc=t(roc_auc_score(y, probs.numpy(), multi_class="ovr", average="macro")),
           average_precision=t(average_precision_score(onehot, probs.numpy(), average="macro")),
           auroc_logits=t(roc_auc_score(y, torch.softmax(logits, 1).numpy(), multi_class="ovr", average="macro")),
           average_precision_logits=t(average_precision_score(onehot, torch.softmax(logits, 1).numpy(),
                                                              average="macro")))
    # CER and WER: summed edits over summed reference lengths (characters: code points, spaces
    # included; words: split on whitespace).
    refs = ["the cat sat on the mat", "hello world", "naïve café déjà vu", "a b c d e f", "kiln fires clay"]
    preds = ["the cat sat on mat", "hallo  world there", "naive cafe deja vu", "a c b d e", "kiln fires  clay"]
    cer = sum(levenshtein(p, r) for p, r in zip(preds, refs)) / sum(len(r) for r in refs)
    wer = sum(levenshtein(p.split(), r.split()) for p, r in zip(preds, refs)) / sum(len(r.split()) for r in refs)
    w.case("error_rates", preds=code_points(preds), refs=code_points(refs), cer=t(cer), wer=t(wer))
    # Token ids [N, T] padded with 0 (not a token): the summed edits over the summed lengths.
    refs = torch.randint(1, 9, (6, 10), generator=g)
    preds = refs.clone()
    noise = torch.rand(6, 10, generator=g)
    preds[noise < 0.2] = torch.randint(1, 9, (6, 10), generator=g)[noise < 0.2]
    lengths = [10, 7, 9, 4, 10, 6]
    for i, n in enumerate(lengths):
        refs[i, n:] = 0
        preds[i, max(n - 1 + i % 3, 0):] = 0  # some shorter, some longer than the reference
    seq = lambda row: [v for v in row.tolist() if v != 0]
    rate = sum(levenshtein(seq(p), seq(r)) for p, r in zip(preds, refs)) / sum(len(seq(r)) for r in refs)
    w.case("token_error_rate", preds=preds, refs=refs, error_rate=t(rate))
    # PSNR (data_range 1: over every element of the set, as torchmetrics' default) and SSIM
    # (the mean over the images of each image's mean SSIM).
    x = torch.rand(4, 3, 16, 18, generator=g, dtype=f64)
    y = (x + torch.randn(4, 3, 16, 18, generator=g, dtype=f64) * 0.08).clamp(0, 1)
    mse = ((x - y) ** 2).mean()
    w.case("images", output=y, targets=x, psnr=10 * torch.log10(1.0 / mse), ssim=gaussian_ssim(y, x, 1.0).mean(),
           ssim_per_image=gaussian_ssim(y, x, 1.0))
    # data_range 255, one channel, the smallest size (11x11: one window).
    x = torch.round(torch.rand(2, 1, 11, 11, generator=g, dtype=f64) * 255)
    y = (x + torch.round(torch.randn(2, 1, 11, 11, generator=g, dtype=f64) * 20)).clamp(0, 255)
    mse = ((x - y) ** 2).mean()
    w.case("images_255", output=y, targets=x, psnr=10 * torch.log10(255.0 ** 2 / mse),
           ssim=gaussian_ssim(y, x, 255.0).mean())
