"""bench.pt_lists (PyTorch's lists read from a harness copy, the seeded sample) and bench.pt_parity's share of cells
within target. The harness copy is written by the tests themselves: nothing of PyTorch's is in the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import pt_parity
from bench.pt_lists import (
    ListedModel,
    ListError,
    candidates,
    parse_models_list,
    read_skips,
    sample,
    sample_suite,
    skipped,
)
from bench.pt_parity import Model, RunResult, target_shares, within_target
from runner.suites.torchbench import installed_tree

TIMM = [f"timm_model_{i:02d}" for i in range(22)] + ["lcnet_050", "mobilenetv2_100"]
HF = [f"HfModel{i:02d}ForMaskedLM" for i in range(20)] + ["DistilBertForMaskedLM", "GPTJForCausalLM"]


def harness_copy(root: Path) -> Path:
    """A directory laid out as PyTorch's benchmarks/dynamo, with made-up lists in its formats."""
    (root / "common.py").write_text("")
    (root / "timm_models_list.txt").write_text("".join(f"{n} {8 * (i + 1)}\n" for i, n in enumerate(TIMM)))
    (root / "huggingface_models_list.txt").write_text(
        "".join(f"{n},{i + 1}\n" for i, n in enumerate(HF)) + "meta-llama/Llama-3.2-1B,1\n\n")
    (root / "huggingface.yaml").write_text("skip:\n  all:\n    - GPTJForCausalLM\n  device:\n    cpu:\n"
                                           "      - [HfModel00ForMaskedLM]\n")
    return root


def test_lists_in_each_suites_format() -> None:
    assert parse_models_list("# c\nresnet50 128\n\nvit_tiny  64\n", "timm_models") == [
        ListedModel("resnet50", 128), ListedModel("vit_tiny", 64)]
    assert parse_models_list("BertForMaskedLM,32\nT5Small, 2\n", "huggingface") == [
        ListedModel("BertForMaskedLM", 32), ListedModel("T5Small", 2)]
    with pytest.raises(ListError, match="line 2"):
        parse_models_list("BertForMaskedLM,32\nT5Small 2\n", "huggingface")


def test_skips_nested_lists_all_and_device() -> None:
    config = {"skip": {"all": ["a", ["b", ["c"]]], "device": {"cpu": ["d"], "cuda": ["e"]}}}
    assert skipped(config, "cpu") == {"a", "b", "c", "d"}
    assert skipped(config, "cuda") == {"a", "b", "c", "e"}
    assert skipped({}, "cpu") == set()


def test_candidates_leave_out_skips_llms_and_tuned(tmp_path: Path) -> None:
    root = harness_copy(tmp_path)
    assert read_skips(root, "huggingface", "cpu") == {"GPTJForCausalLM", "HfModel00ForMaskedLM"}
    assert read_skips(root, "timm_models", "cpu") == set()  # no yaml in the copy: nothing skipped
    listed = [ListedModel(n, 1) for n in ("b", "a", "org/llm", "skipme", "tuned")]
    assert candidates(listed, {"skipme"}, exclude=["tuned"]) == ["a", "b"]


def test_sample_is_seeded_sorted_and_bounded() -> None:
    names = [f"m{i:02d}" for i in range(40)]
    first = sample(names, 15, seed=1)
    assert first == sample(list(reversed(names)), 15, seed=1)  # same seed, same draw, whatever the order given
    assert first == sorted(first) and len(set(first)) == 15 and set(first) <= set(names)
    assert sample(names, 15, seed=2) != first
    assert sample(names[:5], 15, seed=1) == names[:5]  # fewer than asked: all of them
    with pytest.raises(ListError):
        sample(names, 0, seed=1)


def test_torchbench_reads_the_devices_own_list_and_its_yaml(tmp_path: Path) -> None:
    root = harness_copy(tmp_path)
    (root / "torchbench_models_list_cpu.txt").write_text("".join(f"tb_cpu_{i:02d},{i + 1}\n" for i in range(20)))
    (root / "torchbench_models_list.txt").write_text("".join(f"tb_gpu_{i:02d},{i + 1}\n" for i in range(20)))
    (root / "torchbench.yaml").write_text("skip:\n  all:\n    - tb_cpu_00\n  device:\n    cuda:\n      - tb_gpu_01\n")
    on_cpu = sample_suite(root, "torchbench", 15, seed=1, device="cpu", exclude=["tb_cpu_02"])
    assert len(on_cpu) == 15 and all(n.startswith("tb_cpu_") for n in on_cpu)
    assert not {"tb_cpu_00", "tb_cpu_02"} & set(on_cpu)
    on_cuda = sample_suite(root, "torchbench", 19, seed=1, device="cuda")
    assert len(on_cuda) == 19 and all(n.startswith("tb_gpu_") for n in on_cuda) and "tb_gpu_01" not in on_cuda
    assert parse_models_list("BERT_pytorch,32\n", "torchbench") == [ListedModel("BERT_pytorch", 32)]


def test_sample_suite_from_the_copy(tmp_path: Path) -> None:
    root = harness_copy(tmp_path)
    drawn = sample_suite(root, "huggingface", 15, seed=3, exclude=["DistilBertForMaskedLM"])
    assert len(drawn) == 15
    assert not {"GPTJForCausalLM", "HfModel00ForMaskedLM", "DistilBertForMaskedLM"} & set(drawn)
    assert not any("/" in n for n in drawn)
    with pytest.raises(ListError, match="not there"):
        sample_suite(tmp_path / "elsewhere", "timm_models", 15, seed=3)


def test_sampled_models_never_draw_the_tuned_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = harness_copy(tmp_path)
    monkeypatch.setattr(pt_parity, "hf_weight_sizes", lambda entries: {})  # sizes: the test below
    for seed in range(10):
        args = pt_parity.build_parser().parse_args(["--pytorch-dir", str(root), "--sample-suite", "timm_models",
                                                    "--sample-suite", "huggingface", "--seed", str(seed)])
        args.sampled = {}
        models = pt_parity.sampled_models(args)
        assert len(models) == 30
        assert {m.label for m in models}.isdisjoint(pt_parity.TUNED)
        assert {m.batch_size for m in models if m.suite == "timm_models"} == {8}
        assert {m.batch_size for m in models if m.suite == "huggingface"} == {2}
        assert set(args.sampled) == {"timm_models", "huggingface"}
    args.sample = 14
    with pytest.raises(ListError, match="at least 15"):
        pt_parity.sampled_models(args)


def test_within_target_limits() -> None:
    assert within_target("speedup", 1.05, 1.0) and within_target("speedup", 0.95, 1.0)
    assert not within_target("speedup", 1.051, 1.0)
    assert within_target("compilation_latency", 0.9, 1.0) and not within_target("compression_ratio", 0.89, 1.0)
    assert within_target("abs_latency", None, 1.0) is None and within_target("abs_latency", 1.0, 0.0) is None


def perf(side: str, model: Model, rnd: int, **row: float) -> RunResult:
    return RunResult(side, model.label, rnd, "performance", row={k: str(v) for k, v in row.items()})


def test_shares_over_model_medians() -> None:
    a, b, c = (Model("timm_models", n, 8) for n in "abc")
    results = [
        # a: speedup medians 2.0 / 2.08 (within 5 %), compile 10 / 8.5 (outside 10 %)
        perf("pytorch", a, 1, speedup=2.0, abs_latency=10, compilation_latency=10, compression_ratio=0.9),
        perf("perfdash", a, 1, speedup=2.2, abs_latency=10, compilation_latency=8.0, compression_ratio=0.9),
        perf("perfdash", a, 2, speedup=1.96, abs_latency=10, compilation_latency=9.0, compression_ratio=0.9),
        # b: every metric far apart
        perf("pytorch", b, 1, speedup=1.0, abs_latency=10, compilation_latency=10, compression_ratio=0.9),
        perf("perfdash", b, 1, speedup=1.2, abs_latency=20, compilation_latency=20, compression_ratio=0.5),
        # c: perfdash failed to run: counts against every share
        perf("pytorch", c, 1, speedup=1.0, abs_latency=10, compilation_latency=10, compression_ratio=0.9),
        RunResult("perfdash", c.label, 1, "performance", error="exit 1"),
        RunResult("pytorch", a.label, 1, "accuracy", row={"accuracy": "pass"}),
        RunResult("perfdash", a.label, 1, "accuracy", row={"accuracy": "pass"}),
        RunResult("pytorch", b.label, 1, "accuracy", row={"accuracy": "pass"}),
        RunResult("perfdash", b.label, 1, "accuracy", row={"accuracy": "fail_accuracy"}),
        RunResult("pytorch", c.label, 1, "accuracy", row={"accuracy": "pass"}),
        RunResult("perfdash", c.label, 1, "accuracy", error="exit 1"),
    ]
    shares = {s.metric: s for s in target_shares([a, b, c], results)}
    assert (shares["speedup"].within, shares["speedup"].measured, shares["speedup"].total) == (1, 2, 3)
    assert shares["abs_latency"].within == 1
    assert shares["compilation_latency"].within == 0  # a's median 8.5 / 10
    assert shares["compression_ratio"].within == 1
    assert (shares["accuracy"].within, shares["accuracy"].measured) == (1, 2)
    assert shares["speedup"].share == pytest.approx(1 / 3)
    table = "\n".join(pt_parity.shares_table(list(shares.values())))
    assert "| speedup | ±5% | 1 / 3 | 33% | 2 |" in table


def test_perfdash_side_finds_a_model_in_its_lists(tmp_path: Path) -> None:
    """A sampled model runs from perfdash's own list entry (its builder options), the extended list if need be; only a
    model in neither gets a one-model list."""
    args = pt_parity.build_parser().parse_args(["--pytorch-dir", str(tmp_path)])
    default = pt_parity.perfdash_command(args, Model("huggingface", "GoogleFnet", 2), "performance", tmp_path / "a")
    assert default[default.index("--only") + 1] == "GoogleFnet" and "--model-list" not in default
    extended = next(n for n in pt_parity.perfdash_models("timm_models", "extended")
                    if n not in pt_parity.perfdash_models("timm_models"))
    cmd = pt_parity.perfdash_command(args, Model("timm_models", extended, 8), "performance", tmp_path / "b")
    assert cmd[cmd.index("--model-list") + 1] == "extended" and cmd[cmd.index("--only") + 1] == extended
    cmd = pt_parity.perfdash_command(args, Model("timm_models", "resnet18", 8), "performance", tmp_path / "c")
    assert "--models-file" in cmd and (tmp_path / "c" / "models.toml").is_file()


def test_the_draw_says_what_it_left_out_and_when_it_is_short(tmp_path: Path) -> None:
    args = pt_parity.build_parser().parse_args(["--pytorch-dir", str(tmp_path), "--seed", "4"])
    args.sampled = {"torchbench": ["dcgan", "tts_angular"], "timm_models": [f"m{i}" for i in range(15)]}
    args.left_out = {"torchbench": {"alexnet": "downloads pretrained weights when built: TorchVisionModel (...)"}}
    lines = pt_parity.draw_lines(args)
    assert lines[0] == ("torchbench seed 4, 2 models (only 2 of the 15 asked: no more can run here): dcgan, "
                        "tts_angular.")
    assert lines[1].startswith("torchbench: left out as unrunnable here (1): alexnet (downloads pretrained weights")
    assert lines[2].startswith("timm_models seed 4, 15 models: m0, ") and len(lines) == 3


@pytest.mark.skipif(installed_tree() is None, reason="no TorchBench installed")
def test_unrunnable_here_holds_the_torchvision_models() -> None:
    listed = [ListedModel(n, 4) for n in ("alexnet", "resnet50", "dcgan", "BERT_pytorch",
                                          "attention_is_all_you_need_pytorch")]
    why = pt_parity.unrunnable_here("torchbench", listed)
    assert set(why) == {"alexnet", "resnet50", "attention_is_all_you_need_pytorch"}
    assert "pretrained weights" in why["alexnet"]
    # PyTorch's CPU list still names it; the pinned TorchBench no longer holds it (both sides fail to load it)
    assert why["attention_is_all_you_need_pytorch"].startswith("not in TorchBench ")
    assert pt_parity.unrunnable_here("timm_models", listed) == {}


def test_a_huggingface_model_too_large_for_the_machine_is_left_out() -> None:
    """Weights counted on the meta device from perfdash's own entries (nothing allocated): on a machine of 1 GB,
    DistilBertForMaskedLM (about 0.27 GB, three times 0.8 GB) fits and BertForMaskedLM (about 0.44 GB) does not; a
    name perfdash's lists lack is not judged."""
    listed = [ListedModel(n, 2) for n in ("DistilBertForMaskedLM", "BertForMaskedLM", "NotAModelForMaskedLM")]
    why = pt_parity.too_large_here(listed, memory_bytes=10**9)
    assert set(why) == {"BertForMaskedLM"}
    assert why["BertForMaskedLM"].startswith("its weights, 0.4 GB, held 3 times")
    assert pt_parity.too_large_here(listed, memory_bytes=64 * 10**9) == {}


def _perf(side: str, rnd: int, compile_s: float, abs_ms: float = 5889.0, speedup: float = 1.231) -> RunResult:
    return RunResult(side=side, model="torchbench:pytorch_unet", round=rnd, kind="performance",
                     row={"compilation_latency": str(compile_s), "abs_latency": str(abs_ms), "speedup": str(speedup)})


def test_compile_cells_are_judged_round_by_round() -> None:
    """pytorch_unet's compile latency on 2026-11-29 (tb12): 9.78 / 12.39 s in round 1 and 14.91 / 12.19 s in round
    2, outside ±10 % on both sides of it in turn; the median is within, and the rounds say it is unsettled."""
    model = Model("torchbench", "pytorch_unet", 2)
    results = [_perf("pytorch", 1, 12.39), _perf("perfdash", 1, 9.78), _perf("pytorch", 2, 12.19),
               _perf("perfdash", 2, 14.91), RunResult(side="perfdash", model=model.label, round=2, kind="accuracy")]
    ratios = pt_parity.compile_rounds(model, results)
    assert ratios == pytest.approx([9.78 / 12.39, 14.91 / 12.19])
    assert pt_parity.compile_verdict(ratios) == "unsettled"
    assert pt_parity.compile_verdict([0.95, 1.08]) == "within"
    assert pt_parity.compile_verdict([1.15, 1.2]) == "outside"
    assert pt_parity.compile_verdict([0.97, 1.2]) == "unsettled"
    assert pt_parity.compile_verdict([]) == "not measured"
    # 5 eager steps of 7.25 s and 5 compiled of 5.89 s are 65.7 s of stepping under a compile latency of about 12.3 s
    blocks = pt_parity.warmup_blocks_per_compile_second(model, results)
    assert blocks == pytest.approx(5 * 5.889 * 2.231 / 12.29, rel=1e-3)
    table = "\n".join(pt_parity.compile_account_table([model], results))
    assert "| torchbench:pytorch_unet | 0.789, 1.223 | 1.006 | 5.35 | unsettled |" in table
    assert "Compile latency cells: 0 within, 0 outside, 1 unsettled, 0 not measured." in table


def test_a_model_that_ran_past_the_timeout_is_not_run_again(tmp_path: Path) -> None:
    """dinov2 at batch 8 took 11 s a step here: its first run timed out, and each further try (the other side, the
    accuracy runs, round 2) would cost the timeout again. The bench runs it no more and says why on every cell."""
    args = pt_parity.build_parser().parse_args(["--pytorch-dir", str(tmp_path), "--rounds", "2", "--timeout", "900"])
    slow, quick = Model("timm_models", "slow", 8), Model("timm_models", "quick", 8)
    ran: list[tuple[int, str, str, str]] = []

    def run(args: object, side: str, model: Model, kind: str, rnd: int, work: Path) -> RunResult:
        ran.append((rnd, side, model.name, kind))
        if model is slow:
            return RunResult(side, model.label, rnd, kind, error="timed out after 900 s")
        return RunResult(side, model.label, rnd, kind, row={"speedup": "1.5", "accuracy": "pass"})

    results, first_use, _ = pt_parity.run_rounds(args, [slow, quick], tmp_path, run=run,
                                                 calibrate=lambda args, work: None,
                                                 first_use_of=lambda args, work: None)
    assert [r for r in ran if r[2] == "slow"] == [(1, "pytorch", "slow", "performance")]
    assert len([r for r in ran if r[2] == "quick"]) == 6  # two sides: performance twice, accuracy once
    skipped = [r for r in results if r.model == slow.label and r.error.startswith("not run:")]
    assert len(skipped) == 5
    assert skipped[0].error == "not run: its pytorch performance run in round 1 timed out after 900 s"
    assert first_use == []
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 12
