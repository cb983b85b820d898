"""bench/real_bisect.py: its repository's commits change what they say they change, and its nightly detection and
confirm-request statistics are the service's."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bench.real_bisect import CULPRIT, SCENARIOS, confirm_request_flags, make_repo, nightly_detection


def _settings_applied(repo: Path, sha: str) -> dict[str, object]:
    """The Inductor options ``settings.py`` at ``sha`` sets, applied to a recording stand-in of the config."""
    text = subprocess.run(["git", "show", f"{sha}:settings.py"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout
    path = repo / f"settings_{sha[:8]}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = SimpleNamespace(cpp=SimpleNamespace())
    module.apply(config)
    return {**{k: v for k, v in vars(config).items() if k != "cpp"},
            **{f"cpp.{k}": v for k, v in vars(config.cpp).items()}}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_only_the_culprit_and_after_leave_inductors_defaults(tmp_path: Path, name: str) -> None:
    """Every commit before the culprit sets options only to the installed Inductor's defaults; the culprit and the
    commit after it set the scenario's setting away from its default."""
    from torch._inductor import config as inductor

    scenario = SCENARIOS[name]
    shas = make_repo(tmp_path / "repo", scenario.commits(), scenario.batch_size, scenario.model)
    assert len(shas) == 5

    def changed(sha: str) -> dict[str, object]:
        out = {}
        for key, value in _settings_applied(tmp_path / "repo", sha).items():
            section, _, attr = key.rpartition(".")
            default = getattr(inductor.cpp if section else inductor, attr)
            if value != default:
                out[key] = value
        return out

    assert [bool(changed(sha)) for sha in shas] == [False, False, False, True, True]
    (key,) = changed(shas[CULPRIT])
    assert key in scenario.setting
    toml = (tmp_path / "repo" / "models.toml").read_text()
    assert f"batch_size = {scenario.batch_size}" in toml


def _nights(rng: np.random.Generator, level: float, step: float, cv: float):
    def measure(bad: bool) -> float:
        return float(level * (1 + (step if bad else 0.0)) * np.exp(rng.normal(0, cv)))
    return measure


def test_a_five_percent_step_in_one_percent_noise_is_detected_at_the_first_bad_night() -> None:
    found = nightly_detection(_nights(np.random.default_rng(3), 2.0, -0.05, 0.01), good_nights=10, max_bad_nights=5)
    assert found.detected_after is not None and 2 <= found.detected_after <= 5
    assert found.change_index == 10
    assert -7.0 < (found.change_pct or 0.0) < -3.0
    assert len(found.values) == 10 + found.detected_after
    assert found.false_alarms == []


def test_no_step_and_an_improvement_are_not_detected_as_the_regression() -> None:
    flat = nightly_detection(_nights(np.random.default_rng(4), 2.0, 0.0, 0.01), good_nights=10, max_bad_nights=5)
    assert flat.detected_after is None and flat.change_index is None and len(flat.values) == 15
    better = nightly_detection(_nights(np.random.default_rng(5), 2.0, 0.10, 0.01), good_nights=10, max_bad_nights=5)
    assert better.detected_after is None


def test_latency_regressions_go_up() -> None:
    found = nightly_detection(_nights(np.random.default_rng(6), 1.5, 0.08, 0.01), good_nights=10, max_bad_nights=5,
                              metric="abs_latency")
    assert found.change_index == 10 and (found.change_pct or 0.0) > 0


def test_confirm_request_flags_carry_the_series_noise_of_the_good_nights() -> None:
    rng = np.random.default_rng(8)
    good = list(2.0 * np.exp(rng.normal(0, 0.02, 400)))
    flags = confirm_request_flags(SCENARIOS["modest"], good)
    values = dict(zip(flags[::2], flags[1::2], strict=True))
    # 60 % of speedup's 5 % minimum effect, as the service's confirm request asks
    assert float(values["--threshold"]) == pytest.approx(3.0)
    # the newest 60 nights (the noise window) of a 2 % log-normal series
    assert 1.4 < float(values["--series-noise"]) < 2.6
    assert values["--series-noise-runs"] == "60"
    few = dict(zip(*(iter(confirm_request_flags(SCENARIOS["modest"], good[:4])),) * 2, strict=True))
    assert "--series-noise" not in few


def test_each_scenarios_model_is_the_repositorys_model(tmp_path: Path) -> None:
    from bench.real_bisect import DATA

    for name, scenario in SCENARIOS.items():
        make_repo(tmp_path / name, scenario.commits(), scenario.batch_size, scenario.model)
        assert (tmp_path / name / "model.py").read_text() == (DATA / scenario.model).read_text()
    assert "resnet18" in (tmp_path / "modest" / "model.py").read_text()
