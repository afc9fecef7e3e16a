"""PyTorch twin of examples/fashion_mnist: the same CNN trained for one epoch on
Fashion-MNIST (60k images, batch 64, shuffled, AdamW at 1e-3 on a cosine over the epoch),
then tested on the 10k test images. Run by `bench/compare_torch.py --epoch` with each
available PyTorch; prints one JSON object with the training epoch's seconds and the test
accuracy.

PyTorch is given its best configuration for this size: the whole set decoded and
normalized in memory once (not timed, as Kiln's reader decodes before its epoch starts),
batches sliced from it by a shuffled index (no DataLoader workers, which only add
overhead at this size), 2 threads, fused AdamW where the version has it.

On a GPU (--device cuda) the data set lives on the device and the timed epoch ends with a
synchronize.

Usage: python torch_fashion_epoch.py [--compile] [--data DIR] [--device cpu|cuda]
"""
import gzip
import json
import math
import pathlib
import sys
import time

import numpy as np
import torch

torch.set_num_threads(2)
torch.manual_seed(0)


def read_idx(path):
    data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(directory, prefix):
    def find(name):
        for candidate in (directory / name, directory / (name + ".gz")):
            if candidate.exists():
                return candidate
        raise FileNotFoundError(directory / name)

    images = read_idx(find(f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find(f"{prefix}-labels-idx1-ubyte"))
    x = (torch.from_numpy(images.astype(np.float32) / 255.0) - 0.2860) / 0.3530
    return x.unsqueeze(1).contiguous(), torch.from_numpy(labels.astype(np.int64))


def main(argv):
    compile_mode = "--compile" in argv
    directory = pathlib.Path(argv[argv.index("--data") + 1] if "--data" in argv
                             else "/usr/share/datasets/fashion-mnist")
    if compile_mode and not hasattr(torch, "compile"):
        print(f"torch {torch.__version__} has no torch.compile; eager only", file=sys.stderr)
        print(json.dumps({"torch": torch.__version__, "compile": True}))
        return
    device = torch.device(argv[argv.index("--device") + 1] if "--device" in argv else "cpu")
    train_x, train_y = (t.to(device) for t in load(directory, "train"))
    test_x, test_y = (t.to(device) for t in load(directory, "t10k"))

    model = torch.nn.Sequential(torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)).to(device)
    forward = torch.compile(model) if compile_mode else model
    try:
        adamw = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    except (TypeError, RuntimeError):  # torch 1.x, or no fused CPU kernel
        adamw = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = 64
    steps = math.ceil(len(train_x) / batch)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(adamw, T_max=steps)
    if compile_mode:  # compile outside the timed epoch: one step on a batch of each size it will see
        for n in (batch, len(train_x) % batch or batch):
            torch.nn.functional.cross_entropy(forward(train_x[:n]), train_y[:n]).backward()
        adamw.zero_grad(set_to_none=True)

    order = torch.randperm(len(train_x), device=device)
    start = time.perf_counter()
    model.train()
    for i in range(steps):
        index = order[i * batch:(i + 1) * batch]
        adamw.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(forward(train_x[index]), train_y[index])
        loss.backward()
        adamw.step()
        schedule.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    epoch_s = time.perf_counter() - start

    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(test_x), 500):
            correct += (forward(test_x[i:i + 500]).argmax(1) == test_y[i:i + 500]).sum().item()
    print(json.dumps({"torch": torch.__version__, "compile": compile_mode, "epoch_s": epoch_s,
                      "accuracy": correct / len(test_x)}))


if __name__ == "__main__":
    main(sys.argv[1:])
