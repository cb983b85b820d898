"""PyTorch mode: install strategies (command construction), the perfdash run invocation, reading the metric through
the result contract, and one bisection end to end with the real ``perfdash run`` (marked slow)."""

from __future__ import annotations

import itertools
import json
import re
import shlex
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from perfbisect.procedure import MeasureFailed
from perfbisect.pytorch import TorchOracle, TorchTarget, nightly_command, source_command, torch_version_base

from perfdash.cli import main
from perfdash.contract import AccuracyRow, PerformanceRow, append_row

REPO = Path(__file__).resolve().parents[2]


def test_nightly_command_installs_the_dated_wheel_and_checks_its_commit(tmp_path):
    site = tmp_path / "site dir"
    command = nightly_command("2.7.0", datetime(2026, 1, 2, 23, 59, tzinfo=UTC), site, "cpu", "abc123",
                              python="/venv/bin/python")
    install, check = command.split(" && ")
    argv = shlex.split(install)
    assert argv[:3] == ["/venv/bin/python", "-m", "pip"] and "install" in argv
    assert "torch==2.7.0.dev20260102" in argv
    assert argv[argv.index("--index-url") + 1] == "https://download.pytorch.org/whl/nightly/cpu"
    assert argv[argv.index("--target") + 1] == str(site)
    assert "--no-deps" in argv and "--pre" in argv
    assert "abc123" in check and "torch.version.git_version" in check
    cuda = shlex.split(nightly_command("2.7.0", datetime(2026, 1, 2), site, "cuda", "abc123").split(" && ")[0])
    # CUDA nightlies come from the CUDA image's own variant (its Dockerfile's CUDA_VARIANT), or the one asked for.
    image_variant = re.search(r"^ARG CUDA_VARIANT=(\w+)$", (REPO / "docker" / "runner-cuda.Dockerfile").read_text(),
                              re.M).group(1)
    assert cuda[cuda.index("--index-url") + 1].endswith(f"/nightly/{image_variant}")
    other = shlex.split(nightly_command("2.7.0", datetime(2026, 1, 2), site, "cuda", "abc123", cuda="cu140"))
    assert other[other.index("--index-url") + 1].endswith("/nightly/cu140")


def test_source_command_builds_a_wheel_into_the_cache_and_installs_it(tmp_path):
    command = source_command(tmp_path / "site", tmp_path / "wheel", python="py")
    parts = command.split(" && ")
    assert parts[0].startswith("git submodule update --init --recursive")
    wheel = shlex.split(parts[1])
    assert wheel[:4] == ["py", "-m", "pip", "wheel"] and wheel[wheel.index("-w") + 1] == str(tmp_path / "wheel")
    assert "--target" in parts[2] and str(tmp_path / "site") in parts[2] and "torch-*.whl" in parts[2]


def test_version_base_from_version_txt(tmp_path):
    (tmp_path / "version.txt").write_text("2.7.0a0\n")
    assert torch_version_base(tmp_path) == "2.7.0"


def test_run_args_follow_perfdash_run_flags(tmp_path):
    target = TorchTarget(suite="timm_models", model="resnet18", metric="abs_latency", compile_mode="max-autotune",
                         threads=1, batch_size=4, dynamic_shapes=True, repeat=10)
    args = target.run_args(tmp_path)
    pairs = dict(itertools.pairwise(args))
    assert pairs["--suite"] == "timm_models" and pairs["--only"] == "resnet18"
    assert pairs["--compile-mode"] == "max-autotune" and pairs["--threads"] == "1" and pairs["--repeat"] == "10"
    assert "--processes" not in args  # not asked for: perfdash run's default (one process), as before
    assert "--performance" in args and "--accuracy" not in args and "--dynamic-shapes" in args
    assert "--accuracy" in TorchTarget(suite="timm_models", model="m", metric="accuracy").run_args(tmp_path)
    # The runner's own parser accepts every flag.
    from perfdash.cli import build_parser

    parsed = build_parser().parse_args(["run", *args])
    assert parsed.only == "resnet18" and parsed.batch_size == 4
    several = build_parser().parse_args(["run", *replace(target, processes=3).run_args(tmp_path)])
    assert several.processes == 3
    with pytest.raises(ValueError, match="processes"):
        TorchTarget(suite="timm_models", model="m", processes=0)
    assert target.key().filename("performance") == \
        "inductor_max_autotune_dynamic_timm_models_float32_inference_cpu_performance.csv"


def test_metric_is_read_through_the_result_contract(tmp_path):
    target = TorchTarget(suite="timm_models", model="resnet18", metric="abs_latency")
    path = tmp_path / target.key().filename("performance")
    append_row(path, PerformanceRow(dev="cpu", name="other", batch_size=4, speedup=2.0, abs_latency=9.0,
                                    compilation_latency=1.0, compression_ratio=1.0))
    append_row(path, PerformanceRow(dev="cpu", name="resnet18", batch_size=4, speedup=1.5, abs_latency=3.25,
                                    compilation_latency=12.0, compression_ratio=1.1))
    assert target.read_metric(tmp_path) == 3.25
    speedup = TorchTarget(suite="timm_models", model="resnet18", metric="speedup")
    assert speedup.read_metric(tmp_path) == 1.5

    failed = tmp_path / "failed"
    failed.mkdir()
    append_row(failed / target.key().filename("performance"), PerformanceRow.failure("cpu", "resnet18"))
    with pytest.raises(MeasureFailed, match="failed to run"):
        target.read_metric(failed)
    with pytest.raises(MeasureFailed, match="wrote no"):
        target.read_metric(tmp_path / "nothing")

    accuracy = TorchTarget(suite="timm_models", model="resnet18", metric="accuracy")
    append_row(tmp_path / accuracy.key().filename("accuracy"),
               AccuracyRow(dev="cpu", name="resnet18", batch_size=4, accuracy="fail_accuracy"))
    assert accuracy.read_metric(tmp_path) == "fail_accuracy"


def test_install_strategies_in_order_and_custom_install_per_commit(synth, tmp_path):
    history = synth.make_history(tmp_path, [synth.touch(1)], {"version.txt": "2.7.0a0\n",
                                                              "patch.py": "SCALE = 1.0\n"})
    target = TorchTarget(suite="timm_models", model="m")
    oracle = TorchOracle(repo=history.repo, measure_cmd="", cache_dir=tmp_path / "cache", target=target)
    src = oracle.source(history.shas[1])
    names = [name for name, _ in oracle.install_commands(history.shas[1], src)]
    assert names == ["nightly", "source"]
    nightly = oracle.install_commands(history.shas[1], src)[0][1]
    assert "torch==2.7.0.dev20260101" in nightly and str(oracle.site(history.shas[1])) in nightly

    custom = TorchOracle(repo=history.repo, measure_cmd="", cache_dir=tmp_path / "cache2", target=target,
                         strategy="custom", install_cmd='cp patch.py "$PERFBISECT_SITE/"')
    assert custom.build(history.shas[1]) is None
    assert (custom.site(history.shas[1]) / "patch.py").read_text() == "SCALE = 1.0\n"
    assert json.loads((tmp_path / "cache2" / history.shas[1] / "build.json").read_text())["ok"] is True
    broken = TorchOracle(repo=history.repo, measure_cmd="", cache_dir=tmp_path / "cache3", target=target,
                         strategy="custom", install_cmd="echo no wheel for this commit >&2; exit 1")
    assert "no wheel for this commit" in (broken.build(history.shas[1]) or "")


# A "compiler" whose bug makes compiled code differ from eager: installed per commit into PERFBISECT_SITE, used by
# a tiny model through perfdash run's py: builder.
PATCH_PY = "SCALE = {scale}\n"
BUILDER_PY = """\
import torch
from torch import nn

import tinypatch


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 8)

    def forward(self, x):
        y = self.lin(x)
        if torch.compiler.is_compiling():
            y = y * tinypatch.SCALE  # the commit under test decides what compiled code computes
        return y


def make(batch_size, training, **options):
    return Net(), (torch.randn(batch_size, 16),)
"""
MODELS_TOML = """\
[[model]]
name = "tiny_patched"
batch_size = 2
builder = "py:builder.py:make"
"""


@pytest.mark.slow
def test_pytorch_mode_bisects_with_install_cmd_and_the_real_perfdash_run(synth, tmp_path, capsys):
    def set_scale(value: str):
        def change(repo: Path) -> str:
            (repo / "tinypatch.py").write_text(PATCH_PY.format(scale=value))
            return f"compiler: scale {value}"
        return change

    history = synth.make_history(tmp_path, [synth.touch(1), set_scale("1.05"), synth.touch(3)],
                                 {"tinypatch.py": PATCH_PY.format(scale="1.0")})
    models = tmp_path / "models"
    models.mkdir()
    (models / "builder.py").write_text(BUILDER_PY)
    (models / "models.toml").write_text(MODELS_TOML)
    out = tmp_path / "result.json"
    code = main(["bisect", "--repo", str(history.repo), "--good", history.shas[0], "--bad", history.shas[-1],
                 "--suite", "timm_models", "--model", "tiny_patched", "--metric", "accuracy", "--backend", "eager",
                 "--models-file", str(models / "models.toml"), "--repeats", "1", "--processes", "2",
                 "--install-cmd", 'cp tinypatch.py "$PERFBISECT_SITE/"',
                 "--cache-dir", str(tmp_path / "cache"), "--json", str(out)])
    stderr = capsys.readouterr().err
    assert code == 0, stderr
    result = json.loads(out.read_text())
    assert result["verdict"] == "culprit_found", stderr
    assert result["culprit"]["sha"] == history.shas[2]
    assert result["good_samples"] == ["pass"] and result["bad_samples"] == ["fail_accuracy"]
    # Each commit measured with its own install: perfdash run wrote its CSVs under the commit's cache dir.
    run_dir = tmp_path / "cache" / history.shas[2] / "runs" / "0"
    assert list(run_dir.glob("eager_timm_models_*_accuracy.csv"))
    # --processes reached every perfdash run the bisection started, and the report says so.
    assert result["processes"] == 2
    manifests = list((tmp_path / "cache").glob("*/runs/*/*_manifest.json"))
    assert manifests and all(json.loads(m.read_text())["config"]["processes"] == 2 for m in manifests), manifests


def test_nightly_branch_maps_commits_to_wheel_dates_and_only_those_try_a_wheel(synth, tmp_path):
    history = synth.make_history(tmp_path, [synth.touch(n) for n in range(1, 5)], {"version.txt": "2.7.0a0\n"})
    git = synth.git
    git(history.repo, "checkout", "--quiet", "--orphan", "nightly")
    for day, index in (("2026-01-03", 1), ("2026-01-04", 3)):
        git(history.repo, "commit", "--quiet", "--allow-empty", "-m",
            f"{day} nightly release ({history.shas[index]})")
    git(history.repo, "commit", "--quiet", "--allow-empty", "-m", "unrelated maintenance commit")
    git(history.repo, "checkout", "--quiet", "main")

    from perfbisect.pytorch import nightly_commits

    nightlies = nightly_commits(history.repo, "nightly")
    assert {history.index(sha): str(day) for sha, day in nightlies.items()} == {1: "2026-01-03", 3: "2026-01-04"}
    assert nightly_commits(history.repo, "no-such-ref") == {}

    oracle = TorchOracle(repo=history.repo, measure_cmd="", cache_dir=tmp_path / "cache",
                         target=TorchTarget(suite="timm_models", model="m"), nightlies=nightlies)
    with_wheel = oracle.install_commands(history.shas[3], oracle.source(history.shas[3]))
    assert [name for name, _ in with_wheel] == ["nightly", "source"]
    assert "torch==2.7.0.dev20260104" in with_wheel[0][1]
    without = oracle.install_commands(history.shas[2], oracle.source(history.shas[2]))
    assert [name for name, _ in without] == ["source"]
