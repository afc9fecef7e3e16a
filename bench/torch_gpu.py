"""PyTorch twins of bench/cuda_bench.cpp on the same GPU, run by scripts/gpu-check.sh:
GEMM in f32 (no TF32, as Kiln's f32), f16 and bf16 at n = 4096 and 8192, the device's copy
bandwidth (a clone of 1 GiB), -x and the fused expression gelu(x * a + b) * sigmoid(x) over
16384 x 16384 f32 in eager mode and under torch.compile, and the transformer encoder layer
(forward + backward) at both sizes of cuda_bench.cpp. Prints one JSON object per row:
{"name", "ms", and "tflops" or "gbs"}.

Usage: python torch_gpu.py [--no-compile]
"""
import json
import sys
import time

import torch


def timeit(fn, min_time=0.5, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    runs, start = 0, time.perf_counter()
    while True:
        fn()
        torch.cuda.synchronize()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time and runs >= 5:
            return elapsed / runs


def emit(name, seconds, **rates):
    print(json.dumps({"name": name, "ms": seconds * 1e3, **rates}), flush=True)


def main(argv):
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    cuda = torch.device("cuda")
    for dtype, tag in ((torch.float32, "f32"), (torch.float16, "f16"), (torch.bfloat16, "bf16")):
        for n in (4096, 8192):
            a = torch.randn(n, n, device=cuda).to(dtype)
            b = torch.randn(n, n, device=cuda).to(dtype)
            t = timeit(lambda: torch.matmul(a, b))
            emit(f"gemm_{tag}/{n}", t, tflops=2 * n ** 3 / t * 1e-12)
            del a, b

    rows, cols = 16384, 16384
    x = torch.randn(rows, cols, device=cuda)
    a = torch.randn(1, cols, device=cuda) * 0.1 + 1
    b = torch.randn(1, cols, device=cuda) * 0.1
    nbytes = rows * cols * 8
    t = timeit(lambda: x.clone())
    emit("copy_256M", t, gbs=nbytes / t * 1e-9)
    t = timeit(lambda: -x)
    emit("neg_256M", t, gbs=nbytes / t * 1e-9)

    def expr(x, a, b):
        return torch.nn.functional.gelu(x * a + b) * torch.sigmoid(x)

    t = timeit(lambda: expr(x, a, b))
    emit("fused_expr_256M", t, gbs=nbytes / t * 1e-9)
    del x

    for d, heads, ff, seq in ((256, 4, 1024, 128), (1024, 16, 4096, 512)):
        layer = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True).to(cuda)
        x = torch.randn(32, seq, d, device=cuda, requires_grad=True)

        def step():
            layer.zero_grad(set_to_none=True)
            x.grad = None
            layer(x).sum().backward()

        t = timeit(step)
        emit(f"transformer_encoder_layer_fwd_bwd/{d}/{heads}/{ff}/{seq}", t)
        del layer, x

    # Last: torch.compile takes the longest to start.
    x = torch.randn(rows, cols, device=cuda)
    if "--no-compile" not in argv:
        compiled = torch.compile(expr)
        compiled(x, a, b)
        t = timeit(lambda: compiled(x, a, b))
        emit("fused_expr_256M@compile", t, gbs=nbytes / t * 1e-9)


if __name__ == "__main__":
    main(sys.argv[1:])
