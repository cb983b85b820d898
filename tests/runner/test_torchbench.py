"""The torchbench suite is PyTorch's TorchBench: its default lists mirror PyTorch's CPU and GPU lists of the pinned
TorchBench, its models come from torchbenchmark (the manifest names the commit), a run without torchbenchmark stops
before any model, and a model whose input data is not here is a status row naming the data."""

from __future__ import annotations

import json
import tarfile
import urllib.error
from pathlib import Path

import pytest
import yaml

from runner import torchbench_install
from runner.options import OptionsError, RunOptions, validate
from runner.suites import get_suite

REPO = Path(__file__).resolve().parents[2]
ARCHIVE = REPO / torchbench_install.SHARED_ARCHIVE
HARNESS = "pytorch-benchmark/userbenchmark/dynamo/dynamobench/"


def _archive() -> tarfile.TarFile:
    if not ARCHIVE.is_file():
        pytest.skip(f"no TorchBench archive at {ARCHIVE} to compare the lists with")
    return tarfile.open(ARCHIVE)


def _text(tar: tarfile.TarFile, name: str) -> str:
    member = tar.extractfile(name)
    assert member is not None
    return member.read().decode()


@pytest.mark.parametrize("device, list_file", [("cpu", "torchbench_models_list_cpu.txt"),
                                               ("cuda", "torchbench_models_list.txt")])
def test_the_default_lists_are_pytorchs_lists_of_the_pinned_torchbench(device: str, list_file: str) -> None:
    with _archive() as tar:
        present = {Path(n).parts[3] for n in tar.getnames() if n.startswith("pytorch-benchmark/torchbenchmark/models/")
                   and len(Path(n).parts) > 3}
        config = yaml.safe_load(_text(tar, HARNESS + "torchbench.yaml"))
        listed = _text(tar, HARNESS + list_file)
    skipped = set(config["skip"]["all"]) | set(config["skip"]["device"][device] or [])
    pytorch = [(name.strip(), int(size)) for name, size in
               (line.split(",") for line in listed.splitlines() if line.strip())]
    expected = [(name, size) for name, size in pytorch if name not in skipped and name in present]
    assert len(expected) >= len(pytorch) - 1  # only attention_is_all_you_need_pytorch left TorchBench at the pin
    models = get_suite("torchbench").models(device=device)
    assert [(m.name, m.batch_size) for m in models] == expected
    training = config["batch_size"]["training"]
    for m in models:
        assert m.default_batch_size("training") == training.get(m.name, m.batch_size), m.name


def test_without_torchbenchmark_the_suite_stops_before_any_model(monkeypatch) -> None:
    import runner.suites.torchbench as tb

    monkeypatch.setattr(tb, "installed_tree", lambda: None)
    with pytest.raises(OptionsError) as refused:
        validate(RunOptions(suite="torchbench", only="BERT_pytorch"))
    message = str(refused.value)
    assert "torchbenchmark is not importable" in message and "scripts/setup.sh" in message
    assert torchbench_install.SETTING in message and "nothing was run" in message


def test_the_run_records_torchbench_as_the_models_source() -> None:
    assert RunOptions(suite="torchbench").run_config().model_source == "torchbenchmark"
    assert RunOptions(suite="timm_models").run_config().model_source is None
    # a --models-file's entries name their own builders (the tests' tiny models)
    assert RunOptions(suite="torchbench", models_file=Path("x.toml")).run_config().model_source is None


def _installed_tree() -> Path:
    from runner.suites.torchbench import installed_tree

    tree = installed_tree()
    if tree is None:
        pytest.skip("torchbenchmark is not installed (scripts/install-torchbench.sh)")
    return tree


def test_the_manifest_names_the_installed_torchbench_commit() -> None:
    from runner.manifest import suite_versions

    _installed_tree()
    assert suite_versions(get_suite("torchbench"))["torchbench"] == torchbench_install.COMMIT


def test_a_model_without_its_input_data_is_a_row_naming_the_data(tmp_path: Path) -> None:
    """Super_SloMo's install.py downloads Super_SloMo_inputs, which a machine without network cannot get: one
    model_fail_to_load row whose error names the data, at once (no model module imported, no hang)."""
    from perfdash.cli import main
    from runner.suites.torchbench import missing_data

    tree = _installed_tree()
    if not missing_data(tree, "Super_SloMo"):
        pytest.skip("this TorchBench has Super_SloMo's input data")
    assert main(["run", "--suite", "torchbench", "--only", "Super_SloMo", "--device", "cpu", "--accuracy",
                 "--output-dir", str(tmp_path), "--no-progress", "--timeout", "300"]) == 0
    stem = "inductor_torchbench_float32_inference_cpu"
    rows = (tmp_path / f"{stem}_accuracy.csv").read_text().splitlines()
    assert rows[1].split(",")[:4] == ["cpu", "Super_SloMo", "0", "model_fail_to_load"]
    manifest = json.loads((tmp_path / f"{stem}_manifest.json").read_text())
    assert "Super_SloMo_inputs" in manifest["model_errors"]["Super_SloMo"]
    assert manifest["suite_versions"]["torchbench"] == torchbench_install.COMMIT
    assert manifest["config"]["model_source"] == "torchbenchmark"


def test_the_data_each_model_needs_is_read_from_its_install_script() -> None:
    tree = _installed_tree()
    needs = {m: torchbench_install.input_data(tree, m) for m in
             ("Super_SloMo", "speech_transformer", "vision_maskrcnn", "yolov3", "Background_Matting", "BERT_pytorch",
              "drq", "functorch_maml_omniglot")}
    assert needs == {"drq": ["drq/obs.pkl"], "functorch_maml_omniglot": ["maml_omniglot/batch.pt"],
                     "Super_SloMo": ["Super_SloMo_inputs.tar.gz"],
                     "speech_transformer": ["speech_transformer_inputs.tar.gz"],
                     "vision_maskrcnn": ["coco2017-minimal.tar.gz"], "yolov3": ["coco128.tar.gz"],
                     "Background_Matting": ["Background_Matting_inputs.tar.gz"], "BERT_pytorch": []}


@pytest.mark.slow
def test_a_torchbench_model_runs_from_torchbenchmark(tmp_path: Path) -> None:
    """lennard_jones (the quick nightly's model: a small MLP, which compiles in seconds) passes from torchbenchmark."""
    from perfdash.cli import main

    _installed_tree()
    assert main(["run", "--suite", "torchbench", "--only", "lennard_jones", "--device", "cpu", "--batch-size", "4",
                 "--repeat", "3", "--output-dir", str(tmp_path), "--no-progress"]) == 0
    stem = "inductor_torchbench_float32_inference_cpu"
    accuracy = (tmp_path / f"{stem}_accuracy.csv").read_text().splitlines()[1].split(",")
    assert accuracy[1] == "lennard_jones" and accuracy[3] == "pass", accuracy
    manifest = json.loads((tmp_path / f"{stem}_manifest.json").read_text())
    assert manifest["suite_versions"]["torchbench"] == torchbench_install.COMMIT


def test_downloaded_data_is_missing_until_it_lies_where_torchbench_puts_it(tmp_path: Path) -> None:
    """An input tarball is unpacked under torchbenchmark/data/.data/, a MODEL_PKLS file kept under
    torchbenchmark/models/ (utils/s3_utils.py checkout_s3_data)."""
    from runner.suites.torchbench import missing_data

    model = tmp_path / "torchbenchmark" / "models" / "m"
    model.mkdir(parents=True)
    (model / "install.py").write_text('checkout_s3_data(\n    "INPUT_TARBALLS", "m_inputs.tar.gz", decompress=True)\n'
                                      'checkout_s3_data("MODEL_PKLS", "m/batch.pt", decompress=False)\n')
    assert missing_data(tmp_path, "m") == ["m_inputs.tar.gz", "m/batch.pt"]
    (model / "batch.pt").write_bytes(b"")
    (tmp_path / "torchbenchmark" / "data" / ".data" / "m_inputs").mkdir(parents=True)
    assert missing_data(tmp_path, "m") == []


def test_the_extended_list_and_the_tolerances_follow_the_pinned_harness() -> None:
    """Every extended entry is a model of the pinned TorchBench, at the CPU list's size where that names it;
    torchbench.yaml's dont_change_batch_size models keep TorchBench's size; its large models are not checked and its
    larger-multiplier models get the larger multiplier."""
    from runner.suites.base import ToleranceQuery

    with _archive() as tar:
        present = {Path(n).parts[3] for n in tar.getnames() if n.startswith("pytorch-benchmark/torchbenchmark/models/")
                   and len(Path(n).parts) > 3}
        config = yaml.safe_load(_text(tar, HARNESS + "torchbench.yaml"))
        cpu = dict(line.split(",") for line in _text(tar, HARNESS + "torchbench_models_list_cpu.txt").split())
    suite = get_suite("torchbench")
    extended = suite.models(model_list="extended")
    assert len(extended) == 65 and {m.name for m in extended} <= present
    assert {m.name for m in suite.models()} <= {m.name for m in extended}
    for m in extended:
        assert m.batch_size == int(cpu.get(m.name, m.batch_size)), m.name
        assert bool(m.options.get("keep_batch_size")) == (m.name in config["dont_change_batch_size"]), m.name
        assert m.accuracy_max_batch_size == config["accuracy"]["max_batch_size"].get(m.name), m.name
        assert m.training_batch_size == config["batch_size"]["training"].get(m.name), m.name
    for name in ("maml", "Background_Matting", "stable_diffusion_unet", "yolov3", "dcgan"):
        tol = suite.tolerance_for(ToleranceQuery(name=name, mode="inference", device="cpu", dtype="float32"))
        assert tol.skip == (name in config["accuracy"]["skip"]["large_models"]), name
        assert tol.larger_multiplier == (name in config["require_larger_multiplier_for_smaller_tensor"]), name
        assert tol.tol == 1e-4


def test_a_model_that_refuses_other_batch_sizes_is_built_at_its_own(monkeypatch) -> None:
    """A TorchBench class with ALLOW_CUSTOMIZE_BSIZE = False (soft_actor_critic, speech_transformer, ...: TorchBench
    raises NotImplementedError for any other size) gets no batch size, as PyTorch's torchbench.py load_model passes
    it none; any other class gets the run's."""
    import runner.suites.builders as builders
    from runner.suites.base import ModelSpec

    _installed_tree()
    asked: list[int | None] = []

    def model_class(allow: bool) -> type:
        class Model:
            ALLOW_CUSTOMIZE_BSIZE = allow

            def __init__(self, test: str, device: str, batch_size: int | None) -> None:
                asked.append(batch_size)

            def get_module(self) -> tuple[object, tuple[()]]:
                return object(), ()
        return Model

    for allow in (False, True):
        monkeypatch.setattr(builders, "_torchbenchmark_class", lambda name, allow=allow: model_class(allow))
        builders.build(ModelSpec(name="fixed", batch_size=256, builder="torchbenchmark:fixed"),
                       builders.BuildContext(device="cpu", batch_size=4, training=False))
    assert asked == [None, 4]


@pytest.mark.parametrize("error, is_download", [
    (urllib.error.URLError("[Errno -2] Name or service not known"), True),  # torch.hub: the torchvision models
    (OSError("We couldn't connect to 'https://huggingface.co' to load the files"), True),  # moondream
    (OSError("[Errno 2] No such file or directory: 'batch.pt'"), False),
])
def test_a_build_that_cannot_download_its_weights_says_so(monkeypatch, error: OSError, is_download: bool) -> None:
    import runner.suites.builders as builders
    from runner.suites.base import ModelSpec

    _installed_tree()

    class Model:
        def __init__(self, test: str, device: str, batch_size: int | None) -> None:
            raise error

    monkeypatch.setattr(builders, "_torchbenchmark_class", lambda name: Model)
    with pytest.raises(OSError if not is_download else builders.ModelLoadError) as raised:
        builders.build(ModelSpec(name="m", batch_size=4, builder="torchbenchmark:m"),
                       builders.BuildContext(device="cpu", batch_size=4, training=False))
    assert ("downloads pretrained weights" in str(raised.value)) == is_download
