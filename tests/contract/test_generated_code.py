"""The generated-code fingerprint (perfdash.generated_code) on real Inductor output: what two compilations of the
same code differ in does not change it, a changed kernel does, and the samples file carries it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfdash.contract import ContractError, ModelSamples, parse_samples
from perfdash.generated_code import (
    MAX_KERNEL_TIMES,
    CodeFingerprint,
    KernelTime,
    fingerprint,
    kernels_of,
    normalise,
    pack_source,
    top_kernels,
    unpack_source,
)

# The output code Inductor 2.14.1 wrote for tests/runner/models.py's tiny MLP on CPU with TORCHINDUCTOR_FREEZING=1
# (captured by runner.generated_code.capture).
OUTPUT = (Path(__file__).parent / "data" / "inductor_output_cpu.txt").read_text()


def _with_kernel_path(code: str, cache: str, key: str) -> str:
    """A kernel path comment, as Inductor writes one above a Triton kernel: the cache directory and a content key."""
    return code.replace("async_compile.wait(globals())",
                        f"# kernel path: {cache}/xy/{key}.py\nasync_compile.wait(globals())")


def _as_another_process_writes_it(code: str) -> str:
    """What differs between two compilations of the same code: object addresses of frozen parameters and the AOT
    graph counter."""
    code = re.sub(r"\) [0-9a-f]{12}$", ") 7fe549799a90", code, flags=re.MULTILINE)
    # a pattern's repr in an assertion message, as Inductor writes for resnet10t's frozen convolutions
    code = code.replace("del arg4_1", "assert_alignment(buf0, 16, \"functools.partial(<function fn at "
                        "0x7f030d19c5e0>, Match(...))\")\n        del arg4_1")
    return code.replace("# AOT ID: ['0_inference']", "# AOT ID: ['3_inference']")


def test_the_same_code_written_by_another_process_has_the_same_fingerprint() -> None:
    ours = OUTPUT.replace("del arg4_1", "assert_alignment(buf0, 16, \"functools.partial(<function fn at "
                          "0x7fe5583e4860>, Match(...))\")\n        del arg4_1")
    first = fingerprint([normalise(_with_kernel_path(ours, "/home/a/.cache/inductor", "c" + "a" * 51),
                                   ["/home/a/.cache/inductor", "/home/a"])])
    other = _with_kernel_path(_as_another_process_writes_it(OUTPUT), "/var/tmp/ci-cache", "c" + "q7" * 25 + "z")
    again = fingerprint([normalise(other, ["/var/tmp/ci-cache", "/home/ci"])])
    assert first.digest == again.digest
    assert first.graphs == 1 and first.kernels == 2
    assert [name for name, _ in first.kernel_digests] == ["cpp_fused_addmm_relu_0", "cpp_fused_addmm_relu_1"]
    # without normalising, the two differ
    assert fingerprint([ours]).digest != fingerprint([_as_another_process_writes_it(OUTPUT)]).digest


def test_a_changed_kernel_changes_the_digest_and_only_that_kernel() -> None:
    before = fingerprint([normalise(OUTPUT)])
    # another vector width in the first kernel (what cpp.simdlen changes)
    changed = OUTPUT.replace("x1+=static_cast<int64_t>(16L)", "x1+=static_cast<int64_t>(8L)", 1)
    after = fingerprint([normalise(changed)])
    assert after.digest != before.digest
    old, new = before.kernel_map, after.kernel_map
    assert [k for k in old if old[k] != new[k]] == ["cpp_fused_addmm_relu_0"]


def test_graph_order_does_not_matter_and_repeated_kernel_names_are_kept_apart() -> None:
    second = OUTPUT.replace("x0<static_cast<int64_t>(4L)", "x0<static_cast<int64_t>(8L)")
    one, two = fingerprint([OUTPUT, second]), fingerprint([second, OUTPUT])
    assert one.digest == two.digest and one.graphs == 2 and one.kernels == 4
    assert [n for n, _ in one.kernel_digests][2:] == ["cpp_fused_addmm_relu_0#2", "cpp_fused_addmm_relu_1#2"]


def test_kernels_are_cut_at_their_closing_quotes() -> None:
    kernels = kernels_of(OUTPUT)
    assert [name for name, _ in kernels] == ["cpp_fused_addmm_relu_0", "cpp_fused_addmm_relu_1"]
    assert all(body.rstrip().endswith("''')") for _, body in kernels)
    assert "class Runner" not in kernels[1][1]


def test_packed_source_round_trips_and_is_capped() -> None:
    assert unpack_source(pack_source([OUTPUT])) == OUTPUT
    big = [OUTPUT.replace("0_inference", f"{i}_inference") + "\n".join(f"# line {i} {j}" for j in range(3000))
           for i in range(20)]
    packed = pack_source(big, limit=8000)
    assert len(packed) <= 8000 and unpack_source(packed).endswith("# ... cut to fit perfdash's cap\n")


def test_top_kernels_merge_the_cpp_profile_names_and_are_bounded() -> None:
    totals = {"graph_0_cpp_fused_addmm_relu_0": (30.0, 3), "graph_1_cpp_fused_addmm_relu_0": (6.0, 3),
              "mkl::_mkl_linear": (60.0, 6), "## Call CompiledFxGraph fx ##": (90.0, 3),
              "Torch-Compiled Region: 0/0": (70.0, 3), "ProfilerStep*": (200.0, 3),
              **{f"aten::op{i}": (1.0, 3) for i in range(40)}}
    top = top_kernels(totals, steps=3, step_us=50.0)
    assert len(top) == MAX_KERNEL_TIMES
    assert top[0] == KernelTime("mkl::_mkl_linear", 20.0, 0.4, 2.0)
    assert top[1] == KernelTime("cpp_fused_addmm_relu_0", 12.0, 0.24, 2.0)


def test_the_samples_file_carries_code_and_older_lines_still_read() -> None:
    code = fingerprint([normalise(OUTPUT)])
    new = ModelSamples("tiny_mlp", 4, (2.0,), (1.0,), code=code,
                       kernel_times=(KernelTime("cpp_fused_addmm_relu_0", 0.3, 0.002, 1.0),),
                       code_source=pack_source([normalise(OUTPUT)]))
    old = b'{"name": "lcnet_050", "batch_size": 8, "eager_ms": [3.0], "compiled_ms": [2.0]}'
    read = parse_samples(new.to_json().encode() + b"\n" + old + b"\n", "x_samples.jsonl")
    assert read[0] == new and read[0].code == code
    assert (read[1].code, read[1].kernel_times, read[1].code_source) == (None, (), None)
    assert "code" not in ModelSamples("m", 1, (1.0,), (1.0,)).to_json()


@pytest.mark.parametrize("code", ['{"digest": "abc", "graphs": 1, "kernels": 0}', '{"graphs": 1}', '"x"'])
def test_a_bad_fingerprint_is_an_error_naming_the_line(code: str) -> None:
    line = f'{{"name": "m", "batch_size": 1, "eager_ms": [1.0], "compiled_ms": [1.0], "code": {code}}}'
    with pytest.raises(ContractError) as caught:
        parse_samples(f"{line}\n".encode(), "x_samples.jsonl")
    assert caught.value.line == 1


def test_fingerprint_json_round_trips() -> None:
    code = fingerprint([normalise(OUTPUT)])
    assert CodeFingerprint.from_json(code.to_json()) == code
