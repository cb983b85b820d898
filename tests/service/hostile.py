"""The malformed and hostile corpus: uploads the service must refuse with a 4xx (and `perfdash ingest` with a
one-line error) naming where the fault is, storing nothing. Shared by tests/service/test_hostile_input.py and
bench/faults.py (loaded by path: tests/ is not a package)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

STEM = "inductor_torchbench_float32_inference_cpu"
PERFORMANCE = f"{STEM}_performance.csv"
ACCURACY = f"{STEM}_accuracy.csv"
MANIFEST = f"{STEM}_manifest.json"
HEADER_PERF = "dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem," \
              "dynamo_peak_mem\n"
HEADER_ACC = "dev,name,batch_size,accuracy\n"
GOOD_PERF = ["cpu,resnet18,8,1.300000,5.000000,10.000000,1.200000,0.200000,0.160000",
             "cpu,alexnet,8,1.100000,4.000000,9.000000,1.100000,0.200000,0.180000"]
GOOD_ACC = ["cpu,resnet18,8,pass", "cpu,alexnet,8,pass"]


def performance(*rows: str) -> bytes:
    return (HEADER_PERF + "".join(r + "\n" for r in rows)).encode()


def accuracy(*rows: str) -> bytes:
    return (HEADER_ACC + "".join(r + "\n" for r in rows)).encode()


def good_files(stem: str = STEM) -> dict[str, bytes]:
    return {f"{stem}_performance.csv": performance(*GOOD_PERF), f"{stem}_accuracy.csv": accuracy(*GOOD_ACC)}


def manifest(**changes: object) -> dict:
    body: dict = {"schema_version": 1, "source": "perfdash",
                  "config": {"suite": "torchbench", "backend": "inductor", "dtype": "float32", "mode": "inference",
                             "device": "cpu"},
                  "machine": {"host": "agent-1", "device": "cpu", "cpu_model": "Test Xeon", "cpu_count": 2},
                  "torch_version": "2.14.1", "torch_git_commit": "c0ffee", "start_time": "2026-01-02T01:00:00+00:00"}
    for path, value in changes.items():
        target = body
        *parents, last = path.split(".")
        for parent in parents:
            target = target[parent]
        target[last] = value
    return body


@dataclass(frozen=True)
class Case:
    """One hostile upload. ``where`` is what the error must name: (file, line, column), None where not applicable;
    the file is matched as a prefix of the named file (several files of one run may be read first).
    ``flags`` are the same metadata as `perfdash ingest` options (they replace the form fields)."""

    name: str
    files: dict[str, bytes]
    form: dict[str, str] = field(default_factory=dict)
    where: tuple[str | None, int | None, str | None] = (None, None, None)
    status: int = 422

    @property
    def flags(self) -> list[str]:
        out = []
        for key, value in self.form.items():
            out += [f"--{key.replace('_', '-')}", value]
        return out


@dataclass(frozen=True)
class JsonCase:
    name: str
    body: dict
    status: int = 422


def _with(files: dict[str, bytes], **replace: bytes) -> dict[str, bytes]:
    return {**files, **{k.replace("perf", PERFORMANCE).replace("acc", ACCURACY): v for k, v in replace.items()}}


BIG = "x" * (200 * 1024)  # over the csv module's 128 KiB field limit
FORM = {"machine": "Test Xeon", "commit": "c0ffee", "timestamp": "2026-01-02T01:00:00+00:00"}


def file_cases() -> list[Case]:
    """Multipart / CLI uploads: CSVs (and manifests) with one fault each."""
    g = good_files()
    return [
        Case("NUL in a model name", _with(g, perf=performance(GOOD_PERF[0], "cpu,alex\x00net,8,1.1,4.0")),
             FORM, (PERFORMANCE, 3, "name")),
        Case("NUL in a number", _with(g, perf=performance("cpu,resnet18,8,1.\x003,5.0", GOOD_PERF[1])),
             FORM, (PERFORMANCE, 2, "speedup")),
        Case("NUL in a status", _with(g, acc=accuracy("cpu,resnet18,8,pa\x00ss", GOOD_ACC[1])),
             FORM, (ACCURACY, 2, "accuracy")),
        Case("NUL in the header", _with(g, acc=("dev,na\x00me,batch_size,accuracy\n" + GOOD_ACC[0] + "\n").encode()),
             FORM, (ACCURACY, 1, "field 2")),
        Case("field over 128 KiB", _with(g, perf=performance(GOOD_PERF[0], f"cpu,{BIG},8,1.1,4.0")),
             FORM, (PERFORMANCE, 3, "name")),
        Case("model name over 200 characters", _with(g, perf=performance(f"cpu,{'m' * 201},8,1.1,4.0")),
             FORM, (PERFORMANCE, 2, "name")),
        Case("batch size over 32 bits", _with(g, acc=accuracy("cpu,resnet18,99999999999,pass")),
             FORM, (ACCURACY, 2, "batch_size")),
        Case("status over 64 characters", _with(g, acc=accuracy("cpu,resnet18,8," + "p" * 65)),
             FORM, (ACCURACY, 2, "accuracy")),
        Case("unknown dtype in the file name", good_files("inductor_torchbench_float64_inference_cpu"), FORM,
             ("inductor_torchbench_float64_inference_cpu", None, None)),
        Case("unknown device in the file name", good_files("inductor_torchbench_float32_inference_tpu"), FORM,
             ("inductor_torchbench_float32_inference_tpu", None, None)),
        Case("unknown backend in the file name", good_files("mycompiler_torchbench_float32_inference_cpu"), FORM,
             ("mycompiler_torchbench_float32_inference_cpu", None, None)),
        Case("timestamp near year 9999, negative offset", g, {**FORM, "timestamp": "9999-12-31T23:00:00-05:00"},
             ("timestamp", None, None)),
        Case("timestamp in 2099", g, {**FORM, "timestamp": "2099-01-01T00:00:00+00:00"}, ("timestamp", None, None)),
        Case("timestamp in year 1", g, {**FORM, "timestamp": "0001-01-01T00:00:00+05:00"}, ("timestamp", None, None)),
        Case("machine name over 200 characters", g, {**FORM, "machine": "X" * 300}, ("machine", None, None)),
        Case("NUL in the machine name", g, {**FORM, "machine": "Xe\x00on"}, ("machine", None, None)),
        Case("NUL in a manifest string", {**g, MANIFEST: json.dumps(manifest(torch_version="2.\x00")).encode()},
             {}, (MANIFEST, None, None)),
        Case("lone surrogate in a manifest string",
             {**g, MANIFEST: json.dumps(manifest(**{"machine.host": "agent-\ud800"})).encode()}, {},
             (MANIFEST, None, None)),
        Case("manifest starts in 2099", {**g, MANIFEST: json.dumps(manifest(start_time="2099-06-01T00:00:00Z"))
                                         .encode()}, {}, (MANIFEST, None, None)),
        Case("manifest starts near year 9999", {**g, MANIFEST: json.dumps(
            manifest(start_time="9999-12-31T23:59:59-05:00")).encode()}, {}, (MANIFEST, None, None)),
        Case("manifest machine over 200 characters", {**g, MANIFEST: json.dumps(
            manifest(**{"machine.cpu_model": "C" * 250})).encode()}, {}, (MANIFEST, None, None)),
    ]


def json_cases() -> list[JsonCase]:
    """JSON uploads (HTTP only): a manifest and results with one fault each."""
    results = [{"name": "resnet18", "batch_size": 8, "accuracy": "pass", "speedup": 1.3, "abs_latency": 5.0}]
    return [
        JsonCase("NUL in a result name", {"manifest": manifest(), "results": [{**results[0], "name": "res\x00"}]}),
        JsonCase("NUL in a manifest string", {"manifest": manifest(**{"machine.host": "a\x00b"}), "results": results}),
        JsonCase("lone surrogate in a manifest string", {"manifest": manifest(**{"machine.host": "a\udc80"}),
                                                         "results": results}),
        JsonCase("unknown dtype", {"manifest": manifest(**{"config.dtype": "float64"}), "results": results}),
        JsonCase("unknown device", {"manifest": manifest(**{"config.device": "tpu"}), "results": results}),
        JsonCase("free-form suite", {"manifest": manifest(**{"config.suite": "my suite"}), "results": results}),
        JsonCase("free-form backend", {"manifest": manifest(**{"config.backend": "my<backend>"}), "results": results}),
        JsonCase("free-form variant", {"manifest": manifest(**{"config.variant": "No Cudagraphs!"}),
                                       "results": results}),
        JsonCase("start in 2099", {"manifest": manifest(start_time="2099-01-01T00:00:00Z"), "results": results}),
        JsonCase("start near year 9999", {"manifest": manifest(start_time="9999-12-31T23:00:00-05:00"),
                                          "results": results}),
        JsonCase("model name over 200 characters", {"manifest": manifest(),
                                                    "results": [{**results[0], "name": "m" * 201}]}),
        JsonCase("batch size over 32 bits", {"manifest": manifest(),
                                             "results": [{**results[0], "batch_size": 2**40}]}),
        JsonCase("threads over range", {"manifest": manifest(**{"config.threads": 10**30}), "results": results}),
    ]


def query_cases() -> list[tuple[str, str, tuple[int, ...]]]:
    """(method, URL, accepted statuses): query filters and dates that must never be a 5xx."""
    return [
        ("GET", "/api/v1/runs?suite=%00", (400,)),
        ("GET", "/api/v1/series?name=res%00net", (400,)),
        ("GET", "/api/v1/configurations?machine=a%00b", (400,)),
        ("GET", "/trends?suite=torch%00bench", (400,)),
        ("GET", "/trends?to=0001-01-01", (200,)),
        ("GET", "/trends?from=0001-01-01&to=0001-01-01", (200,)),
        ("GET", "/model/1?to=0001-01-01", (200, 404)),
        ("GET", "/api/v1/runs?since=0001-01-01&until=9999-12-31", (200,)),
    ]


# Strings that are valid data (a model name, a host, a CPU name, a commit subject: free text up to 200 characters)
# and must reach GitHub as literal text: no mention, issue link, autolink, image, HTML or markdown structure of
# their own (service/github/safe.py). Used by tests/detection/test_github_text.py.
GITHUB_HOSTILE = (
    "@pytorch/compiler",
    "cc @someone please",
    "fixes #1234",
    "pytorch/pytorch#99",
    "GH-77",
    "[click](https://evil.example/x)",
    "![tracker](https://evil.example/pixel.png)",
    "https://evil.example/autolink",
    "www.evil.example",
    "</details><h1>owned</h1>",
    "<!-- hide the rest",
    "<img src=x onerror=alert(1)>",
    "model\n# Injected heading",
    "model\r\n- injected list item",
    "```\nbreak out of the code block",
    "`inline code`",
    "**bold** _em_ ~~strike~~",
    "a|b|c",
    "mail me@example.com",
    "&lt;entity&gt; &#64;user",
    "\u2028line separator",
)
