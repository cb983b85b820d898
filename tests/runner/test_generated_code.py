"""The worker fingerprints what Inductor generated and profiles its kernels, on a real tiny model in real worker
processes: the same code cold and from a warm FX graph cache has one digest; an Inductor setting that changes the
code (perfdash run --inductor-config) changes the kernels the comparison names."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfdash.code_change import CODE_CHANGED, CODE_UNCHANGED, CodeSide, compare_code
from perfdash.contract import ModelSamples, read_samples
from perfdash.generated_code import unpack_source
from perfdash.manifest import Manifest
from runner.api import RunReport, run_suite
from runner.generated_code import PROFILE_STEPS, kernel_profile, profile_steps, profile_warm_call
from runner.inductor_overrides import ENV_NAME, encode, parse
from runner.options import RunOptions

DATA = Path(__file__).parent / "data"
TIMEOUT_S = 300.0  # a cold compile of a tiny model on a busy 2-core machine


def _run(out: Path, cache: Path, **env: str) -> RunReport:
    return run_suite(RunOptions(suite="huggingface", models_file=DATA / "tiny_real.toml", only="tiny_mlp",
                                backend="inductor", repeat=3, performance=True, timeout_s=TIMEOUT_S, output_dir=out,
                                extra_env={"TORCHINDUCTOR_CACHE_DIR": str(cache), **env}))


def _entries(cache: Path) -> set[Path]:
    """Inductor's FX graph cache entries."""
    return {p for p in (cache / "fxgraph").rglob("*") if p.is_file()}


def _side(samples: ModelSamples) -> CodeSide:
    assert samples.code is not None
    return CodeSide(samples.code.digest, samples.code.kernel_map, {k.name: k.self_us for k in samples.kernel_times})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelSamples]:
    root = tmp_path_factory.mktemp("code")
    cache = root / "inductor-cache"
    out = {}
    # Inductor does not cache graphs with frozen weights (CPU inference's TORCHINDUCTOR_FREEZING=1 recompiles every
    # time): without freezing, the second run loads the graph from the FX graph cache.
    unfrozen = {"TORCHINDUCTOR_FREEZING": "0"}
    out["cold"] = read_samples(_run(root / "cold", cache, **unfrozen).paths.samples)[0]
    written = _entries(cache)
    out["warm"] = read_samples(_run(root / "warm", cache, **unfrozen).paths.samples)[0]
    assert written and _entries(cache) == written  # a cache hit: no new entry
    out["frozen"] = read_samples(_run(root / "frozen", cache).paths.samples)[0]
    # No vector ISA is 1 bit wide, so Inductor's C++ kernels go scalar on every CPU (256 is AVX2's own width: on an
    # AVX2-only machine it would change nothing)
    overridden = _run(root / "simd", cache, **{ENV_NAME: encode(["cpp.simdlen=1"])})
    manifest = Manifest.read(overridden.paths.manifest)
    assert manifest.config.env[ENV_NAME] == "cpp.simdlen=1"  # recorded, and part of the configuration
    out["scalar"] = read_samples(overridden.paths.samples)[0]
    return out


def test_cold_and_warm_cache_give_the_same_fingerprint(runs: dict[str, ModelSamples]) -> None:
    cold, warm = runs["cold"].code, runs["warm"].code
    assert cold is not None and warm is not None
    assert cold.digest == warm.digest and cold.graphs == 1
    assert [n for n, _ in cold.kernel_digests] == ["cpp_fused_relu_0"]  # the linears are library calls (addmm)
    frozen = runs["frozen"].code
    assert frozen is not None and frozen.digest != cold.digest  # frozen weights: bias folded into two kernels
    assert [n for n, _ in frozen.kernel_digests] == ["cpp_fused_addmm_relu_0", "cpp_fused_addmm_relu_1"]
    assert runs["cold"].code_source and runs["warm"].code_source
    assert compare_code(_side(runs["cold"]), _side(runs["warm"]), False).verdict == CODE_UNCHANGED


def test_the_profile_names_inductors_cpp_kernels(runs: dict[str, ModelSamples]) -> None:
    # ... without compiling a profiler hook into the timed model's kernels (cpp.enable_kernel_profile): the code
    # timed is the code a user's torch.compile gets, and its compile costs what theirs does
    for side in ("cold", "frozen"):
        packed = runs[side].code_source
        assert packed is not None and "RecordFunction" not in unpack_source(packed)
    assert "cpp_fused_relu_0" in {k.name for k in runs["warm"].kernel_times}
    assert {"cpp_fused_addmm_relu_0", "cpp_fused_addmm_relu_1"} <= {k.name for k in runs["frozen"].kernel_times}
    assert all(0 <= k.share <= 1 and k.calls > 0 for k in runs["warm"].kernel_times)
    shares = [k.share for k in runs["warm"].kernel_times]
    assert shares == sorted(shares, reverse=True)


def test_an_inductor_setting_changes_the_kernels_it_touches(runs: dict[str, ModelSamples]) -> None:
    change = compare_code(_side(runs["frozen"]), _side(runs["scalar"]), environment_changed=True)
    assert change.verdict == CODE_CHANGED
    # scalar code instead of the machine's vectors: the vectorised kernel changes
    assert "cpp_fused_addmm_relu_0" in change.changed


def test_inductor_config_flags_are_checked_and_sorted() -> None:
    assert encode(["triton.unique_kernel_names=True", "cpp.simdlen=256"]) == \
        "cpp.simdlen=256;triton.unique_kernel_names=True"
    assert parse("cpp.simdlen=256;max_autotune=True;cpp.cxx=g++") == \
        {"cpp.simdlen": 256, "max_autotune": True, "cpp.cxx": "g++"}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        encode(["simdlen"])


def test_a_long_step_is_profiled_fewer_times() -> None:
    """The profile takes as many compiled steps as fit in its budget, at least one and at most PROFILE_STEPS: a
    5.5 s step (pytorch_unet) is profiled once instead of three times, a millisecond step as before."""
    assert profile_steps(0.002) == PROFILE_STEPS
    assert profile_steps(0.4) == 2
    assert profile_steps(0.55) == 1
    assert profile_steps(5.5) == 1
    assert profile_steps(0.0) == PROFILE_STEPS  # no timing to go by: as before
    # the profiler's warm-up call only where its first-event costs could weigh: not before a second-long step
    assert profile_warm_call(0.002) and profile_warm_call(0.5) and profile_warm_call(0.0)
    assert not profile_warm_call(1.4)


def test_a_profile_without_its_warm_up_call_calls_the_step_only_for_its_steps() -> None:
    import torch

    calls: list[int] = []
    weight = torch.randn(8, 8)

    def step() -> torch.Tensor:
        calls.append(1)
        return torch.mm(weight, weight)

    assert kernel_profile(step, "cpu", steps=1, warm_call=False)  # a kernel table all the same
    assert len(calls) == 1
    assert kernel_profile(step, "cpu", steps=2) and len(calls) == 1 + 3
