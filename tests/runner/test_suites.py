"""Suite data files, model selection and partitions, and the errors reported before any work starts (no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfdash.cli import main
from runner.options import OptionsError, RunOptions, partition, select_models, validate
from runner.suites import SuiteError, available_suites, get_suite
from runner.suites.base import ToleranceQuery, default_batch_size, load_model_list

DATA = Path(__file__).parent / "data"


# PyTorch's current lists (benchmarks/dynamo/timm_models_list.txt; huggingface_models_list.txt less the entries its
# huggingface.yaml skips and the hub LLMs it times with generate()), read 2026-11-24: see the data files' headers.
PYTORCH_TIMM = {
    "adv_inception_v3", "beit_base_patch16_224", "convnextv2_nano.fcmae_ft_in22k_in1k",
    "deit_base_distilled_patch16_224", "deit_tiny_patch16_224.fb_in1k", "dm_nfnet_f0", "ghostnet_100", "inception_v3",
    "mobilenetv2_100", "mobilenetv3_large_100", "mobilevit_s", "nfnet_l0", "repvgg_a2", "swin_base_patch4_window7_224",
    "tf_efficientnet_b0", "visformer_small", "vit_base_patch14_dinov2.lvd142m", "vit_base_patch16_siglip_256"}
PYTORCH_HUGGINGFACE = {
    "AlbertForMaskedLM", "AllenaiLongformerBase", "BartForCausalLM", "BertForMaskedLM", "BlenderbotForCausalLM",
    "DebertaV2ForMaskedLM", "DistilBertForMaskedLM", "DistillGPT2", "ElectraForCausalLM",
    "GPT2ForSequenceClassification", "GoogleFnet", "LayoutLMForMaskedLM", "M2M100ForConditionalGeneration",
    "MBartForCausalLM", "MT5ForConditionalGeneration", "MegatronBertForCausalLM", "MobileBertForMaskedLM",
    "OPTForCausalLM", "PLBartForCausalLM", "PegasusForCausalLM", "RobertaForCausalLM", "T5ForConditionalGeneration",
    "T5Small", "TrOCRForCausalLM", "XGLMForCausalLM", "XLNetLMHeadModel", "YituTechConvBert"}


def test_default_lists_are_pytorchs_current_lists_in_its_order() -> None:
    assert {"torchbench", "huggingface", "timm_models"} <= set(available_suites())
    for suite, names in (("timm_models", PYTORCH_TIMM), ("huggingface", PYTORCH_HUGGINGFACE)):
        models = [m.name for m in get_suite(suite).models()]
        assert set(models) == names, suite
        assert models == sorted(models), suite  # PyTorch's harness runs (and shards) them sorted by name
    tb = get_suite("torchbench").models()
    assert {"BERT_pytorch", "lennard_jones", "resnet18", "mobilenet_v2", "alexnet"} <= {m.name for m in tb}


def test_only_finds_a_model_of_another_list_of_the_suite() -> None:
    # A bisection reruns one model by name; the quick nightly measures lcnet_050 from the extended list.
    _, models = validate(RunOptions(suite="timm_models", only="lcnet_050"))
    assert [(m.name, m.batch_size) for m in models] == [("lcnet_050", 256)]
    with pytest.raises(OptionsError, match="no model of suite timm_models matches"):
        validate(RunOptions(suite="timm_models", filters=("^lcnet_050$",)))  # a filter selects from the chosen list


@pytest.mark.parametrize("suite", ["timm_models", "huggingface"])
def test_the_extended_list_holds_the_default_one_and_the_earlier_models(suite: str) -> None:
    default = {m.name: m for m in get_suite(suite).models()}
    extended = {m.name: m for m in get_suite(suite).models(model_list="extended")}
    assert len(extended) > len(default)
    for name, spec in default.items():
        assert extended[name] == spec, name  # same builder, options and batch size in both files
    earlier = {"timm_models": {"lcnet_050", "resnest101e", "vit_base_patch16_224", "levit_128"},
               "huggingface": {"BlenderbotSmallForCausalLM", "CamemBert"}}[suite]
    assert earlier <= set(extended) and not earlier & set(default)


def test_builders_follow_the_suite() -> None:
    hf = {m.name: m for m in get_suite("huggingface").models()}
    assert hf["T5Small"].builder == "hf:T5ForConditionalGeneration"
    assert hf["T5Small"].options["config"]["d_model"] == 512
    assert {m.builder_kind for m in get_suite("timm_models").models()} == {"timm"}
    for device in ("cpu", "cuda"):  # PyTorch's TorchBench, never a stand-in
        assert {m.builder_kind for m in get_suite("torchbench").models(device=device)} == {"torchbenchmark"}


def test_tolerances_follow_pytorch_rules() -> None:
    timm, hf, tb = get_suite("timm_models"), get_suite("huggingface"), get_suite("torchbench")
    assert timm.tolerance_for(ToleranceQuery("lcnet_050", "inference", "cpu", "float32")).tol == 1e-3
    assert timm.tolerance_for(ToleranceQuery("lcnet_050", "training", "cpu", "float32")).tol == 1e-2
    assert timm.tolerance_for(ToleranceQuery("inception_v3", "training", "cpu", "float32")).tol == 4e-2
    assert hf.tolerance_for(ToleranceQuery("BertForMaskedLM", "inference", "cpu", "float32")).tol == 1e-3
    assert hf.tolerance_for(ToleranceQuery("DistilBertForMaskedLM", "training", "cuda", "float32")).tol == 1e-2
    assert hf.tolerance_for(ToleranceQuery("BertForMaskedLM", "training", "cuda", "float32")).tol == 2e-2
    assert timm.tolerance_for(ToleranceQuery("beit_base_patch16_224", "training", "cpu", "float32")).tol == 16e-2
    assert timm.tolerance_for(ToleranceQuery("vit_base_patch16_siglip_256", "training", "cpu", "float32")).tol == 8e-2
    assert timm.tolerance_for(ToleranceQuery("adv_inception_v3", "inference", "cpu", "float32", freezing=True)).tol \
        == 8e-2
    assert timm.tolerance_for(ToleranceQuery("adv_inception_v3", "inference", "cpu", "float32")).tol == 1e-3
    # huggingface.yaml's lists: BertForMaskedLM trains at 2e-2, GPT2ForSequenceClassification infers at 4e-3 (5e-3
    # on CPU); its large models are not checked; huggingface.py gives two models the larger RMSE multiplier.
    assert hf.tolerance_for(ToleranceQuery("GPT2ForSequenceClassification", "inference", "cuda", "float32")).tol == 4e-3
    assert hf.tolerance_for(ToleranceQuery("GPT2ForSequenceClassification", "inference", "cpu", "float32")).tol == 5e-3
    assert hf.tolerance_for(ToleranceQuery("DebertaV2ForMaskedLM", "inference", "cpu", "float32")).skip
    assert not hf.tolerance_for(ToleranceQuery("DistilBertForMaskedLM", "inference", "cpu", "float32")).skip
    assert hf.tolerance_for(ToleranceQuery("BertForMaskedLM", "inference", "cpu", "float32")).larger_multiplier
    assert tb.tolerance_for(ToleranceQuery("resnet18", "inference", "cpu", "float32")).tol == 1e-4
    assert tb.tolerance_for(ToleranceQuery("resnet18", "inference", "cuda", "float16")).tol == 1e-3
    assert tb.tolerance_for(ToleranceQuery("resnet18", "training", "cuda", "float32")).tol == 1e-3


@pytest.mark.parametrize("suite", ["torchbench", "huggingface", "timm_models"])
@pytest.mark.parametrize("total", [1, 2, 3, 7])
def test_partitions_cover_every_model_exactly_once(suite: str, total: int) -> None:
    models = get_suite(suite).models()
    shares = [select_models(models, RunOptions(suite=suite, total_partitions=total, partition_id=i))
              for i in range(total)]
    names = [m.name for share in shares for m in share]
    assert sorted(names) == sorted(m.name for m in models)
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_partition_of_more_shares_than_models_leaves_some_empty() -> None:
    models = get_suite("torchbench").models()[:3]
    shares = [partition(models, 5, i) for i in range(5)]
    assert [len(s) for s in shares] == [1, 1, 1, 0, 0]


def test_filter_exclude_only() -> None:
    models = get_suite("timm_models").models(model_list="extended")
    chosen = select_models(models, RunOptions(suite="timm_models", filters=("^res",), excludes=("101",)))
    assert chosen and all(m.name.startswith("res") and "101" not in m.name for m in chosen)
    assert [m.name for m in select_models(models, RunOptions(suite="timm_models", only="lcnet_050"))] == ["lcnet_050"]


@pytest.mark.parametrize("options, message", [
    (RunOptions(suite="timm_models", only="no_such_model"), "no such model"),
    (RunOptions(suite="timm_models", filters=("(",)), "invalid regular expression"),
    (RunOptions(suite="timm_models", filters=("^zzz",)), "matches"),
    (RunOptions(suite="timm_models", total_partitions=2, partition_id=2), "--partition-id"),
    (RunOptions(suite="timm_models", repeat=0), "--repeat"),
    (RunOptions(suite="timm_models", processes=0), "--processes"),
    (RunOptions(suite="timm_models", repeat=4, processes=5), "--processes must be in"),
    (RunOptions(suite="timm_models", timeout_s=0), "--timeout"),
    (RunOptions(suite="timm_models", backend="tensorrt"), "--backend"),
    (RunOptions(suite="nope"), "unknown suite"),
    (RunOptions(suite="timm_models", model_list="nope"), "no model list 'nope'; available: default, extended"),
    (RunOptions(suite="torchbench", model_list="nope"), "no model list 'nope'; available: default, extended, gpu"),
    (RunOptions(suite="timm_models", model_list="extended", models_file=Path("x.toml")), "alternatives"),
])
def test_bad_options_are_rejected_with_a_message(options: RunOptions, message: str) -> None:
    with pytest.raises(OptionsError, match=message.replace("(", r"\(")):
        validate(options)


def test_cli_rejects_an_unknown_model_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["run", "--suite", "huggingface", "--only", "NoSuchModel", "--output-dir", str(out)]) == 2
    assert "NoSuchModel" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(SystemExit) as exc:
        main(["run", "--suite", "huggingface", "--dtype", "float64"])
    assert exc.value.code == 2


def test_models_file_errors_name_the_file_and_entry(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[model]]\nname = "a"\nbatch_size = 1\n[[model]]\nname = "a"\nbatch_size = 2\n')
    with pytest.raises(SuiteError, match=r"bad.toml: model #2: duplicate model name 'a'"):
        load_model_list(bad, "timm")
    bad.write_text('[[model]]\nname = "a"\nbatch_size = "8"\n')
    with pytest.raises(SuiteError, match="batch_size"):
        load_model_list(bad, "timm")
    bad.write_text('[[model]]\nname = "a"\nbatch_size = 8\nbuilder = "nokind"\n')
    with pytest.raises(SuiteError, match="kind:target"):
        load_model_list(bad, "timm")
    with pytest.raises(OptionsError, match="cannot read"):
        validate(RunOptions(suite="timm_models", models_file=tmp_path / "missing.toml"))


def test_test_model_lists_load() -> None:
    for path in DATA.glob("*.toml"):
        assert load_model_list(path, "py")


@pytest.mark.parametrize("recorded, divisor, expected", [(256, 2, 128), (128, 2, 64), (23, 4, 5), (1, 8, 1),
                                                        (4, 8, 1), (32, None, 32)])
def test_default_batch_size_is_pytorchs_divisor_rule(recorded: int, divisor: int | None, expected: int) -> None:
    assert default_batch_size(recorded, divisor) == expected


def test_a_lists_divisors_apply_to_its_own_entries(tmp_path: Path) -> None:
    path = tmp_path / "list.toml"
    path.write_text('[batch_size.divisors]\na = 4\nnot_listed = 2\n\n'
                    '[[model]]\nname = "a"\nbatch_size = 13\n\n[[model]]\nname = "b"\nbatch_size = 13\n')
    assert [(m.name, m.batch_size) for m in load_model_list(path, "timm")] == [("a", 3), ("b", 13)]


def test_a_training_batch_size_applies_in_training_only(tmp_path: Path) -> None:
    from runner.api import make_job

    path = tmp_path / "list.toml"
    path.write_text('[batch_size.training]\na = 4\n\n[[model]]\nname = "a"\nbatch_size = 64\n')
    (spec,) = load_model_list(path, "torchvision")
    suite = get_suite("torchbench")
    for mode, expected in (("inference", 64), ("training", 4)):
        assert make_job(RunOptions(suite="torchbench", mode=mode), suite, spec).batch_size == expected, mode
    assert make_job(RunOptions(suite="torchbench", mode="training", batch_size=2), suite, spec).batch_size == 2
    # torchbench.yaml batch_size.training: densenet121 trains at 4; otherwise PyTorch's list's size in both modes
    models = {m.name: m for m in suite.models()}
    for name, sizes in (("densenet121", (512, 4)), ("vgg16", (64, 64))):
        assert (models[name].default_batch_size("inference"), models[name].default_batch_size("training")) == sizes


@pytest.mark.parametrize("table, message", [
    ("[batch_size.divisors]\na = 0\n", "divisors of 'a' must be a positive integer"),
    ("[batch_size.divisors]\na = 1.5\n", "divisors of 'a' must be a positive integer"),
    ("[batch_size.training]\na = -4\n", "training of 'a' must be a positive integer"),
    ("[batch_size]\nsizes = 2\n", "may only hold"),
    ("[batch_size]\ndivisors = 2\n", "must map model names"),
])
def test_bad_divisors_name_the_file(tmp_path: Path, table: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(table + '\n[[model]]\nname = "a"\nbatch_size = 8\n')
    with pytest.raises(SuiteError, match=f"bad.toml: .*{message}"):
        load_model_list(path, "timm")


def test_default_batch_sizes_are_pytorchs_on_every_device() -> None:
    """The batch sizes PyTorch's harness picks by default: list size over yaml divisor (its current huggingface.py and
    timm_models.py apply the divisors on every device)."""
    hf = {m.name: m.batch_size for m in get_suite("huggingface").models()}
    timm = {m.name: m.batch_size for m in get_suite("timm_models").models()}
    assert hf["DistilBertForMaskedLM"] == 128  # 256 / 2
    assert hf["BlenderbotForCausalLM"] == 4  # 32 / 8
    assert hf["MobileBertForMaskedLM"] == 128  # 256 / 2
    assert hf["OPTForCausalLM"] == 2  # 4 / 2
    for name in ("beit_base_patch16_224", "deit_base_distilled_patch16_224", "mobilevit_s",
                 "swin_base_patch4_window7_224"):
        assert timm[name] == 64, name  # 128 / 2
    assert timm["adv_inception_v3"] == 128 and timm["ghostnet_100"] == 512  # no divisor
    from runner.api import make_job

    options = RunOptions(suite="timm_models", only="mobilevit_s")
    suite, models = validate(options)
    assert make_job(options, suite, models[0]).batch_size == 64
    options = RunOptions(suite="timm_models", only="mobilevit_s", batch_size=3)
    assert make_job(options, suite, models[0]).batch_size == 3  # --batch-size overrides the default


def test_accuracy_is_checked_at_pytorch_accuracy_batch_sizes() -> None:
    """common.py run() with --accuracy and no --batch-size: huggingface 1, torchbench 4, timm_models 8."""
    from runner.api import make_job

    for suite_name, expected in (("huggingface", 1), ("torchbench", 4), ("timm_models", 8)):
        suite = get_suite(suite_name)
        spec = suite.models()[0]
        job = make_job(RunOptions(suite=suite_name), suite, spec)
        assert (job.batch_size, job.accuracy_batch_size) == (spec.batch_size, expected)
        given = make_job(RunOptions(suite=suite_name, batch_size=3), suite, spec)
        assert (given.batch_size, given.accuracy_batch_size) == (3, 3)
        checked_only = make_job(RunOptions(suite=suite_name, accuracy=True), suite, spec)
        assert (checked_only.batch_size, checked_only.accuracy_batch_size) == (expected, expected)  # one build
    suite = get_suite("torchbench")
    unet = next(m for m in suite.models() if m.name == "pytorch_unet")  # torchbench.yaml accuracy.max_batch_size 2
    job = make_job(RunOptions(suite="torchbench", accuracy=True), suite, unet)
    assert (job.batch_size, job.accuracy_batch_size) == (2, 2)
    job = make_job(RunOptions(suite="torchbench"), suite, unet)
    assert (job.batch_size, job.accuracy_batch_size) == (unet.batch_size, 2)


def test_a_job_carries_the_runs_settings_through_the_worker_protocol() -> None:
    # Each of ModelSettings' fields reaches the worker as the run's options have it, through JSON and back
    # (runner.protocol); none at its default, so a setting the job dropped shows.
    from dataclasses import fields

    from runner.api import make_job
    from runner.protocol import Job, ModelSettings

    suite = get_suite("timm_models")
    spec = suite.models()[0]
    options = RunOptions(suite="timm_models", device="cuda", dtype="bfloat16", mode="training", backend="aot_eager",
                         compile_mode="max-autotune", dynamic_shapes=True, threads=3, repeat=7, warmup=2,
                         quantize="int8-dynamic", disable_cudagraphs=True, diagnostic_budget_s=12.5, accuracy=True,
                         min_loop_s=2.5)
    job = Job.from_json(make_job(options, suite, spec).to_json())
    assert {setting.name: getattr(job, setting.name) for setting in fields(ModelSettings)} == {
        "device": "cuda", "dtype": "bfloat16", "mode": "training", "backend": "aot_eager",
        "compile_mode": "max-autotune", "dynamic_shapes": True, "threads": 3, "repeat": 7, "warmup": 2,
        "quantize": "int8-dynamic", "disable_cudagraphs": True, "diagnostic_budget_s": 12.5, "min_loop_s": 2.5}
    assert (job.suite, job.spec, job.accuracy, job.performance) == ("timm_models", spec, True, False)
