"""ONNX Runtime's I/O binding (runner.backends.onnx.bound_runner, the CUDA path) keeps every bound buffer alive until
the run returns. Binding records only an address: a contiguous copy of a non-contiguous input dropped before the run
can be freed and its memory handed to the next copy. The same function binds on CPU, where malloc reuses a freed
block as torch's caching allocator does on CUDA, so the bug and its fix show here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from runner.backends.onnx import bound_runner  # noqa: E402 - after the skip

SHAPE = (64, 48)


def _sub_session() -> Any:
    """y = a - b: wrong as soon as a and b share memory."""
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(SHAPE)) for n in ("a", "b")]
    graph = helper.make_graph([helper.make_node("Sub", ["a", "b"], ["y"])], "sub", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _non_contiguous() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(SHAPE[1], SHAPE[0], generator=gen).t() for _ in range(2))
    assert not a.is_contiguous() and not b.is_contiguous()
    return a, b


def _dropping_copies(session: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The loop before the fix: each input's contiguous copy lost its last reference when the next was bound."""
    binding = session.io_binding()
    for name, tensor in zip(("a", "b"), (a, b), strict=True):
        tensor = tensor.contiguous()
        binding.bind_input(name, "cpu", 0, np.float32, list(tensor.shape), tensor.data_ptr())
    binding.bind_output("y", "cpu")
    session.run_with_iobinding(binding)
    return torch.from_numpy(binding.copy_outputs_to_cpu()[0])


def test_bound_non_contiguous_inputs_stay_alive_until_the_run_returns() -> None:
    session = _sub_session()
    a, b = _non_contiguous()
    run = bound_runner(session, ("a", "b"), ["y"], "cpu")
    first = run([a, b])[0].clone()  # outputs allocated by ONNX Runtime
    second = run([a, b])[0]  # outputs bound to the first call's buffers
    torch.testing.assert_close(first, a - b)
    torch.testing.assert_close(second, a - b)


def test_the_check_can_fail_dropped_copies_give_a_wrong_answer() -> None:
    a, b = _non_contiguous()
    assert not torch.allclose(_dropping_copies(_sub_session(), a, b), a - b, equal_nan=False)
