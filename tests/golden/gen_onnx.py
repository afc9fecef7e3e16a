#!/usr/bin/python3
"""Writes the ONNX model fixtures of tests/onnx into tests/golden/onnx/.

Usage: /usr/bin/python3 tests/golden/gen_onnx.py   (Debian's python3-torch and python3-onnx;
also run by generate.py). Each model is exported by torch.onnx.export with random weights
(seeded) and a dynamic batch dim, in the layout of ONNX's own node tests, so that
kiln_onnx_node_tests runs them:

  <name>/model.onnx
  <name>/test_data_set_0/input_0.pb, output_0.pb   batch 2
  <name>/test_data_set_1/input_0.pb, output_0.pb   batch 3 (the dynamic batch size)

The models are small versions of what users export: an MLP, the Fashion-MNIST CNN's
structure at a smaller width, a 2-layer LSTM, a bidirectional GRU and a 2-layer transformer
encoder (opset 17, with LayerNormalization). fashion_cnn is that CNN trained for one epoch on
Fashion-MNIST (Debian's dataset-fashion-mnist), which examples/onnx_inference classifies
with; its test sets are test-set images.

torchvision's resnet18 and mobilenet_v2 are too large to commit with their weights (45 and
14 MB), so their weights follow a formula that the test computes again: each float
initializer of at least 1 KiB holds, at element i, u(salt + i) * scale, where
u(i) = ((i * 2654435761 + 12345) mod 2^32) / 2^31 - 1, salt is 1000003 times the tensor's
position among the module's parameters and buffers (no two tensors are equal), and scale is sqrt(3 / fan_in) for
weights (rank >= 2), 0.1 for vectors, which get 1 added (batch-norm scales and variances
stay positive). The model file keeps them as external data in weights.bin, which is not
committed: weights.txt lists each one's offset, count, scale, offset added and salt, and
tests/onnx/torchvision_test.cpp writes weights.bin from it. The input follows the same
formula with scale 1.
"""
import gzip
import math
import pathlib
import shutil

import numpy
import onnx
import onnx.external_data_helper
import onnx.numpy_helper
import torch

OUT = pathlib.Path(__file__).resolve().parent / "onnx"
TORCHVISION = pathlib.Path(__file__).resolve().parent / "onnx_torchvision"


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))

    def forward(self, x):
        return torch.log_softmax(self.net(x), dim=1)


class Cnn(torch.nn.Module):
    """examples/fashion_mnist's CNN at a quarter of its width."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc1 = torch.nn.Linear(16 * 7 * 7, 32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


class Lstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


class Gru(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(8, 12, bidirectional=True, batch_first=True)

    def forward(self, x):
        y, h = self.gru(x)
        return y


class Transformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


def idx(name):
    """An IDX file of Debian's dataset-fashion-mnist as a uint8 tensor."""
    raw = gzip.open(f"/usr/share/datasets/fashion-mnist/{name}-ubyte.gz", "rb").read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(raw[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def trained_cnn():
    """Cnn trained for one epoch (batch 64, Adam 1e-3), with examples/fashion_mnist's input
    normalization: pixels / 255, minus 0.2860, over 0.3530."""
    images = (idx("train-images-idx3") .float() / 255 - 0.2860) / 0.3530
    labels = idx("train-labels-idx1").long()
    model = Cnn()
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    order = torch.randperm(len(images))
    for start in range(0, len(images), 64):
        batch = order[start:start + 64]
        loss = torch.nn.functional.cross_entropy(model(images[batch].unsqueeze(1)), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    test = (idx("t10k-images-idx3").float() / 255 - 0.2860) / 0.3530
    model.eval()
    with torch.no_grad():
        accuracy = (model(test.unsqueeze(1)).argmax(1) == idx("t10k-labels-idx1").long()).float().mean()
    print(f"fashion_cnn: test accuracy {accuracy:.4f}")
    return model, test.unsqueeze(1)


def formula(count, scale, add, salt=0):
    """u(salt + i) * scale + add for i < count, in float64, then rounded to float32 (as the C++
    test does)."""
    i = numpy.arange(salt, salt + count, dtype=numpy.uint64)
    u = ((i * numpy.uint64(2654435761) + numpy.uint64(12345)) & numpy.uint64(0xFFFFFFFF)).astype(numpy.float64)
    return (u / 2.0**31 - 1.0) * scale + add


def formula_weights(tensor):
    if tensor.dim() >= 2:
        scale, add = math.sqrt(3.0 / (tensor.numel() // tensor.shape[0])), 0.0
    else:
        scale, add = 0.1, 1.0
    return scale, add


def write_torchvision_case(name, model):
    """`model` with formula weights, exported with its weights as external data (not committed)."""
    folder = TORCHVISION / name
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "test_data_set_0").mkdir(parents=True)
    model.eval()
    salts = {}
    with torch.no_grad():
        # Each tensor's own salt, so that no two are equal (the exporter would merge them).
        for salt, t in enumerate(list(model.parameters()) + [b for b in model.buffers() if b.is_floating_point()]):
            scale, add = formula_weights(t)
            values = formula(t.numel(), scale, add, salt * 1000003).astype(numpy.float32)
            t.copy_(torch.from_numpy(values).reshape(t.shape))
            salts[values.tobytes()[:64]] = salt * 1000003
    x = torch.from_numpy(formula(3 * 224 * 224, 1.0, 0.0).astype(numpy.float32)).reshape(1, 3, 224, 224)
    path = folder / "model.onnx"
    # PRESERVE keeps batch norms apart from the convolutions (EVAL would fold them, changing the weights).
    torch.onnx.export(model, (x,), str(path), opset_version=13, input_names=["input"], output_names=["output"],
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    m = onnx.load(str(path))
    onnx.external_data_helper.convert_model_to_external_data(m, location="weights.bin", size_threshold=1024)
    onnx.save(m, str(path))
    m = onnx.load(str(path), load_external_data=False)
    lines = []
    blob = (folder / "weights.bin").read_bytes()
    for init in m.graph.initializer:
        if init.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in init.external_data}
        assert init.data_type == onnx.TensorProto.FLOAT, init.name
        dims = list(init.dims)
        count = math.prod(dims)
        scale, add = formula_weights(torch.empty(dims))
        offset = int(info.get("offset", 0))
        got = numpy.frombuffer(blob[offset:offset + 4 * count], dtype=numpy.float32)
        salt = salts[got.tobytes()[:64]]
        want = formula(count, scale, add, salt).astype(numpy.float32)
        assert numpy.array_equal(got, want), f"{name}: {init.name} does not follow the formula"
        lines.append(f"{offset} {count} {scale!r} {add!r} {salt}")
    (folder / "weights.txt").write_text("\n".join(lines) + "\n")
    (folder / "weights.bin").unlink()
    with torch.no_grad():
        y = model(x)
    (folder / "test_data_set_0" / "output_0.pb").write_bytes(
        onnx.numpy_helper.from_array(y.numpy(), "output").SerializeToString())
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"{name}: opset 13, {len(lines)} external tensors, {size} bytes committed")


def write_case(name, model, inputs, opset):
    """Exports `model` with inputs[0]'s batch dim dynamic, and one test set per input."""
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    model.eval()
    torch.onnx.export(model, (inputs[0],), str(folder / "model.onnx"), opset_version=opset,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    with torch.no_grad():
        for i, x in enumerate(inputs):
            data = folder / f"test_data_set_{i}"
            data.mkdir()
            y = model(x)
            (data / "input_0.pb").write_bytes(onnx.numpy_helper.from_array(x.numpy(), "input").SerializeToString())
            (data / "output_0.pb").write_bytes(onnx.numpy_helper.from_array(y.numpy(), "output").SerializeToString())
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"{name}: opset {opset}, {size} bytes")


def main():
    torch.manual_seed(0)
    write_case("mlp", Mlp(), [torch.randn(2, 20), torch.randn(3, 20)], 13)
    write_case("cnn", Cnn(), [torch.randn(2, 1, 28, 28), torch.randn(3, 1, 28, 28)], 13)
    write_case("lstm", Lstm(), [torch.randn(2, 5, 8), torch.randn(3, 5, 8)], 13)
    write_case("gru", Gru(), [torch.randn(2, 6, 8), torch.randn(3, 6, 8)], 13)
    write_case("transformer", Transformer(), [torch.randn(2, 7, 16), torch.randn(3, 7, 16)], 17)
    model, test = trained_cnn()
    write_case("fashion_cnn", model, [test[:2], test[2:5]], 13)
    # The same weights on every run: the formula, not the seed.
    import torchvision  # here, so that bench/embedded_compare.py imports Cnn without it
    write_torchvision_case("resnet18", torchvision.models.resnet18())
    write_torchvision_case("mobilenet_v2", torchvision.models.mobilenet_v2())


if __name__ == "__main__":
    main()
