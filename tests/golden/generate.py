#!/usr/bin/python3
"""Regenerates Kiln's golden fixtures with PyTorch (Debian's python3-torch).

Usage: /usr/bin/python3 tests/golden/generate.py [family ...]
Writes tests/golden/<family>.golden for each gen_<family>.py beside this script; a
gen_<family>.py without cases() writes its own fixture files (gen_store.py: store/).
"""
import importlib
import pathlib
import sys

import torch

from writer import Writer

HERE = pathlib.Path(__file__).resolve().parent


def main(argv):
    families = argv or sorted(p.stem[len("gen_"):] for p in HERE.glob("gen_*.py"))
    for family in families:
        torch.manual_seed(0)
        module = importlib.import_module(f"gen_{family}")
        if not hasattr(module, "cases"):  # a generator that writes its own files (gen_store.py)
            module.main()
            continue
        w = Writer(family)
        module.cases(w)
        out = HERE / f"{family}.golden"
        out.write_text(w.text())
        print(f"{out.relative_to(HERE.parent.parent)}: {len(w.names)} cases")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main(sys.argv[1:])
