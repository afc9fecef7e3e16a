#!/usr/bin/env python3
"""Single-image latency and peak memory of the embedded classifier beside onnxruntime,
PyTorch eager and torch.compile, on the same model (tests/golden/onnx/fashion_cnn/model.onnx) and machine.

  python3 bench/embedded_compare.py --build build --python /opt/kiln-bench-venv/bin/python

Kiln: build/examples/embedded_classifier (static, one thread, weights compiled in), its
median over --repeat classifications of one image, and the peak RSS of a process that
classifies 20 images. The peers run in a Python of their own (--python: a virtual
environment with torch, onnxruntime and onnx from PyPI), each at its best of one thread and
all threads, their peak RSS read from the same kind of process. PyTorch runs the model's
module, rebuilt from the ONNX file's weights (no_grad), eager and through torch.compile
(compiled before the timing, for the batch of 20 and for one image; the table says how
long that took). Prints a Markdown table.
"""
import argparse
import gzip
import pathlib
import re
import resource
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests/golden/onnx/fashion_cnn/model.onnx"
IMAGES = pathlib.Path("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")

PEER = r'''
import resource, statistics, sys, time
import numpy
kind, model_path, images_path, repeat, threads, golden = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
raw = numpy.fromfile(images_path, dtype=numpy.uint8).reshape(-1, 1, 28, 28)
x = ((raw.astype(numpy.float32) / 255 - 0.2860) / 0.3530)
if kind == "onnxruntime":
    import onnxruntime
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    run = lambda batch: session.run(None, {"input": batch})[0]
else:
    import onnx, onnx.numpy_helper, torch
    if threads:
        torch.set_num_threads(threads)
    weights = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in onnx.load(model_path).graph.initializer}
    sys.path.insert(0, golden)
    from gen_onnx import Cnn  # the module that tests/golden/gen_onnx.py trained and exported
    model = Cnn().eval()
    model.load_state_dict(weights)
    if kind == "torch.compile":
        model = torch.compile(model)
    def run(batch):
        with torch.no_grad():
            return model(torch.from_numpy(batch)).numpy()
start = time.perf_counter()
labels = run(x).argmax(1)
run(x[:1].copy())  # torch.compile compiles once per input shape
first_s = time.perf_counter() - start
one = x[:1].copy()
for _ in range(50):
    run(one)
times = []
for _ in range(repeat):
    start = time.perf_counter()
    run(one)
    times.append((time.perf_counter() - start) * 1e6)
print("labels", " ".join(map(str, labels)))
print("latency_us", statistics.median(times))
print("maxrss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print("first_s", first_s)
'''


def kiln(build, images, repeat):
    binary = build / "examples/embedded_classifier"
    out = subprocess.run([str(binary), str(images), "--repeat", str(repeat)], capture_output=True, text=True, check=True)
    labels = [line.split()[0] for line in out.stdout.splitlines()]
    latency = float(re.search(r": ([0-9.]+) us", out.stderr).group(1))
    timed = subprocess.run(["/usr/bin/time", "-f", "%M", str(binary), str(images)], capture_output=True, text=True,
                           check=True)
    return labels, latency, int(timed.stderr.strip().splitlines()[-1]), binary.stat().st_size


def peer(python, kind, images, repeat, threads):
    out = subprocess.run([python, "-c", PEER, kind, str(MODEL), str(images), str(repeat), str(threads),
                          str(ROOT / "tests/golden")],
                         capture_output=True, text=True, check=True).stdout
    values = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return values["labels"].split(), float(values["latency_us"]), int(values["maxrss_kb"]), float(values["first_s"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", type=pathlib.Path)
    parser.add_argument("--python", default="/opt/kiln-bench-venv/bin/python")
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    raw = gzip.open(IMAGES, "rb").read()[16:16 + 20 * 784]
    with tempfile.TemporaryDirectory() as folder:
        images = pathlib.Path(folder) / "images.raw"
        images.write_bytes(raw)
        labels, latency, rss, size = kiln(args.build, images, args.repeat)
        rows = [("Kiln embedded_classifier (static, 1 thread)", latency, rss)]
        for kind in ("onnxruntime", "pytorch", "torch.compile"):
            best = None
            for threads in (1, 0):
                peer_labels, peer_latency, peer_rss, first_s = peer(args.python, kind, images, args.repeat, threads)
                if peer_labels != labels:
                    sys.exit(f"{kind} predicts {peer_labels}, Kiln {labels}")
                name = f"{kind} ({'1 thread' if threads else 'all threads'}"
                name += f"; compiled in {first_s:.1f} s)" if kind == "torch.compile" else ")"
                if best is None or peer_latency < best[1]:
                    best = (name, peer_latency, peer_rss)
            rows.append(best)
    flags = open("/proc/cpuinfo").read()
    arch = "the compiler's default"
    for line in (args.build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith("KILN_EMBEDDED_ARCH:") and line.split("=", 1)[1]:
            arch = "-march=" + line.split("=", 1)[1]
    print(f"CPU: {'AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'no AVX2'}; "
          f"Kiln binary {size / 1e6:.2f} MB, {arch}; the same 20 predictions from all four\n")
    print("| runtime | one image (µs, median) | peak RSS (MB) |\n|---|---:|---:|")
    for name, latency, rss in rows:
        print(f"| {name} | {latency:.1f} | {rss / 1024:.1f} |")


if __name__ == "__main__":
    main()
