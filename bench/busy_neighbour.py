#!/usr/bin/env python3
"""A training step beside a busy neighbour: Kiln's step rows idle and with other processes
spinning on the cores, each against the idle step of the same binary.

  python3 bench/busy_neighbour.py --build build [--neighbours 1] [--min-time 1]

The neighbours are processes of their own that spin without pause (`while True: pass`), the
way a compile job holds a core. Each configuration is one run of kiln_bench (Google
Benchmark medians of --repetitions runs of at least --min-time seconds):
  idle                the default: KILN_NUM_THREADS unset, teams that give up threads
  busy                the same, beside the neighbours
  busy, fixed team    KILN_ADAPTIVE_THREADS=0: the team stays at the core count
  busy, one thread    KILN_NUM_THREADS=1
  idle, one thread    KILN_NUM_THREADS=1, no neighbour
Prints a Markdown table: milliseconds per step and, in brackets, the multiple of the idle step.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROWS = r"^(mlp_train_step_784_1024_1024_10_b256|cnn_train_step_fashion_b64)/"

CONFIGS = [
    ("idle", 0, {}),
    ("busy", None, {}),
    ("busy, fixed team", None, {"KILN_ADAPTIVE_THREADS": "0"}),
    ("busy, one thread", None, {"KILN_NUM_THREADS": "1"}),
    ("idle, one thread", 0, {"KILN_NUM_THREADS": "1"}),
]


def run(exe, rows, min_time, repetitions, extra_env):
    env = dict(os.environ)
    for key in ("KILN_NUM_THREADS", "KILN_ADAPTIVE_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        env.pop(key, None)
    env.update(extra_env)
    cmd = [str(exe), f"--benchmark_filter={rows}", "--benchmark_format=json", f"--benchmark_min_time={min_time}",
           f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true"]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    medians = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
            medians[b["run_name"].split("/real_time")[0]] = b["real_time"] * scale
    if not medians:
        sys.exit(f"busy_neighbour: no rows matched {rows!r}")
    return medians


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--rows", default=ROWS, help="kiln_bench filter (default: the MLP and CNN training steps)")
    parser.add_argument("--neighbours", type=int, default=1, help="spinning processes beside the busy runs")
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    exe = pathlib.Path(args.build) / "bench/kiln_bench"
    if not exe.exists():
        sys.exit(f"busy_neighbour: {exe} is missing; build it with ninja -C {args.build} kiln_bench")

    results = {}
    for name, neighbours, env in CONFIGS:
        count = args.neighbours if neighbours is None else neighbours
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
        try:
            time.sleep(0.2 if spinners else 0)
            results[name] = run(exe, args.rows, args.min_time, args.repetitions, env)
        finally:
            for p in spinners:
                p.kill()
                p.wait()

    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores; busy: {args.neighbours} spinning neighbour process(es); "
          f"medians of {args.repetitions} runs of at least {args.min_time} s; in brackets, the multiple of the idle step\n")
    names = [name for name, _, _ in CONFIGS]
    print("| step (ms) | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for row, idle in results["idle"].items():
        cells = []
        for name in names:
            value = results[name].get(row)
            cells.append("-" if value is None else f"{value:.2f} ({value / idle:.2f}x)")
        print(f"| {row} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
