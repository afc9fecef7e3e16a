#!/usr/bin/env python3
"""Runs Kiln's benchmarks and their PyTorch twins side by side and prints one table.

PyTorch is run at its best: every interpreter given with --torch-python (default: Debian's
/usr/bin/python3 with torch 1.13, and /opt/kiln-bench-venv/bin/python with a current torch
from PyPI if present), eager and torch.compile, and the fastest time per workload wins.
PyTorch runs in its own process with OPENBLAS_CORETYPE=SkylakeX, ATEN_CPU_CAPABILITY set
from this CPU's flags (avx512 where it has AVX-512 F/BW/VL/DQ, else avx2, else default) and
glibc malloc settings that keep freed memory mapped, once with OpenMP's default wait policy
(its threads spin a while between parallel regions) and once with OMP_WAIT_POLICY=PASSIVE
(they sleep), and each workload keeps the faster; Kiln keeps the machine's settings. On a
2-core Xeon VM the default policy ran PyTorch's small products 1.7-3.6x faster than PASSIVE
(an exp over 1k floats 34x) and most other rows 3-16 % faster; PASSIVE won the attention rows
at 2048 keys by 1-8 %.
Nothing here is needed by the build or the tests.

Rows named <workload>@<backend> (bench/fusion_bench.cpp: Fusion<Cpu>, and plain Cpu beside
it) compare with PyTorch's <workload>: a composition that has both rows pairs like with like,
the @cpu row (each op a kernel of its own) with PyTorch's best eager time and the
@fusion_cpu row (one generated kernel) with PyTorch's best, torch.compile included. The
attention rows' @composition (matmul, softmax, matmul in place of the fused kernel) pairs
with the same composition in PyTorch, the same way: Kiln's Cpu row with PyTorch's best eager
time, its @composition@fusion_cpu row (Fusion<Cpu>) with PyTorch's best, torch.compile
included. The fusion summary after the table gives this run's
STREAM triad bandwidth (the stream_triad row), the fused expression's speed against plain
Cpu, PyTorch eager and torch.compile (always measured for that row, its compile time apart,
also under --no-compile), and its bandwidth as a share of STREAM. Before it, the FMA peak
of this run (the fma_peak row: every thread's widest FMA, bench/machine_bench.cpp) and each
square GEMM's GFLOP/s as a share of it, Kiln's and PyTorch's.

Kiln's Vulkan benchmarks (vulkan/...) have no PyTorch twin: they run only when --filter
matches them, and are listed with no PyTorch figure.

--epoch compares whole training epochs instead: examples/fashion_mnist (one epoch, its
data loader and Learner included; the time is the train row of its epochs.csv), on Cpu and
with --fusion on Fusion<Cpu>, against bench/torch_fashion_epoch.py, the same model and
schedule in PyTorch, their test accuracies after that epoch, and each process's peak RSS
(the process that trains, data loading included; PyTorch's at its fastest configuration).

--memory compares peak memory instead: each training-step row of MEMORY_ROWS runs alone in
a process of its own, Kiln's (kiln_bench filtered to that row) and PyTorch's
(torch_workloads.py --only, eager and torch.compile), and the table gives each process's
peak RSS beside its step time.

--rounds N runs both sides N times, Kiln's suite then PyTorch's in each round, and keeps
each side's best round per row (and the best FMA peak and bandwidths): on a VM whose speed
moves for tens of seconds at a time, both sides then get the same chances.

Usage: bench/compare_torch.py [--build build] [--filter REGEX] [--rounds N] [--markdown FILE]
       bench/compare_torch.py --epoch [--build build] [--markdown FILE]
       bench/compare_torch.py --memory [--build build] [--markdown FILE]
"""
import csv
import argparse
import datetime
import itertools
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def aten_cpu_capability():
    """PyTorch's best kernel set for this CPU. Read from the CPU's flags, because the
    machines differ (Zen 1 and Zen 3 have no AVX-512, where "avx512" dies of an illegal
    instruction; Zen 4 and 5 have it)."""
    try:
        flags = set()
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        return "default"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "avx512"
    if {"avx2", "fma"} <= flags:
        return "avx2"
    return "default"


TORCH_ENV = {
    "OPENBLAS_CORETYPE": "SkylakeX",
    "ATEN_CPU_CAPABILITY": aten_cpu_capability(),
    "MALLOC_MMAP_MAX_": "0",
    "MALLOC_TRIM_THRESHOLD_": "68719476736",
}
# OpenMP's wait policies PyTorch runs under: None leaves OpenMP's default (spin, then sleep).
WAIT_POLICIES = (None, "PASSIVE")


def torch_env(wait_policy=None):
    """The environment of a PyTorch process: TORCH_ENV, with OMP_WAIT_POLICY set to wait_policy
    (or unset, for OpenMP's default)."""
    env = dict(os.environ, **TORCH_ENV)
    env.pop("OMP_WAIT_POLICY", None)
    if wait_policy:
        env["OMP_WAIT_POLICY"] = wait_policy
    return env


def torch_label(version, compile_mode, wait_policy):
    return f"torch {version}{' compile' if compile_mode else ' eager'}" + (
        f", OMP_WAIT_POLICY={wait_policy}" if wait_policy else "")


def fmt_ms(value):
    """Milliseconds with three decimals, or five below 0.1 ms (the per-op overhead rows)."""
    return f"{value:.3f}" if not value < 0.1 else f"{value:.5f}"


def run_kiln(build, pattern):
    exe = pathlib.Path(build) / "bench" / "kiln_bench"
    cmd = [str(exe), "--benchmark_format=json", "--benchmark_min_time=1", "--benchmark_repetitions=3",
           "--benchmark_report_aggregates_only=true"]
    # Without a filter, everything but the Vulkan benchmarks (a leading "-" negates the regex).
    cmd.append(f"--benchmark_filter={pattern or '-^vulkan/'}")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    results = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("error_occurred") and b.get("repetition_index", 0) == 0:
            print(f"[kiln] {b['run_name']}: {b['error_message']}", file=sys.stderr)
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].replace("/real_time", "")
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        results[name] = b["real_time"] * scale
        # Over several rounds (--rounds), the best: the highest bandwidth and FLOP rate.
        if "bytes_per_second" in b:
            BANDWIDTH[name] = max(b["bytes_per_second"] / 1e9, BANDWIDTH.get(name, 0.0))
        if "flops" in b and b["flops"] / 1e9 > PEAK.get(name, (0.0,))[0]:
            PEAK[name] = (b["flops"] / 1e9, b.get("label", ""))
    return results


BANDWIDTH = {}  # Kiln row -> GB/s, for the rows that count their bytes
PEAK = {}  # Kiln row -> (GFLOP/s, label), for the rows that count their FLOPs (fma_peak)


def gemm_summary(kiln, best):
    """The FMA peak of this run (fma_peak) and each square GEMM's speed as a share of it,
    Kiln's and PyTorch's."""
    peak = PEAK.get("fma_peak")
    if not peak:
        return []
    lines = [f"FMA peak (this machine, this run, {peak[1]}): {peak[0]:.0f} GFLOP/s"]
    for name in sorted(kiln, key=lambda n: (len(n), n)):
        if not name.startswith("matmul_f32/"):
            continue
        n = int(name.split("/")[1])
        flop = 2.0 * n ** 3
        line = f"{name}: Kiln {flop / kiln[name] / 1e6:.0f} GFLOP/s = {100 * flop / kiln[name] / 1e6 / peak[0]:.0f}% of peak"
        torch_ms = best.get(name, (None,))[0]
        if torch_ms:
            line += f"; PyTorch {flop / torch_ms / 1e6:.0f} GFLOP/s = {100 * flop / torch_ms / 1e6 / peak[0]:.0f}%"
        lines.append(line)
    return lines


def fusion_summary(kiln, best, fused_compile):
    """The fusion lines: Fusion<Cpu> against plain Cpu, PyTorch eager and torch.compile, and
    its bandwidth as a share of this run's STREAM triad; then Dispatch on the CPU against Cpu."""
    lines = []
    stream = BANDWIDTH.get("stream_triad")
    if stream:
        lines.append(f"STREAM triad (this machine, this run): {stream:.1f} GB/s")
    fused, plain = kiln.get("fused_expr_16M@fusion_cpu"), kiln.get("fused_expr_16M@cpu")
    if fused and plain:
        line = f"gelu(x*a+b)*sigmoid(x), 16M f32: Fusion<Cpu> {fused:.2f} ms, {plain / fused:.2f}x plain Cpu ({plain:.2f} ms)"
        gbs = BANDWIDTH.get("fused_expr_16M@fusion_cpu")
        if gbs and stream:
            line += f"; {gbs:.1f} GB/s = {100 * gbs / stream:.0f}% of STREAM"
        eager = best.get("fused_expr_16M@eager")
        if eager:
            line += f"; {eager[0] / fused:.2f}x PyTorch eager ({eager[0]:.2f} ms, {eager[1]})"
        if fused_compile:
            ms, compile_s, label = fused_compile
            line += f"; {ms / fused:.2f}x torch.compile ({ms:.2f} ms, {label}, compiled in {compile_s:.1f} s)"
        lines.append(line)
    for name in sorted(kiln):
        if name.endswith("@fusion_cpu") and not name.startswith("fused_expr"):
            base = name[: -len("@fusion_cpu")]  # <w>, or <w>@composition: the same work on Cpu
            other = kiln.get(base) or kiln.get(base + "@cpu")
            if other:
                lines.append(f"{base}: Fusion<Cpu> {kiln[name]:.4g} ms, plain Cpu {other:.4g} ms ({other / kiln[name]:.2f}x)")
    for name in sorted(kiln):
        if name.endswith("@dispatch_cpu"):
            base = name.split("@")[0]
            if base in kiln:
                lines.append(f"{base}: Dispatch on the CPU {kiln[name]:.4g} ms, Cpu {kiln[base]:.4g} ms "
                             f"({kiln[name] / kiln[base]:.2f}x its time)")
    row, hand = kiln.get("softmax_4096x1024_row_program@fusion_cpu"), kiln.get("softmax_4096x1024@cpu")
    if row and hand:
        lines.append(f"softmax_4096x1024 as a row program {row:.4g} ms, the hand-fused kernel {hand:.4g} ms "
                     f"({row / hand:.2f}x its time)")
    return lines


def run_torch(python, compile_mode, pattern, fused_compile=False, wait_policy=None):
    cmd = [python, str(HERE / "torch_workloads.py")]
    if compile_mode:
        cmd.append("--compile")
    if fused_compile:
        cmd.append("--fused-compile")
    if pattern:
        cmd += ["--filter", pattern]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=torch_env(wait_policy))
    if proc.stderr.strip() and proc.returncode == 0:
        print(f"[{python}{' compile' if compile_mode else ''}] {proc.stderr.strip()[-400:]}", file=sys.stderr)
    if proc.returncode != 0:
        print(f"[{python}{' compile' if compile_mode else ''}] failed: {proc.stderr.strip()[-400:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_measured(cmd, env=None):
    """Runs cmd to its end; returns (return code, stdout, stderr, peak RSS in MB)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), usage.ru_maxrss / 1024


def run_kiln_epoch(build, extra=()):
    """Seconds of examples/fashion_mnist's training epoch, its test accuracy after it, and
    the process's peak RSS (MB)."""
    exe = pathlib.Path(build) / "examples" / "fashion_mnist"
    with tempfile.TemporaryDirectory() as out:
        code, _, err, rss = run_measured([str(exe), "--epochs", "1", "--output", out, *extra])
        if code != 0:
            sys.exit(f"{exe} failed: {err.strip()[-400:]}")
        rows = list(csv.DictReader(open(pathlib.Path(out) / "epochs.csv")))
    train = next(r for r in rows if r["split"] == "train")
    valid = next(r for r in rows if r["split"] == "valid")
    return float(train["epoch_time_s"]), float(valid["accuracy"]) / 100, rss


def compare_epoch(args, pythons):
    kiln_s, kiln_accuracy, kiln_rss = run_kiln_epoch(args.build)
    fused_s, fused_accuracy, fused_rss = run_kiln_epoch(args.build, ["--fusion"])
    best = None  # (seconds, accuracy, label, peak RSS)
    for python in pythons:
        for compile_mode in ((False,) if args.no_compile else (False, True)):
            for wait_policy in WAIT_POLICIES:
                cmd = [python, str(HERE / "torch_fashion_epoch.py")] + (["--compile"] if compile_mode else [])
                code, out, err, rss = run_measured(cmd, env=torch_env(wait_policy))
                if code != 0:
                    print(f"[{python}{' compile' if compile_mode else ''}] failed: {err.strip()[-400:]}",
                          file=sys.stderr)
                    continue
                r = json.loads(out.strip().splitlines()[-1])
                if "epoch_s" in r and (best is None or r["epoch_s"] < best[0]):
                    best = (r["epoch_s"], r["accuracy"], torch_label(r["torch"], r["compile"], wait_policy), rss)
    torch_s, torch_accuracy, label, torch_rss = best or (float("nan"), float("nan"), "-", float("nan"))
    print(f"Fashion-MNIST epoch (60k images, batch 64, AdamW): Kiln {kiln_s:.1f} s (test accuracy "
          f"{kiln_accuracy:.4f}), PyTorch {torch_s:.1f} s ({torch_accuracy:.4f}, {label}): "
          f"Kiln takes {kiln_s / torch_s:.2f}x PyTorch's time")
    print(f"  on Fusion<Cpu> (--fusion): {fused_s:.1f} s (test accuracy {fused_accuracy:.4f}), "
          f"{fused_s / kiln_s:.2f}x plain Cpu's time, {fused_s / torch_s:.2f}x PyTorch's")
    print(f"  peak RSS: Kiln {kiln_rss:.0f} MB (Fusion<Cpu> {fused_rss:.0f} MB), PyTorch {torch_rss:.0f} MB: "
          f"{kiln_rss / torch_rss:.2f}x PyTorch's")
    if args.markdown:
        lines = [
            f"Measured {datetime.date.today()} on {platform.node() or 'this machine'} "
            f"({os.cpu_count()} cores, PyTorch with ATEN_CPU_CAPABILITY={TORCH_ENV['ATEN_CPU_CAPABILITY']}), 2 threads each, by `bench/compare_torch.py --epoch`.",
            "",
            "| Fashion-MNIST CNN, one epoch (60k images, batch 64) | Kiln | PyTorch at its best | Kiln / PyTorch time |",
            "|---|---:|---:|---:|",
            f"| training epoch (s) | {kiln_s:.1f} | {torch_s:.1f} ({label}) | {kiln_s / torch_s:.2f}× |",
            f"| test accuracy after it | {kiln_accuracy:.4f} | {torch_accuracy:.4f} | |",
            f"| training epoch on Fusion<Cpu> (`--fusion`, s) | {fused_s:.1f} | {torch_s:.1f} | {fused_s / torch_s:.2f}× |",
            f"| test accuracy after it | {fused_accuracy:.4f} | {torch_accuracy:.4f} | |",
            f"| peak RSS of the process (MB) | {kiln_rss:.0f} | {torch_rss:.0f} | {kiln_rss / torch_rss:.2f}× |",
            f"| peak RSS on Fusion<Cpu> (MB) | {fused_rss:.0f} | {torch_rss:.0f} | {fused_rss / torch_rss:.2f}× |",
        ]
        pathlib.Path(args.markdown).write_text("\n".join(lines) + "\n")


MEMORY_ROWS = ["transformer_encoder_layer_fwd_bwd_d256_h4_ff1024_s128_b32", "mlp_train_step_784_1024_1024_10_b256",
               "cnn_train_step_fashion_b64"]


def compare_memory(args, pythons):
    """Each MEMORY_ROWS workload alone in its own process: step time and peak RSS, Kiln's and
    PyTorch's (every configuration measured; the table gives PyTorch's smallest peak)."""
    exe = pathlib.Path(args.build) / "bench" / "kiln_bench"
    # Each side's process running no workload: its libraries and runtime.
    kiln_base = run_measured([str(exe), "--benchmark_filter=^$"])[3]
    torch_base = min((run_measured([python, "-c", "import torch; torch.set_num_threads(2); torch.randn(8).sum()"],
                                   env=torch_env())[3] for python in pythons), default=float("nan"))
    print(f"peak RSS running no workload: kiln_bench {kiln_base:.0f} MB, Python importing torch {torch_base:.0f} MB")
    rows = []
    for row in MEMORY_ROWS:
        code, out, err, kiln_rss = run_measured([str(exe), f"--benchmark_filter=^{row}/", "--benchmark_format=json",
                                                 "--benchmark_min_time=1"])
        if code != 0:
            sys.exit(f"{exe} failed: {err.strip()[-400:]}")
        b = json.loads(out)["benchmarks"][0]
        kiln_ms = b["real_time"] * {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        torch_runs = []  # (peak RSS, ms, label)
        for python in pythons:
            for compile_mode in ((False,) if args.no_compile else (False, True)):
                cmd = [python, str(HERE / "torch_workloads.py"), "--only", row] + (["--compile"] if compile_mode else [])
                code, out, err, rss = run_measured(cmd, env=torch_env())  # peak RSS: one policy is enough
                if code != 0:
                    print(f"[{python}{' compile' if compile_mode else ''}] {row} failed: {err.strip()[-400:]}",
                          file=sys.stderr)
                    continue
                r = json.loads(out.strip().splitlines()[-1])
                if row in r["results"]:
                    torch_runs.append((rss, r["results"][row], torch_label(r["torch"], r["compile"], None)))
        torch_rss, torch_ms, label = min(torch_runs) if torch_runs else (float("nan"), float("nan"), "-")
        rows.append((row, kiln_ms, kiln_rss, torch_ms, torch_rss, label))
        print(f"{row}: Kiln {kiln_ms:.2f} ms, peak RSS {kiln_rss:.0f} MB; PyTorch {torch_ms:.2f} ms, peak RSS "
              f"{torch_rss:.0f} MB ({label}): {kiln_rss / torch_rss:.2f}x PyTorch's memory")
    if args.markdown:
        lines = [
            f"Measured {datetime.date.today()} on {platform.node() or 'this machine'} "
            f"({os.cpu_count()} cores), 2 threads each, by `bench/compare_torch.py --memory` (each row alone in a process).",
            "",
            "| workload | Kiln step (ms) | Kiln peak RSS (MB) | PyTorch step (ms) | PyTorch peak RSS (MB) | Kiln / PyTorch RSS "
            "| the same above each process running no workload | PyTorch config |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
            f"| (no workload) | | {kiln_base:.0f} | | {torch_base:.0f} | | | |",
        ]
        for row, kiln_ms, kiln_rss, torch_ms, torch_rss, label in rows:
            lines.append(f"| {row} | {fmt_ms(kiln_ms)} | {kiln_rss:.0f} | {fmt_ms(torch_ms)} | {torch_rss:.0f} | "
                         f"{kiln_rss / torch_rss:.2f}× | {(kiln_rss - kiln_base) / (torch_rss - torch_base):.2f}× "
                         f"({kiln_rss - kiln_base:.0f} / {torch_rss - torch_base:.0f} MB) | {label} |")
        pathlib.Path(args.markdown).write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build-bench")
    ap.add_argument("--filter", default="")
    ap.add_argument("--torch-python", action="append")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile runs")
    ap.add_argument("--epoch", action="store_true", help="compare a Fashion-MNIST training epoch")
    ap.add_argument("--memory", action="store_true", help="compare the training steps' peak RSS")
    ap.add_argument("--markdown", help="write the table as markdown to this file")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run both sides this many times, one after the other, and keep each side's best")
    args = ap.parse_args()

    pythons = args.torch_python or [p for p in ("/usr/bin/python3", "/opt/kiln-bench-venv/bin/python")
                                    if pathlib.Path(p).exists()]
    if args.epoch:
        compare_epoch(args, pythons)
        return
    if args.memory:
        compare_memory(args, pythons)
        return
    kiln = {}  # name -> ms: Kiln's best round
    best = {}  # name -> (ms, label); name@eager: the best eager time alone
    fused_compile = None  # (ms, compile seconds, label): torch.compile on the fused expression
    # Each round runs Kiln's suite and then PyTorch's, so that over several rounds both sides
    # see the same spells of a VM's noise (its memory bandwidth and its cores' speed move by
    # a sixth to a third for tens of seconds at a time); each side keeps its best round.
    for round_index in range(args.rounds):
        if args.rounds > 1:
            print(f"round {round_index + 1} of {args.rounds}", file=sys.stderr)
        for name, ms in run_kiln(args.build, args.filter).items():
            kiln[name] = min(ms, kiln.get(name, ms))
        for python in pythons:
            for compile_mode, wait_policy in itertools.product((False,) if args.no_compile else (False, True),
                                                               WAIT_POLICIES):
                r = run_torch(python, compile_mode, args.filter, fused_compile=not compile_mode,
                              wait_policy=wait_policy)
                if not r:
                    continue
                label = torch_label(r["torch"], r["compile"], wait_policy)
                for name, ms in r["results"].items():
                    if name not in best or ms < best[name][0]:
                        best[name] = (ms, label)
                    if not compile_mode and (name + "@eager" not in best or ms < best[name + "@eager"][0]):
                        best[name + "@eager"] = (ms, label)
                if "fused_compile" in r and (fused_compile is None or r["fused_compile"]["ms"] < fused_compile[0]):
                    fc = r["fused_compile"]
                    fused_compile = (fc["ms"], fc["compile_s"], torch_label(r["torch"], True, wait_policy))
                    name = "fused_expr_16M"
                    if name not in best or fc["ms"] < best[name][0]:
                        best[name] = (fc["ms"], fused_compile[2])

    rows = []
    for name, kiln_ms in kiln.items():
        # A row <workload>@<backend> (Kiln on another backend) has the twin <workload>.
        workload = name.split("@")[0]
        # A row PyTorch measures under the same name (the attention compositions) pairs with
        # that; a composition measured both eagerly (@cpu) and fused (@fusion_cpu) pairs like
        # with like: eager Kiln with eager PyTorch, Fusion<Cpu> with PyTorch's best,
        # torch.compile included.
        twin = name if name in best else workload
        if name == workload + "@cpu" and workload + "@eager" in best:
            twin = workload + "@eager"
        # The attention compositions likewise: <w>@composition (Kiln's Cpu, each op a kernel)
        # with PyTorch's eager composition where Kiln also measured <w>@composition@fusion_cpu,
        # which pairs with PyTorch's best of the composition, torch.compile included (which
        # runs the forward composition as its fused attention kernel, as Fusion<Cpu> does).
        if name.endswith("@composition") and name + "@fusion_cpu" in kiln and name + "@eager" in best:
            twin = name + "@eager"
        if name.endswith("@composition@fusion_cpu"):
            twin = name[: -len("@fusion_cpu")]
        torch_ms, label = best.get(twin, (float("nan"), "-"))
        # ratio > 1 means Kiln is faster
        rows.append((name, kiln_ms, torch_ms, torch_ms / kiln_ms, label))
    header = f"{'workload':40} {'Kiln ms':>10} {'PyTorch ms':>11} {'speedup':>8}  PyTorch config"
    print(header)
    for name, k, t, ratio, label in rows:
        if label == "-":  # no PyTorch twin (the Vulkan benchmarks)
            print(f"{name:40} {fmt_ms(k):>10} {'-':>11} {'-':>8}   -")
        else:
            print(f"{name:40} {fmt_ms(k):>10} {fmt_ms(t):>11} {ratio:8.2f}x  {label}")
    summary = gemm_summary(kiln, best) + fusion_summary(kiln, best, fused_compile)
    for line in summary:
        print(line)
    if args.markdown:
        lines = [
            f"Measured {datetime.date.today()} on {platform.node() or 'this machine'} "
            f"({os.cpu_count()} cores, PyTorch with ATEN_CPU_CAPABILITY={TORCH_ENV['ATEN_CPU_CAPABILITY']}), 2 threads each, by `bench/compare_torch.py`"
            + (f" (each side's best of {args.rounds} rounds, run alternately)." if args.rounds > 1 else "."),
            "",
            "| workload | Kiln (ms) | PyTorch at its best (ms) | Kiln speedup | PyTorch config |",
            "|---|---:|---:|---:|---|",
        ]
        for name, k, t, ratio, label in rows:
            if label == "-":
                lines.append(f"| {name} | {fmt_ms(k)} | - | - | - |")
            else:
                lines.append(f"| {name} | {fmt_ms(k)} | {fmt_ms(t)} | {ratio:.2f}× | {label} |")
        lines += [""] + [f"- {line}" for line in summary]
        pathlib.Path(args.markdown).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
