"""PyTorch twins of bench/ops_bench.cpp's workloads. Run by bench/compare_torch.py with
each available PyTorch; prints one JSON object: {workload name: milliseconds}.

Usage: python torch_workloads.py [--compile] [--filter REGEX]
       python torch_workloads.py [--compile] --only NAME

--only builds and times that one workload (one of ONLY: the training steps) and nothing else,
so that the process's peak RSS is the workload's (compare_torch.py --memory).
"""
import json
import re
import sys
import time

import torch

torch.set_num_threads(2)
torch.manual_seed(0)


def timeit(fn, min_time=1.0, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < 5:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3  # median, ms


def workloads(compile_mode):
    maybe_compile = (lambda f: torch.compile(f)) if compile_mode else (lambda f: f)
    w = {}
    for n in (256, 512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        mm = maybe_compile(lambda a=a, b=b: torch.matmul(a, b))
        w[f"matmul_f32/{n}"] = mm
    for batch, m, k, n in ((256, 17, 33, 9), (64, 64, 64, 32)):
        a, b = torch.randn(batch, m, k), torch.randn(batch, k, n)
        w[f"batched_matmul_f32/b:{batch}/m:{m}/k:{k}/n:{n}"] = maybe_compile(lambda a=a, b=b: torch.matmul(a, b))
    e = 1 << 24
    a, b = torch.randn(e), torch.randn(e)
    w["add_16M"] = maybe_compile(lambda: a + b)
    w["gelu_16M"] = maybe_compile(lambda: torch.nn.functional.gelu(a))
    w["exp_16M"] = maybe_compile(lambda: torch.exp(a))
    w["sum_16M"] = maybe_compile(lambda: a.sum())
    # bench/fusion_bench.cpp's fused expression: gelu(x * a + b) * sigmoid(x), a and b per column.
    fx, fa, fb = torch.randn(4096, 4096), torch.randn(1, 4096) * 0.1 + 1, torch.randn(1, 4096) * 0.1
    w["fused_expr_16M"] = maybe_compile(lambda: torch.nn.functional.gelu(fx * fa + fb) * torch.sigmoid(fx))
    sx = torch.randn(4096, 1024)
    w["softmax_4096x1024"] = maybe_compile(lambda: torch.softmax(sx, 1))
    w["layer_norm_4096x1024"] = maybe_compile(lambda: torch.nn.functional.layer_norm(sx, (1024,), eps=1e-5))
    rw = torch.randn(1024)
    w["rms_norm_4096x1024"] = maybe_compile(lambda: sx * torch.rsqrt((sx * sx).mean(1, keepdim=True) + 1e-6) * rw)
    # One op on a tiny tensor: the per-op overhead (bench/ops_bench.cpp's op_overhead).
    tx, tdy = torch.randn(1024), torch.randn(1024)
    ty = torch.tanh(tx)
    w["op_overhead_1k/exp"] = maybe_compile(lambda: torch.exp(tx))
    w["op_overhead_1k/mul"] = maybe_compile(lambda: tx * ty)
    w["op_overhead_1k/tanh_backward"] = maybe_compile(lambda: torch.ops.aten.tanh_backward(tdy, ty))
    m = torch.randn(4096, 4096)
    w["sum_dim_4096x4096/0"] = maybe_compile(lambda: m.sum(0, keepdim=True))
    w["sum_dim_4096x4096/1"] = maybe_compile(lambda: m.sum(1, keepdim=True))

    x = torch.randn(64, 32, 28, 28, requires_grad=True)
    cw = (torch.randn(64, 32, 3, 3) * 0.1).requires_grad_()
    cb = (torch.randn(64) * 0.1).requires_grad_()
    dy = torch.randn(64, 64, 28, 28)
    conv = maybe_compile(lambda: torch.nn.functional.conv2d(x, cw, cb, padding=1))

    def conv_train():
        x.grad = cw.grad = cb.grad = None
        conv().backward(dy)

    w["conv2d_fwd_bwd_64x32x28x28_k3"] = conv_train

    def conv_forward():
        with torch.no_grad():
            return conv()

    w["conv2d_fwd_64x32x28x28_k3"] = conv_forward

    px = torch.randn(64, 32, 28, 28, requires_grad=True)
    pdy = torch.randn(64, 32, 14, 14)
    pool = maybe_compile(lambda: torch.nn.functional.max_pool2d(px, 2))

    def pool_train():
        px.grad = None
        pool().backward(pdy)

    w["max_pool2d_fwd_bwd_64x32x28x28_k2"] = pool_train

    w["mlp_train_step_784_1024_1024_10_b256"] = [mlp_step(compile_mode, fused) for fused in (False, True)
                                                 if fused is False or adam_has_fused()]
    w["transformer_encoder_layer_fwd_bwd_d256_h4_ff1024_s128_b32"] = transformer_step(compile_mode)
    # bench/transformer_bench.cpp's attention rows: q, k, v [1, 8, seq, 64], no mask; forward,
    # and forward + backward at 512 and 2048.
    for seq in (128, 512, 2048):
        q, k, v = (torch.randn(1, 8, seq, 64) for _ in range(3))
        sdpa = maybe_compile(lambda q=q, k=k, v=v: torch.nn.functional.scaled_dot_product_attention(q, k, v))

        def sdpa_forward(sdpa=sdpa):
            with torch.no_grad():
                return sdpa()

        w[f"sdpa_fwd_n1_h8_d64/{seq}"] = sdpa_forward
        # Kiln's @composition rows beside the same composition here: q kᵀ scaled, softmax, @ v.
        composed = maybe_compile(lambda q=q, k=k, v=v: torch.softmax(q @ k.transpose(-2, -1) * 0.125, -1) @ v)

        def composed_forward(composed=composed):
            with torch.no_grad():
                return composed()

        w[f"sdpa_fwd_n1_h8_d64/{seq}@composition"] = composed_forward
        if seq == 128:
            continue
        gq, gk, gv = (t.clone().requires_grad_() for t in (q, k, v))
        sdpa_grad = maybe_compile(lambda gq=gq, gk=gk, gv=gv: torch.nn.functional.scaled_dot_product_attention(gq, gk, gv))

        def sdpa_forward_backward(sdpa_grad=sdpa_grad, gq=gq, gk=gk, gv=gv):
            gq.grad = gk.grad = gv.grad = None
            sdpa_grad().sum().backward()

        w[f"sdpa_fwd_bwd_n1_h8_d64/{seq}"] = sdpa_forward_backward
        composed_grad = maybe_compile(
            lambda gq=gq, gk=gk, gv=gv: torch.softmax(gq @ gk.transpose(-2, -1) * 0.125, -1) @ gv)

        def composed_forward_backward(composed_grad=composed_grad, gq=gq, gk=gk, gv=gv):
            gq.grad = gk.grad = gv.grad = None
            composed_grad().sum().backward()

        w[f"sdpa_fwd_bwd_n1_h8_d64/{seq}@composition"] = composed_forward_backward
    w["cnn_train_step_fashion_b64"] = [cnn_step(compile_mode, fused) for fused in (False, True)
                                       if fused is False or adam_has_fused()]
    return w


def cnn_step(compile_mode, fused):
    """One training step of the Fashion-MNIST CNN at batch 64 with AdamW (examples/fashion_mnist)."""
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    forward = torch.compile(model) if compile_mode else model
    adamw = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True) if fused else \
        torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 1, 28, 28)
    labels = torch.randint(0, 10, (64,))

    def step():
        adamw.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(forward(x), labels).backward()
        adamw.step()

    return step


def transformer_step(compile_mode):
    """Forward + backward of a TransformerEncoderLayer(256, 4, 1024, dropout 0), batch 32, sequence 128."""
    layer = torch.nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.0, batch_first=True)
    forward = torch.compile(layer) if compile_mode else layer
    x = torch.randn(32, 128, 256, requires_grad=True)

    def step():
        x.grad = None
        layer.zero_grad(set_to_none=True)
        forward(x).sum().backward()

    return step


def adam_has_fused():
    try:
        torch.optim.Adam([torch.zeros(1, requires_grad=True)], fused=True)
        return True
    except (TypeError, RuntimeError):
        return False


def mlp_step(compile_mode, fused):
    """One training step of the 784-1024-1024-10 ReLU MLP at batch 256 with Adam."""
    model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    forward = torch.compile(model) if compile_mode else model
    adam = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True) if fused else \
        torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(256, 784)
    labels = torch.randint(0, 10, (256,))

    def step():
        adam.zero_grad(set_to_none=True)
        loss_fn(forward(x), labels).backward()
        adam.step()

    return step


def main(argv):
    compile_mode = "--compile" in argv
    if compile_mode and not hasattr(torch, "compile"):  # torch 1.x: eager only
        print(f"torch {torch.__version__} has no torch.compile; eager only", file=sys.stderr)
        print(json.dumps({"torch": torch.__version__, "compile": True, "results": {}}))
        return
    if "--only" in argv:
        name = argv[argv.index("--only") + 1]
        print(json.dumps({"torch": torch.__version__, "compile": compile_mode,
                          "results": {name: timeit(ONLY[name](compile_mode))}}))
        return
    pattern = re.compile(argv[argv.index("--filter") + 1]) if "--filter" in argv else None
    results = {}
    for name, fn in workloads(compile_mode).items():
        if pattern and not pattern.search(name):
            continue
        # A workload may come in variants (Adam fused or not): the fastest one counts.
        for variant in (fn if isinstance(fn, list) else [fn]):
            try:
                ms = timeit(variant)
                results[name] = min(ms, results.get(name, ms))
            except Exception as exc:  # a workload torch.compile cannot handle here is reported, not fatal
                print(f"{name}: {exc}", file=sys.stderr)
    out = {"torch": torch.__version__, "compile": compile_mode, "results": results}
    if "--fused-compile" in argv and hasattr(torch, "compile"):
        out["fused_compile"] = fused_compile()
    print(json.dumps(out))


def fused_compile():
    """torch.compile (Inductor's C++ backend) on the fused expression, timed apart from the
    seconds its first call takes to compile; run even with --no-compile (compare_torch.py)."""
    x, a, b = torch.randn(4096, 4096), torch.randn(1, 4096) * 0.1 + 1, torch.randn(1, 4096) * 0.1
    fn = torch.compile(lambda: torch.nn.functional.gelu(x * a + b) * torch.sigmoid(x))
    start = time.perf_counter()
    fn()
    compile_s = time.perf_counter() - start
    return {"ms": timeit(fn), "compile_s": compile_s}


# The workloads --only builds alone: each a function of compile_mode returning the step.
ONLY = {
    "transformer_encoder_layer_fwd_bwd_d256_h4_ff1024_s128_b32": transformer_step,
    "mlp_train_step_784_1024_1024_10_b256": lambda compile_mode: mlp_step(compile_mode, adam_has_fused()),
    "cnn_train_step_fashion_b64": lambda compile_mode: cnn_step(compile_mode, adam_has_fused()),
}

if __name__ == "__main__":
    main(sys.argv[1:])
