"""Classification metrics from scikit-learn (tests/train/metric_test.cpp): precision, recall
and F-beta (beta 1 and 0.5) with each `average`, and the confusion matrix, of scores [N, C]
(the prediction is the argmax) against class indices [N]. Needs python3-sklearn.

Each case holds `scores`, `targets`, `confusion` [C, C] (rows: true class) and one scalar
per metric, named <metric>_<average> (precision, recall, f1, f0_5)."""
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
