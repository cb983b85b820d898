"""The Jenkins pipelines compile as Groovy and, run in a stand-in of the pipeline DSL, issue the commands we expect."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NIGHTLY = REPO / "Jenkinsfile"
BISECT = REPO / "bisect" / "Jenkinsfile"
SUITES = ("torchbench", "huggingface", "timm_models")


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def _run_commands(record: dict, extract) -> list[list[str]]:
    return [args for script in record["sh"] for args in extract(script) if args[:1] == ["run"]]


@pytest.mark.parametrize("jenkinsfile", [NIGHTLY, BISECT], ids=["nightly", "bisect"])
def test_pipeline_compiles_with_groovyc(jenkinsfile: Path, groovy_env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(["groovyc", "-d", str(tmp_path), str(jenkinsfile)], env=groovy_env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "Jenkinsfile.class").exists()


def test_groovyc_rejects_a_broken_pipeline(groovy_env: dict[str, str], tmp_path: Path) -> None:
    # The compile check has teeth: the nightly pipeline without its last closing brace must not compile.
    broken = tmp_path / "Jenkinsfile"
    text = NIGHTLY.read_text()
    broken.write_text(text[: text.rindex("}")])
    done = subprocess.run(["groovyc", "-d", str(tmp_path / "out"), str(broken)], env=groovy_env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode != 0


def test_nightly_shards_every_suite_and_configuration_exactly_once(run_pipeline, extract_commands) -> None:
    record = run_pipeline(NIGHTLY)
    runs = _run_commands(record, extract_commands)
    assert record["params"]["PARTITIONS"] == "2"
    # Defaults: xeon 2 thread configs x 2 dtypes x 1 mode, gpu 3 dtypes x 2 modes x with/without CUDA graphs;
    # 3 suites; 2 shards each.
    assert len(runs) == (2 * 2 * 1 + 3 * 2 * 2) * 3 * 2 == int(record["env"]["CELL_COUNT"])
    shards = Counter()
    for args in runs:
        config = (_flag(args, "--suite"), _flag(args, "--device"), _flag(args, "--dtype"), _flag(args, "--mode"),
                  _flag(args, "--compile-mode"), _flag(args, "--output-dir").split("-")[1],
                  "--disable-cudagraphs" in args)
        assert _flag(args, "--total-partitions") == "2"
        shards[config, _flag(args, "--partition-id")] += 1
    assert set(shards.values()) == {1}
    configs = {config for config, _ in shards}
    assert {partition for _, partition in shards} == {"0", "1"}
    assert len(shards) == 2 * len(configs)
    assert {c[0] for c in configs} == set(SUITES)
    assert {(c[1], c[2]) for c in configs} == {("cpu", "float32"), ("cpu", "amp"), ("cuda", "float32"),
                                               ("cuda", "amp"), ("cuda", "bfloat16")}
    assert {c[3] for c in configs if c[1] == "cuda"} == {"inference", "training"}
    assert {c[3] for c in configs if c[1] == "cpu"} == {"inference"}
    # every GPU configuration with CUDA graphs (the headline series) and without (inductor_no_cudagraphs)
    cuda = [c for c in configs if c[1] == "cuda"]
    assert Counter(c[6] for c in cuda) == {True: len(cuda) // 2, False: len(cuda) // 2}
    assert not any(c[6] for c in configs if c[1] == "cpu")


def test_xeon_cells_use_the_cpu_launcher_and_gpu_cells_run_on_gpu_agents(run_pipeline) -> None:
    record = run_pipeline(NIGHTLY)
    run_lines = [line for script in record["sh"] for line in script.splitlines() if "perfdash run" in line]
    cpu = [line for line in run_lines if "--device cpu" in line]
    cuda = [line for line in run_lines if "--device cuda" in line]
    assert cpu and cuda
    for line in cpu:
        config = re.match(r"xeon-launch (single|socket) -- perfdash run ", line)
        assert config, line
        assert f'--threads "$(xeon-launch --count {config.group(1)})"' in line
    assert Counter(re.match(r"xeon-launch (\w+)", line).group(1) for line in cpu) == {"single": 12, "socket": 12}
    assert not any("xeon-launch" in line for line in cuda)
    inside = [e for e in record["echoes"] if e.startswith("inside perfdash-runner-")]
    assert sum("--gpus all" in e for e in inside) == len(cuda)
    assert all("-v perfdash-cache:/cache" in e for e in inside)
    assert all("--cold-start" in line for line in run_lines)
    # every cell's runs are filed under the night the build started (the Plan stage's `date -u +%F`: conftest)
    assert all("--night 2026-11-27 " in line for line in run_lines)


def test_every_shard_archives_and_ingests_its_own_results(run_pipeline, extract_commands) -> None:
    ingested_runs = [{"id": 41, "jenkins_url": "https://jenkins.example/job/perfdash/1/"},
                     {"id": 42, "jenkins_url": "https://jenkins.example/job/perfdash/1/"},
                     {"id": 40, "jenkins_url": "https://jenkins.example/job/perfdash/0/"}]
    record = run_pipeline(NIGHTLY, stdout={"api/v1/runs?since=": json.dumps(ingested_runs)})
    commands = [args for script in record["sh"] for args in extract_commands(script)]
    outputs = [_flag(args, "--output-dir") for args in commands if args[0] == "run"]
    ingested = [args[1] for args in commands if args[0] == "ingest"]
    assert sorted(outputs) == sorted(ingested)
    assert len(set(outputs)) == len(outputs)
    assert {f"{o}/**" for o in outputs} <= set(record["archived"])
    for args in commands:
        if args[0] == "ingest":
            assert _flag(args, "--url") == record["params"]["SERVICE_URL"]
            assert _flag(args, "--token-file") == "/workspace@tmp/secretFiles/1/token"  # from withCredentials
    assert record["credentials"].count("perfdash-ingest-token-file") == len(outputs)
    # After the cells: detect, then the report of each run this build ingested (not another build's) to GitHub.
    tail = [args for args in commands if args[0] in ("detect", "report")]
    assert tail[0] == ["detect"]
    assert [_flag(args, "--run") for args in tail[1:]] == ["41", "42"]
    assert all("--post" in args and _flag(args, "--output") == f"reports/run-{_flag(args, '--run')}.md"
               for args in tail[1:])


def test_pending_bisections_start_the_bisect_pipeline_without_waiting(run_pipeline) -> None:
    pending = [{"id": 11, "suite": "timm_models", "model": "lcnet_050", "metric": "speedup", "good_commit": "a1",
                "bad_commit": "b2", "status": "pending"},
               {"id": 12, "suite": "huggingface", "model": "BertForMaskedLM", "metric": "accuracy",
                "good_commit": "a1", "bad_commit": "b2", "status": "pending"}]
    record = run_pipeline(NIGHTLY, {"RUN_GPU": False, "SUITES": "timm_models"},
                          {"bisections?status=pending": json.dumps(pending)})
    assert [b["parameters"]["REQUEST_ID"] for b in record["builds"]] == ["11", "12"]
    assert all(b["job"] == "perfdash-bisect" and b["wait"] is False for b in record["builds"])
    assert any("/api/v1/bisections?status=pending" in script for script in record["sh"])
    none = run_pipeline(NIGHTLY, {"RUN_GPU": False, "SUITES": "timm_models"}, {"bisections?status=pending": "[]"})
    assert none["builds"] == []


def test_parameters_select_the_cells(run_pipeline, extract_commands) -> None:
    record = run_pipeline(NIGHTLY, {"RUN_GPU": False, "SUITES": "huggingface", "THREAD_CONFIGS": "single",
                                    "CPU_DTYPES": "float32", "PARTITIONS": "3", "ONLY": "Bert.*", "TORCH": "20261121"})
    runs = _run_commands(record, extract_commands)
    assert sorted(_flag(args, "--partition-id") for args in runs) == ["0", "1", "2"]
    assert all(_flag(args, "--filter") == "Bert.*" and _flag(args, "--suite") == "huggingface" for args in runs)
    assert any("perfdash-runner-cpu:2.15.0.dev20261125-555555555555" in e for e in record["echoes"])
    resolve = _resolve_line(record)
    assert "--variant cpu" in resolve and "cu130" not in resolve  # no GPU cells: only the CPU wheel must exist


def _resolve_line(record: dict) -> str:
    """The Plan stage's resolve command line (its script installs the resolver's dependency first)."""
    return next(line for script in record["sh"] for line in script.splitlines()
                if "perfdash.torch_spec resolve" in line)


def _docker_builds(record: dict) -> list[str]:
    """The runner images the cells build (the service image of the report stage carries no torch)."""
    return [e.removeprefix("docker build ") for e in record["echoes"] if e.startswith("docker build perfdash-runner")]


def test_a_scheduled_build_benchmarks_tonights_nightly_everywhere(run_pipeline, extract_commands) -> None:
    """TORCH defaults to `nightly`, resolved once in the Plan stage (inside the runner images' base) for the CPU and
    the CUDA wheel; every image of every cell is built for that one version@commit, and every `perfdash run` is told
    to measure exactly it (--torch), so an image that ended up with another torch stops the cell."""
    record = run_pipeline(NIGHTLY)
    assert record["params"]["TORCH"] == "nightly"
    resolve = _resolve_line(record)
    assert resolve.split()[:6] == ["PYTHONPATH=.plan-deps", "python", "-m", "perfdash.torch_spec", "resolve",
                                   '"$TORCH"']
    assert "--variant cpu --variant cu130" in resolve and "--allow-older" in resolve
    assert any(e.startswith("inside python:3.11.11-slim-bookworm") for e in record["echoes"])
    spec = "2.15.0.dev20261125@" + "5" * 40
    builds = _docker_builds(record)
    assert builds and all(f"--build-arg TORCH_SPEC={spec}" in b for b in builds)
    cuda = [b for b in builds if "runner-cuda.Dockerfile" in b]
    dockerfile_default = re.search(r"^ARG CUDA_VARIANT=(\w+)$", (REPO / "docker/runner-cuda.Dockerfile").read_text(),
                                   re.M).group(1)
    assert cuda and all(f"--build-arg CUDA_VARIANT={dockerfile_default}" in b for b in cuda)
    runs = _run_commands(record, extract_commands)
    assert runs and {_flag(args, "--torch") for args in runs} == {spec}
    assert record["env"]["buildDescription"].startswith("torch 2.15.0.dev20261125 (555555555555)")


def test_the_runner_images_get_torchbench_from_the_source_the_build_names(run_pipeline) -> None:
    """TorchBench comes from GitHub unless the build names a mirror (TORCHBENCH_SOURCE), which every runner image of
    every cell then gets as PERFDASH_TORCHBENCH_SOURCE; the Dockerfiles take it as a build argument."""
    default = _docker_builds(run_pipeline(NIGHTLY, {"SUITES": "torchbench", "PARTITIONS": "1"}))
    assert default and not any("PERFDASH_TORCHBENCH_SOURCE" in b for b in default)
    mirror = "http://mirror.internal/pytorch-benchmark-0e83c440.tar.gz"
    builds = _docker_builds(run_pipeline(NIGHTLY, {"SUITES": "torchbench", "PARTITIONS": "1",
                                                   "TORCHBENCH_SOURCE": mirror}))
    assert {"runner-cpu.Dockerfile", "runner-cuda.Dockerfile"} <= {d for b in builds for d in re.findall(
        r"runner-\w+\.Dockerfile", b)}
    assert builds and all(f"--build-arg PERFDASH_TORCHBENCH_SOURCE={mirror}" in b for b in builds)
    for dockerfile in ("runner-cpu.Dockerfile", "runner-cuda.Dockerfile"):
        assert re.search(r"^ARG PERFDASH_TORCHBENCH_SOURCE$", (REPO / "docker" / dockerfile).read_text(), re.M)


def test_an_older_nightly_is_said_and_a_missing_one_stops_the_plan(run_pipeline) -> None:
    import json

    older = {"asked": "nightly", "spec": "2.15.0.dev20261124@" + "4" * 40, "version": "2.15.0.dev20261124",
             "git_commit": "4" * 40, "day": "2026-11-24", "variants": ["cpu", "cu130"],
             "note": "the torch nightly of 2026-11-25 is not published for cu130: benchmarking the nightly of "
                     "2026-11-24 instead"}
    record = run_pipeline(NIGHTLY, {"RUN_GPU": False}, {"perfdash.torch_spec resolve": json.dumps(older)})
    assert any(e.startswith("WARNING: the torch nightly of 2026-11-25 is not published") for e in record["echoes"])
    assert "older nightly" in record["env"]["buildDescription"]
    assert all("TORCH_SPEC=2.15.0.dev20261124@" in b for b in _docker_builds(record))
    strict = run_pipeline(NIGHTLY, {"RUN_GPU": False, "ALLOW_OLDER_NIGHTLY": False})
    resolve = next(script for script in strict["sh"] if "perfdash.torch_spec resolve" in script)
    assert "--allow-older" not in resolve


def test_extended_run_adds_max_autotune(run_pipeline, extract_commands) -> None:
    record = run_pipeline(NIGHTLY, {"EXTENDED": True})
    modes = Counter(_flag(args, "--compile-mode") for args in _run_commands(record, extract_commands))
    # (xeon 4 + gpu 12 configurations) x 3 suites x 2 shards each; max-autotune's GPU cells with and without CUDA
    # graphs too (PyTorch CI's inductor_max_autotune_no_cudagraphs)
    assert modes == {"default": 96, "max-autotune": 96}
    crons = re.search(r"parameterizedCron\('''(.*?)'''\)", NIGHTLY.read_text(), re.S).group(1).split("\n")
    crons = [line.strip() for line in crons if line.strip()]
    assert len(crons) == 2 and "EXTENDED=true" in crons[1].split("%")[1].split(";"), crons
    assert all(line.split()[1] in ("0", "1", "2") for line in crons), "start after midnight UTC: one night a build"


def test_dry_run_plans_every_cell_and_runs_nothing(run_pipeline) -> None:
    record = run_pipeline(NIGHTLY, {"DRY_RUN": True}, {"bisections?status=pending": '[{"id": 1}]'})
    # The commands a dry run runs: resolving the torch it would benchmark (a read of the wheel index), with the
    # resolver's retry policy's one dependency (tenacity) installed beside the checkout first, and reading the night
    # it would file its runs under.
    assert [[line.split()[:5] for line in script.splitlines()] for script in record["sh"]] == [[
        ["python", "-m", "pip", "install", "--quiet"],
        ["PYTHONPATH=.plan-deps", "python", "-m", "perfdash.torch_spec", "resolve"]], [["date", "-u", "+%F"]]]
    assert '--target .plan-deps "tenacity>=8.2" >&2' in record["sh"][0]  # its output kept out of the JSON
    assert record["builds"] == []
    assert set(record["stagesSkipped"]) == {"Benchmark", "Detect and report", "Bisect new regressions"}
    # (4 xeon + 12 gpu configurations) x 3 suites x 2 shards
    assert sum(" perfdash run " in e for e in record["echoes"]) == 96


def _bisection(device: str, threads: int | str, status: str = "pending") -> str:
    return json.dumps({"id": 7, "status": status, "suite": "timm_models", "model": "lcnet_050", "device": device,
                       "threads": threads, "metric": "speedup", "good_commit": "a1", "bad_commit": "b2"})


@pytest.mark.parametrize(("device", "threads", "label", "launcher"),
                         [("cuda", "all", "gpu", None), ("cpu", 1, "xeon", "single"), ("cpu", 56, "xeon", "socket")])
def test_bisect_pipeline_runs_the_request_on_its_agent(run_pipeline, extract_commands, device, threads, label,
                                                         launcher) -> None:
    record = run_pipeline(BISECT, {"REQUEST_ID": "7"}, {"api/v1/bisections/": _bisection(device, threads)})
    assert record["agents"]["Bisect"] == label
    lines = [line for script in record["sh"] for line in script.splitlines() if "perfdash bisect" in line]
    assert len(lines) == 1
    if launcher:
        assert lines[0].startswith(f"xeon-launch {launcher} -- perfdash bisect ")
    else:
        assert lines[0].startswith("perfdash bisect ")
    (args,) = extract_commands(lines[0])
    assert _flag(args, "--request-id") == "7"
    assert _flag(args, "--url") == record["params"]["SERVICE_URL"]
    assert _flag(args, "--token-file") == "/workspace@tmp/secretFiles/1/token"
    assert "--token" not in args
    assert _flag(args, "--processes") == record["params"]["PROCESSES"] == "1"  # one process per result by default
    assert "--duet" not in args  # one side at a time by default


def test_bisect_pipeline_passes_its_processes_to_every_measurement(run_pipeline, extract_commands) -> None:
    record = run_pipeline(BISECT, {"REQUEST_ID": "7", "PROCESSES": "3"},
                          {"api/v1/bisections/": _bisection("cpu", 56)})
    (line,) = [line for script in record["sh"] for line in script.splitlines() if "perfdash bisect" in line]
    (args,) = extract_commands(line)
    assert _flag(args, "--processes") == "3"


def test_bisect_pipeline_measures_in_duets_when_asked(run_pipeline, extract_commands) -> None:
    record = run_pipeline(BISECT, {"REQUEST_ID": "7", "DUET": True}, {"api/v1/bisections/": _bisection("cpu", 56)})
    (line,) = [line for script in record["sh"] for line in script.splitlines() if "perfdash bisect" in line]
    assert line.startswith("xeon-launch socket -- perfdash bisect ")
    (args,) = extract_commands(line)
    assert "--duet" in args


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_bisect_image_is_built_for_a_resolved_torch_of_its_own_variant(run_pipeline, device: str) -> None:
    record = run_pipeline(BISECT, {"REQUEST_ID": "7"}, {"api/v1/bisections/": _bisection(device, "all")})
    resolve = _resolve_line(record)
    image_variant = re.search(r"^ARG CUDA_VARIANT=(\w+)$", (REPO / "docker/runner-cuda.Dockerfile").read_text(),
                              re.M).group(1)
    assert f"--variant {'cpu' if device == 'cpu' else image_variant} " in resolve + " "
    build = next(e for e in record["echoes"] if e.startswith(f"docker build perfdash-runner-{device}:bisect"))
    assert "--build-arg TORCH_SPEC=2.15.0.dev20261125@" in build


def test_bisect_pipeline_skips_a_request_already_taken(run_pipeline) -> None:
    record = run_pipeline(BISECT, {"REQUEST_ID": "7"}, {"api/v1/bisections/": _bisection("cpu", 1, "running")})
    assert "Bisect" in record["stagesSkipped"]
    assert not any("perfdash bisect" in script for script in record["sh"])


def test_bisect_pipeline_creates_a_request_from_explicit_commits(run_pipeline) -> None:
    record = run_pipeline(BISECT, {"GOOD": "a1", "BAD": "b2", "MODEL": "lcnet_050", "METRIC": "compilation_latency"},
                          {"--data @bisection-request.json": _bisection("cpu", "socket")})
    written = next(e for e in record["echoes"] if e.startswith("writeJSON bisection-request.json"))
    body = json.loads(written.split(" ", 2)[2])
    assert body["model"] == "lcnet_050" and body["good_commit"] == "a1" and body["metric"] == "compilation_latency"
    # which way is better and the threshold are the service's (its metric registry), not the pipeline's
    assert "direction" not in body and "threshold_pct" not in body
    assert any("perfdash bisect --request-id 7" in script for script in record["sh"])


def test_bisect_pipeline_refuses_an_incomplete_request(groovy_env, tmp_path) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"params": {"GOOD": "a1"}}))
    done = subprocess.run(["groovy", str(Path(__file__).with_name("pipeline_stub.groovy")), str(BISECT), str(scenario)],
                          env=groovy_env, capture_output=True, text=True, timeout=180)
    assert done.returncode != 0
    assert "give REQUEST_ID, or GOOD, BAD and MODEL" in done.stderr + done.stdout


def test_ingest_keeps_the_token_off_command_lines_and_the_spool_on_the_node(run_pipeline, extract_commands) -> None:
    """Docker Pipeline runs each step as `docker exec CONTAINER env NAME=value ... sh`, so a bound variable is on a
    command line on the node; only a file keeps the token out of `ps`. The container is thrown away after the cell:
    the spool must live on a node volume for the next build to post what tonight's service could not take."""
    from perfdash.cli import build_parser

    record = run_pipeline(NIGHTLY)
    ingests = [script for script in record["sh"] if "perfdash ingest" in script]
    assert ingests
    for script in ingests:
        assert "--token " not in script and "$PERFDASH_TOKEN\"" not in script and "${PERFDASH_TOKEN}" not in script
        (args,) = extract_commands(script)
        parsed = build_parser().parse_args(args)
        assert parsed.token is None and str(parsed.token_file) == "/workspace@tmp/secretFiles/1/token"
    ingest_bindings = [b for b in record["bindings"] if b["id"] == "perfdash-ingest-token-file"]
    assert len(ingest_bindings) == len(ingests)
    assert all(b == {"id": "perfdash-ingest-token-file", "variable": "PERFDASH_TOKEN_FILE", "kind": "file"}
               for b in ingest_bindings)

    spool = record["env"]["SPOOL_DIR"]
    runners = [e for e in record["echoes"] if e.startswith("inside perfdash-runner-")]
    assert len(runners) == len(ingests)
    for echo in runners:
        assert f"-v perfdash-spool:{spool} " in echo  # a named volume: it outlives the container
        assert f"-e PERFDASH_SPOOL_DIR={spool} " in echo
    for name in ("runner-cpu.Dockerfile", "runner-cuda.Dockerfile"):
        text = (REPO / "docker" / name).read_text()
        assert f"PERFDASH_SPOOL_DIR={spool}" in text, name
        # private to the user the cells run as: nothing else on the node may plant an upload there
        assert 'install -d -m 0700 -o "${SPOOL_UID}" "${PERFDASH_SPOOL_DIR}"' in text, name
        assert "1777" not in text, name
    builds = [e for e in record["echoes"] if e.startswith("docker build perfdash-runner-")]
    assert len(builds) == len(runners) and all("--build-arg SPOOL_UID=" in e for e in builds)
    assert any(script.strip() == "id -u" for script in record["sh"])


# A variable whose value would be a secret: bound so, it is in `docker exec ... env NAME=value` on the node (`ps`
# shows it), and on a command line it is in argv. Only the path of a secret file may be bound or passed.
SECRET_VARIABLE = re.compile(r"TOKEN|PASSWORD|SECRET|DATABASE_URL|CREDENTIAL|API_KEY", re.I)


def _pipeline_records(run_pipeline) -> list[dict]:
    return [
        run_pipeline(NIGHTLY, stdout={"api/v1/runs?since=": json.dumps([{"id": 41, "jenkins_url":
                                                                          "https://jenkins.example/job/perfdash/1/"}]),
                                      "bisections?status=pending": json.dumps([{"id": 11}])}),
        run_pipeline(NIGHTLY, {"EXTENDED": True, "BACKENDS": True}),
        *(run_pipeline(BISECT, {"REQUEST_ID": "7"}, {"api/v1/bisections/": _bisection(device, threads)})
          for device, threads in (("cpu", 1), ("cuda", "all"))),
        run_pipeline(BISECT, {"GOOD": "a1", "BAD": "b2", "MODEL": "lcnet_050"},
                     {"--data @bisection-request.json": _bisection("cpu", "socket")}),
    ]


def test_no_secret_on_a_command_line_or_in_a_step_environment(run_pipeline) -> None:
    """Scans what the pipelines do: every credential is a file (its path is bound, never its content), no sh step
    names a secret-valued variable or passes a --token, no container starts with a secret in -e, and a token read
    from its file goes only to a shell builtin (printf) feeding curl's config on stdin, with the trace off."""
    records = _pipeline_records(run_pipeline)
    bindings = [b for record in records for b in record["bindings"]]
    assert bindings, "the scenarios bind credentials"
    for binding in bindings:
        assert binding["kind"] == "file", binding
        assert binding["variable"].endswith("_FILE"), binding
    for record in records:
        for script in record["sh"]:
            for name in re.findall(r"\$\{?(\w+)", script):
                assert not SECRET_VARIABLE.search(name) or name.endswith("_FILE"), (name, script)
            assert not re.search(r"--token(?!-file)\b", script), script
            # curl's own credential flags put the secret in its argv
            assert not re.search(r"curl[^|\n]*(\s-u\s+\S*:|--user\s|--oauth2-bearer|-H\s+\S?Authorization)",
                                 script.replace("\\\n", " ")), script
            reads = re.findall(r"\$\(cat [^)]*_FILE[^)]*\)", script)
            if reads:
                # the content goes to printf (a builtin: no exec, no argv) and on into curl's config on stdin
                assert script.lstrip().startswith("set +x"), script
                for line in (line for line in script.splitlines() if "$(cat" in line):
                    assert line.strip().startswith("printf ") and line.rstrip().endswith("|"), line
                assert "curl" in script and " -K - " in script, script
        for echo in record["echoes"]:
            if echo.startswith("inside "):
                for name in re.findall(r"-e (\w+)=", echo):
                    assert not SECRET_VARIABLE.search(name), echo
        for name, value in record["env"].items():
            assert not (SECRET_VARIABLE.search(name) and value), (name, value)


def test_the_pipelines_name_no_upstream_repository_or_issue_and_default_to_https(run_pipeline) -> None:
    nightly = run_pipeline(NIGHTLY)
    assert nightly["env"]["GITHUB_REPOSITORY"] == "" and nightly["env"]["PERFDASH_REPORT_ISSUE"] == ""
    assert "93794" not in NIGHTLY.read_text()
    for record in (nightly, run_pipeline(BISECT, {"REQUEST_ID": "7"}, {"api/v1/bisections/": _bisection("cpu", 1)})):
        assert record["params"]["SERVICE_URL"].startswith("https://"), record["params"]["SERVICE_URL"]
