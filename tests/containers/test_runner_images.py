"""docker/runner-cpu.Dockerfile and runner-cuda.Dockerfile, built for one torch and checked to hold exactly it and
PyTorch's TorchBench; one-model xeon cells (huggingface, then torchbench from torchbenchmark) run in the CPU image with
the command lines the nightly Jenkinsfile builds for them, and post their results to the service container."""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import urllib.request
from pathlib import Path

from perfdash.torch_spec import resolve

REPO = Path(__file__).resolve().parents[2]
CPU_IMAGE = "localhost/perfdash-runner-cpu:test-2.13.0"
CUDA_IMAGE = "localhost/perfdash-runner-cuda:test-2.14.1"
MODELS_FILE = "tests/runner/data/tiny_real.toml"


def _python(podman, image: str, code: str, *env: str) -> str:
    flags = [arg for pair in (("-e", e) for e in env) for arg in pair]
    return podman("run", "--rm", *flags, image, "python", "-c", code).stdout.strip()


def test_runner_cpu_image_runs_the_nightly_cell_on_the_torch_it_was_built_for(podman, runner_cpu_image: str,
                                                                              service_container, run_pipeline,
                                                                              tmp_path: Path, monkeypatch) -> None:
    assert runner_cpu_image == CPU_IMAGE  # built by the fixture (conftest.py)
    # After the whole Dockerfile (perfdash's extras, timm, transformers, the backends) the torch is still 2.13.0
    # (PyPI's build of it: +cu130).
    assert _python(podman, CPU_IMAGE, "import torch; print(torch.__version__)") == "2.13.0+cu130"
    # No later pip install can swap it: the image's constraint refuses another torch before downloading anything.
    swap = podman("run", "--rm", CPU_IMAGE, "python", "-m", "pip", "install", "--no-deps", "torch==2.14.1",
                  check=False)
    assert swap.returncode != 0 and "torch==2.14.1" in swap.stdout + swap.stderr

    # The cell's commands, from the pipeline: TORCH=2.13.0 resolved in the Plan stage (a release: read, not fetched).
    resolution = dataclasses.asdict(resolve("2.13.0", ["cpu"]))
    params = {"TORCH": "2.13.0", "RUN_GPU": False, "SUITES": "huggingface", "THREAD_CONFIGS": "socket",
              "CPU_DTYPES": "float32", "CPU_MODES": "inference", "PARTITIONS": "1", "ONLY": "^BertForMaskedLM$",
              "MODELS_FILE": MODELS_FILE, "SERVICE_URL": service_container.url}
    record = run_pipeline(REPO / "Jenkinsfile", params, {"perfdash.torch_spec resolve": json.dumps(resolution)})
    cell = "cpu-socket-float32-inference-huggingface-1of1"
    scripts = [script for script in record["sh"] if f"results/{cell}" in script]
    assert [s.split()[0] for s in scripts] == ["rm", "#!/bin/bash", "perfdash"], scripts  # prepare, run, ingest
    assert "--torch '2.13.0'" in scripts[1] and "perfdash ingest" in scripts[2] and "--token-file" in scripts[2]
    inside = next(e for e in record["echoes"] if e.startswith("inside perfdash-runner-cpu:2.13.0"))
    docker_args = shlex.split(inside.split(" ", 2)[2])  # the pipeline's image.inside(...) arguments

    # Jenkins' image.inside: the workspace (the checkout) mounted at its own path, and the token as a secret file.
    workspace = tmp_path / "workspace"
    (workspace / MODELS_FILE).parent.mkdir(parents=True)
    shutil.copy(REPO / MODELS_FILE, workspace / MODELS_FILE)
    shutil.copy(REPO / "tests" / "runner" / "models.py", workspace / "tests" / "runner" / "models.py")
    token_file = tmp_path / "token"
    token_file.write_text(service_container.token)
    secret = "/run/secrets/perfdash-token"
    for script in scripts:
        podman("run", "--rm", *docker_args, "-v", f"{workspace}:{workspace}", "-w", str(workspace),
               "-v", f"{token_file}:{secret}:ro", "-e", f"PERFDASH_TOKEN_FILE={secret}",
               CPU_IMAGE, "bash", "-c", script, timeout=900)

    manifest = json.loads((workspace / "results" / cell /
                           "inductor_huggingface_float32_inference_cpu_manifest.json").read_text())
    assert (manifest["torch_requested"], manifest["torch_version"]) == ("2.13.0", "2.13.0+cu130")
    with urllib.request.urlopen(f"{service_container.url}/api/v1/runs", timeout=10) as response:
        runs = json.loads(response.read())
    posted = [run for run in runs if run["torch_version"] == "2.13.0+cu130"]
    assert len(posted) == 1, runs
    with urllib.request.urlopen(f"{service_container.url}/api/v1/runs/{posted[0]['id']}", timeout=10) as response:
        detail = json.loads(response.read())
    assert [(r["name"], r["accuracy"]) for r in detail["results"]] == [("BertForMaskedLM", "pass")]

    # The same cell under this venv's torch 2.14.1, posted to the same service: a release-to-release comparison.
    _the_cell_under_this_venvs_torch(scripts, service_container, token_file, tmp_path, monkeypatch)

    # Asked for another torch, a cell in this image stops before any model, naming both.
    wrong = podman("run", "--rm", "-e", "PERFDASH_TORCH_SPEC=2.14.1", CPU_IMAGE, "perfdash", "run", "--suite",
                   "huggingface", "--only", "BertForMaskedLM", check=False)
    assert wrong.returncode == 2 and "asked for torch 2.14.1" in wrong.stderr and "2.13.0+cu130" in wrong.stderr

    # fastNLP_Bert (PyTorch's CPU list) imports in the image: its TorchBench install held setuptools below 81, so
    # fastNLP's pkg_resources is there (runner/torchbench_install.py, ENVIRONMENT_REQUIREMENTS)
    podman("run", "--rm", CPU_IMAGE, "python", "-W", "ignore", "-c", "import fastNLP")
    _a_torchbench_cell(podman, run_pipeline, service_container, token_file, tmp_path)


def _a_torchbench_cell(podman, run_pipeline, service, token_file: Path, tmp_path: Path) -> None:
    """The nightly's torchbench cell for one model of PyTorch's CPU list (its own batch size), as the pipeline runs it
    in the image: the model comes from the image's TorchBench, the manifest names TorchBench's commit, and the run
    reaches the service under the torchbench suite."""
    from runner.torchbench_install import COMMIT

    resolution = dataclasses.asdict(resolve("2.13.0", ["cpu"]))
    params = {"TORCH": "2.13.0", "RUN_GPU": False, "SUITES": "torchbench", "THREAD_CONFIGS": "socket",
              "CPU_DTYPES": "float32", "CPU_MODES": "inference", "PARTITIONS": "1", "ONLY": "^lennard_jones$",
              "SERVICE_URL": service.url}
    record = run_pipeline(REPO / "Jenkinsfile", params, {"perfdash.torch_spec resolve": json.dumps(resolution)})
    cell = "cpu-socket-float32-inference-torchbench-1of1"
    scripts = [script for script in record["sh"] if f"results/{cell}" in script]
    inside = next(e for e in record["echoes"] if e.startswith("inside perfdash-runner-cpu:2.13.0"))
    docker_args = shlex.split(inside.split(" ", 2)[2])
    workspace = tmp_path / "torchbench-workspace"
    workspace.mkdir()
    secret = "/run/secrets/perfdash-token"
    for script in scripts:
        podman("run", "--rm", *docker_args, "-v", f"{workspace}:{workspace}", "-w", str(workspace),
               "-v", f"{token_file}:{secret}:ro", "-e", f"PERFDASH_TOKEN_FILE={secret}",
               CPU_IMAGE, "bash", "-c", script, timeout=900)
    results = workspace / "results" / cell
    manifest = json.loads((results / "inductor_torchbench_float32_inference_cpu_manifest.json").read_text())
    assert manifest["suite_versions"]["torchbench"] == COMMIT and manifest["config"]["model_source"] == "torchbenchmark"
    accuracy = (results / "inductor_torchbench_float32_inference_cpu_accuracy.csv").read_text().splitlines()
    assert [row.split(",")[1:4:2] for row in accuracy[1:]] == [["lennard_jones", "pass"]], accuracy
    with urllib.request.urlopen(f"{service.url}/api/v1/runs?suite=torchbench", timeout=10) as response:
        runs = json.loads(response.read())
    assert [run["suite_versions"].get("torchbench") for run in runs] == [COMMIT], runs


def _the_cell_under_this_venvs_torch(scripts: list[str], service, token_file: Path, tmp_path: Path,
                                     monkeypatch) -> None:
    """The pipeline's `perfdash run` of the cell, run here (same flags, threads as xeon-launch counts them) under
    torch 2.14.1 and ingested into the service: one finding names 2.13.0 -> 2.14.1, the Releases page compares the
    two, `perfdash summary` shows the change."""
    import subprocess
    import urllib.parse

    from perfdash.cli import main
    from perfdash.torch_spec import installed_torch

    version, _ = installed_torch()
    threads = subprocess.run([str(REPO / "docker" / "xeon-launch.sh"), "--count", "socket"], capture_output=True,
                             text=True, check=True).stdout.strip()
    line = next(line for line in scripts[1].splitlines() if "perfdash run" in line)
    argv = shlex.split(line.replace('"$(xeon-launch --count socket)"', threads).split(" | ")[0].replace(" 2>&1", ""))
    argv = argv[argv.index("perfdash") + 1:]
    results = tmp_path / "host-results"
    argv[argv.index("--torch") + 1] = version.split("+")[0]
    argv[argv.index("--output-dir") + 1] = str(results)
    argv[argv.index("--models-file") + 1] = str(REPO / MODELS_FILE)
    assert main([*argv, "--no-progress"]) == 0
    assert main(["ingest", str(results), "--url", service.url, "--token-file", str(token_file)]) == 0

    with urllib.request.urlopen(f"{service.url}/api/v1/findings", timeout=10) as response:
        findings = json.loads(response.read())
    release = [f for f in findings if f["category"] == "environment"]
    assert len(release) == 1, findings
    # (the environment beside torch differs too, and is named: the two installs' preloaded OpenMP, torchvision)
    assert release[0]["summary"].startswith(f"torch release change: torch 2.13.0+cu130 -> {version}")
    assert "speedup median" in release[0]["summary"] and "no per-model findings" in release[0]["summary"]
    assert not [f for f in findings if f.get("kind") == "performance"]
    query = urllib.parse.urlencode({"base": "2.13.0+cu130", "new": version})
    with urllib.request.urlopen(f"{service.url}/releases?{query}", timeout=10) as response:
        page = response.read().decode()
    assert "BertForMaskedLM" in page and "2.13.0+cu130" in page and version in page
    monkeypatch.setenv("DATABASE_URL", service.database_url)
    monkeypatch.setenv("COLUMNS", "200")
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["summary"]) == 0
    assert f"2.13.0+cu130 -> {version}" in printed.getvalue()


def test_runner_cuda_image_holds_the_torch_and_cuda_variant_asked_for(podman, torch_index, torchbench_source) -> None:
    """Built, not run: nothing here has a GPU. torch 2.14.1 of the cu130 index, its CUDA 13.0 runtime inside, and
    PyTorch's TorchBench at the pinned commit."""
    podman.build("runner-cuda.Dockerfile", CUDA_IMAGE,
                 {"TORCH_SPEC": "2.14.1", "CUDA_VARIANT": "cu130", "TORCH_INDEX_ROOT": torch_index,
                  "PERFDASH_TORCHBENCH_SOURCE": torchbench_source})
    printed = _python(podman, CUDA_IMAGE, "import os, torch; print(torch.__version__, torch.version.cuda, "
                                          "os.environ['PERFDASH_CUDA_VARIANT'], os.environ['PERFDASH_TORCH_SPEC'])")
    assert printed.split() == ["2.14.1+cu130", "13.0", "cu130", "2.14.1"]
    from runner.torchbench_install import COMMIT

    versions = _python(podman, CUDA_IMAGE, "from runner.suites.torchbench import versions; print(versions())")
    assert versions == str({"torchbench": COMMIT})
