"""DistributedDataParallel scaling on this machine's cores: ``perfdash scale`` (runner.scale) at world sizes 1 and 2
over gloo, one core per rank, for a small CNN and a small transformer, eager and compiled (Inductor, Dynamo's DDP
graph splitting), beside the same model trained in one plain process (``perfdash run --mode training --threads 1``,
no torch.distributed) so that DDP's own cost at world size 1 shows.

Models (random weights, the suites' own builders): torchvision resnet18 at 64x64, batch 8 per rank (torchbench's
builder), and BertForMaskedLM at hidden 128, 2 layers, 2 heads, sequence 128, batch 4 per rank (huggingface's
builder). It prints per model and world size the global throughput (samples/s: world size x batch over the median
step, the slowest rank's), the scaling factor throughput(N) / (N x throughput(1)), and the launch's costs (the
slowest rank's interpreter start and imports until its first phase, init_process_group, DDP's first eager step, and
the world size's wall time), then the single-process throughput and DDP(1) over it.

    nice -n 5 .venv/bin/python -m bench.scaling [--repeat 30] [--warmup 5] [--output-dir DIR]

"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

MODELS = """
[[model]]
name = "resnet18_64px"
batch_size = 8
builder = "torchvision:resnet18"
options = { input_size = [3, 64, 64] }

[[model]]
name = "SmallBertForMaskedLM"
batch_size = 4
builder = "hf:BertForMaskedLM"
options = { seq_len = 128, config = { hidden_size = 128, num_hidden_layers = 2, num_attention_heads = 2, \
intermediate_size = 512 } }
"""


def _f(value: float | None, fmt: str) -> str:
    if value is None:
        return "-".rjust(int(fmt.split(".")[0]))
    return format(value, fmt)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--output-dir", type=Path)
    args = parser.parse_args()

    from runner.api import run_suite
    from runner.options import RunOptions
    from runner.scale import ScaleOptions, run_scaling

    with tempfile.TemporaryDirectory(prefix="perfdash-bench-scaling-") as tmp:
        out = args.output_dir or Path(tmp)
        models_file = out / "models.toml"
        out.mkdir(parents=True, exist_ok=True)
        models_file.write_text(MODELS, encoding="utf-8")
        print(f"DDP over gloo, 1 core per rank, world sizes 1 and 2; repeat {args.repeat}, warm-up {args.warmup}; "
              "throughput in samples/s")
        print(f"{'model':<22} {'W':>2} {'status':<18} {'eager/s':>9} {'compiled/s':>10} {'eager sc':>8} "
              f"{'comp sc':>8} {'speedup':>7} {'launch s':>8} {'init s':>6} {'1st step s':>10} {'wall s':>7}")
        plain: dict[str, tuple[float | None, float | None]] = {}
        ddp1: dict[str, tuple[float | None, float | None]] = {}
        for name in ("resnet18_64px", "SmallBertForMaskedLM"):
            report = run_scaling(ScaleOptions(suite="torchbench", model=name, nproc=2, output_dir=out / "scale",
                                              models_file=models_file, cores_per_rank=1, repeat=args.repeat,
                                              warmup=args.warmup, timeout_s=1800))
            for p in report.points:
                print(f"{name:<22} {p.world_size:>2} {p.status:<18} {_f(p.eager_throughput, '9.1f')} "
                      f"{_f(p.compiled_throughput, '10.1f')} {_f(p.eager_scaling, '8.2f')} "
                      f"{_f(p.compiled_scaling, '8.2f')} {_f(p.speedup, '7.2f')} {_f(p.launch_s, '8.1f')} "
                      f"{_f(p.init_process_group_s, '6.2f')} {_f(p.first_step_s, '10.2f')} {_f(p.wall_s, '7.1f')}")
                if p.world_size == 1:
                    ddp1[name] = (p.eager_throughput, p.compiled_throughput)
            single = run_suite(RunOptions(suite="torchbench", only=name, models_file=models_file, mode="training",
                                          threads=1, performance=True, repeat=args.repeat, warmup=args.warmup,
                                          timeout_s=1800, output_dir=out / "single"))
            samples = {s.name: s for s in single.samples}.get(name)
            plain[name] = (samples.eager_throughput, samples.compiled_throughput) if samples else (None, None)
        print()
        print(f"{'model':<22} {'plain eager/s':>13} {'plain compiled/s':>16} {'DDP(1)/plain eager':>18} "
              f"{'DDP(1)/plain compiled':>21}")
        for name, (eager, compiled) in plain.items():
            d_eager, d_compiled = ddp1.get(name, (None, None))
            print(f"{name:<22} {_f(eager, '13.1f')} {_f(compiled, '16.1f')} "
                  f"{_f(d_eager / eager if d_eager and eager else None, '18.2f')} "
                  f"{_f(d_compiled / compiled if d_compiled and compiled else None, '21.2f')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
