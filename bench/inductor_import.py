"""What importing Inductor's compiler costs a process, in time and resident memory (issue 18 item 8).

PyTorch's harness pays it during its compiled warm-up (so inside its compile latency and its dynamo_peak_mem);
perfdash's fork server pays it once before forking. Two fresh interpreters: one imports what perfdash's fork server
imports before the compiler, the other what PyTorch's benchmarks/dynamo/common.py imports at its top; each then imports
``torch._inductor.compile_fx``.

    .venv/bin/python -m bench.inductor_import [--suite-module timm]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

_PROBE = """
import importlib, sys, time, psutil
def rss():
    return psutil.Process().memory_info().rss / 1e9
for group in sys.argv[1:]:
    start, before = time.perf_counter(), rss()
    for name in group.split(","):
        importlib.import_module(name)
    print(f"  {group[:70]:70s} {time.perf_counter() - start:5.2f} s  RSS {rss():.3f} GB (+{rss() - before:.3f})")
"""
# The modules common.py imports at its top, besides torch and Dynamo (read from pytorch/pytorch at 00391a7e).
PYTORCH_TOP = ("numpy,pandas,scipy.stats,psutil,yaml,tqdm,torch._export,torch._inductor.config,torch._inductor.metrics,"
               "torch._inductor.utils,torch._functorch.aot_autograd,torch._dynamo.testing,torch._dynamo.profiler")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite-module", default="timm", help="the suite's library, imported by both")
    args = parser.parse_args()
    compiler = "torch._inductor.compile_fx"
    for title, groups in (("perfdash's fork server", ["torch", "torch._dynamo", args.suite_module, compiler]),
                          ("PyTorch's harness process", ["torch", "torch._dynamo", args.suite_module, PYTORCH_TOP,
                                                         compiler])):
        print(title)
        subprocess.run([sys.executable, "-c", _PROBE, *groups], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
