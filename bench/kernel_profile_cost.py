"""What compiling with Inductor's C++ kernel profile (``cpp.enable_kernel_profile``) costs a CPU model: its compile and
its compiled step, against the same compile without it (what PyTorch's harness and a user's ``torch.compile`` do).

perfdash's worker compiled the timed model with the profile on until 2026-11-29 so that its kernel table could name
Inductor's C++ kernels; runner.generated_code now names them for the profiled steps only. This bench is the figure
behind that change. Each trial is a fresh interpreter with an empty Inductor cache, the two settings alternating;
compile threads are held at one so that the C++ compiler's CPU time is counted (as the process's children), which a
busy machine moves far less than wall time.

    python -m bench.kernel_profile_cost [--model dcgan] [--trials 3] [--batch-size 4]

Prints per trial the compile's wall and CPU seconds (the interpreter's own, the C++ compiler's) and the compiled
step's median, then the median ratio profile-on / profile-off of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from runner.lifeline import dies_with_this_process

# One trial: a TorchBench model (torchbenchmark, as perfdash's torchbench suite builds it) compiled under CPU
# inference's settings (freezing), then 20 compiled steps timed.
TRIAL = """
import json, os, resource, statistics, sys, time
profile, name, batch_size = sys.argv[1] == "1", sys.argv[2], int(sys.argv[3])
import importlib, torch, torch._inductor.config as config
config.freezing = True
config.compile_threads = 1
config.cpp.enable_kernel_profile = profile
model, inputs = importlib.import_module(f"torchbenchmark.models.{name}").Model(
    test="eval", device="cpu", batch_size=batch_size).get_module()
compiled = torch.compile(model)
def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime
with torch.no_grad():
    for _ in range(2):
        model(*inputs)
    before, start = cpu(), time.perf_counter()
    compiled(*inputs)
    wall, after = time.perf_counter() - start, cpu()
    steps = []
    for _ in range(20):
        start = time.perf_counter()
        compiled(*inputs)
        steps.append(time.perf_counter() - start)
print(json.dumps({"wall_s": wall, "own_cpu_s": after[0] - before[0], "cxx_cpu_s": after[1] - before[1],
                  "step_ms": statistics.median(steps) * 1e3}))
"""
FIGURES = ("wall_s", "own_cpu_s", "cxx_cpu_s", "step_ms")


def trial(profile: bool, model: str, batch_size: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kernel-profile-cost-") as cache:
        done = subprocess.run([sys.executable, "-c", TRIAL, "1" if profile else "0", model, str(batch_size)],
                              env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}, capture_output=True,
                              text=True, check=True, timeout=1800, preexec_fn=dies_with_this_process())
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kernel_profile_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="dcgan", help="a TorchBench model (default: %(default)s)")
    parser.add_argument("--trials", type=int, default=3, help="trials per setting, alternating (default: 3)")
    parser.add_argument("--batch-size", type=int, default=4, help="default: %(default)s")
    args = parser.parse_args(argv)
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    print(f"{args.model} @ batch {args.batch_size}, {args.trials} trials per setting, fresh process and cache each")
    for number in range(args.trials):
        for profile in (False, True) if number % 2 == 0 else (True, False):
            figures = trial(profile, args.model, args.batch_size)
            results[profile].append(figures)
            print(f"  trial {number + 1} kernel profile {'on ' if profile else 'off'}: "
                  + "  ".join(f"{name} {figures[name]:.2f}" for name in FIGURES), flush=True)
    on, off = results[True], results[False]
    ratios = {name: statistics.median(f[name] for f in on) / statistics.median(f[name] for f in off)
              for name in FIGURES}
    print("median ratio on / off: " + "  ".join(f"{name} {ratio:.3f}" for name, ratio in ratios.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
