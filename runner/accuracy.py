"""Accuracy: compare a compiled model's results to eager ones against an fp64 reference, PyTorch's way.

The rule (that of ``torch._dynamo.utils.same`` as PyTorch's harness calls it), per floating-point tensor of the same
shape and dtype: pass when ``allclose(ref, res, atol=tol, rtol=tol)``; otherwise, with an fp64 reference, pass when
``rmse(fp64, res) <= multiplier * rmse(fp64, ref) + tol / 10`` — the compiled result may not be much further from
the exact answer than eager is. The multiplier is 2 (3 for half precision, for tensors under 1000 elements, or when
the suite's tolerance is already wide, >= 2e-2; 8 or 10 for tensors of at most 500 or 10 elements of the models
PyTorch lists for it). NaNs count as equal except in float32 runs (PyTorch's ``equal_nan``). Integer and boolean
tensors must agree within the tolerance (exactly, for the tolerances in use). With ``cosine``, float tensors pass on
cosine similarity >= 0.99.
"""

from __future__ import annotations

import collections
import enum
import math
import types
from collections.abc import Mapping
from typing import Any, cast

import torch

# Leaves compared by value (==): plain data, and the types and devices a model's output may carry.
_PLAIN = (str, bytes, int, float, complex, bool, torch.dtype, torch.device, type, enum.Enum, types.FunctionType,
          types.BuiltinFunctionType, types.MethodType)


def flatten(value: Any) -> list[Any]:
    """Leaves of a model's output (tensors and plain values), in a stable order.

    Containers are walked: mappings, sequences, transformers' ModelOutput, and any other object through its
    attributes (a KV cache such as transformers' DynamicCache holds its tensors in layer objects), as PyTorch's
    ``same()`` walks the attributes of the output classes it knows. Comparing such an object as a whole would compare
    it by identity, and two runs of the same model would never agree.
    """
    leaves: list[Any] = []
    _walk(value, leaves, set())
    return leaves


def _walk(value: Any, leaves: list[Any], path: set[int]) -> None:
    if value is None:
        return
    if isinstance(value, (torch.Tensor, *_PLAIN)):
        leaves.append(value)
        return
    if id(value) in path:  # a reference back up the structure: its contents are walked already
        return
    path.add(id(value))
    if isinstance(value, Mapping):
        for key in value:
            _walk(value[key], leaves, path)
    elif isinstance(value, (list, tuple, collections.deque)):
        for item in value:
            _walk(item, leaves, path)
    elif hasattr(value, "to_tuple"):  # transformers ModelOutput: its fields that are set, in order
        _walk(value.to_tuple(), leaves, path)
    else:
        attributes = _attributes(value)
        if not attributes:  # nothing inside to compare but what it is
            leaves.append(type(value))
        for _, attribute in sorted(attributes.items()):
            _walk(attribute, leaves, path)
    path.discard(id(value))


def _attributes(value: Any) -> dict[str, Any]:
    found = dict(vars(value)) if hasattr(value, "__dict__") else {}
    for cls in type(value).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(value, name):
                found.setdefault(name, getattr(value, name))
    return found


def compared_part(output: Any) -> Any:
    """What of a model's output the check compares: all of it, except that of transformers' question-answering
    outputs only the loss counts (PyTorch's ``same()``: their start and end logits are too prone to noise)."""
    if type(output).__name__ == "QuestionAnsweringModelOutput":
        return output.loss
    return output


def scalar_loss(output: Any) -> torch.Tensor:
    """A scalar to backpropagate when the model has no loss of its own: the mean of every float output."""
    tensors = [t for t in flatten(output) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if not tensors:
        raise ValueError("the model's output has no floating-point tensor to derive a loss from")
    # as PyTorch's harness reduces it; a tensor, as tensors is not empty (typeshed's sum() adds its start, 0)
    return cast(torch.Tensor, sum(t.float().mean() for t in tensors) / len(tensors))


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.sqrt(torch.mean(torch.square(a.double() - b.double()))).item()


def _multiplier(res: torch.Tensor, fp64: torch.Tensor, tol: float, larger_for_small: bool) -> float:
    if larger_for_small and fp64.numel() <= 10:
        return 10.0
    if larger_for_small and fp64.numel() <= 500:
        return 8.0
    if fp64.numel() < 1000 or tol >= 2e-2 or (res.ndim == 4 and res.shape[-1] == res.shape[-2] == 1):
        return 3.0
    return 3.0 if res.dtype in (torch.float16, torch.bfloat16) else 2.0


def tensors_agree(ref: torch.Tensor, res: torch.Tensor, fp64: torch.Tensor | None, tol: float,
                  cosine: bool = False, equal_nan: bool = True, larger_multiplier: bool = False) -> bool:
    """One tensor pair by PyTorch's ``same()`` (its ``equal_nan`` and ``use_larger_multiplier_for_smaller_tensor``
    are ``equal_nan`` and ``larger_multiplier``)."""
    if ref.shape != res.shape or ref.dtype != res.dtype:
        return False
    ref = ref.detach().cpu()
    res = res.detach().cpu()
    if not ref.is_floating_point():  # integers within the tolerance, booleans as bytes, as PyTorch compares them
        if ref.dtype == torch.bool:
            ref, res = ref.to(torch.uint8), res.to(torch.uint8)
        return bool(torch.allclose(ref, res, atol=tol, rtol=tol, equal_nan=equal_nan))
    if cosine:
        ref, res = ref.flatten().float(), res.flatten().float()
        if torch.allclose(ref, res, atol=tol, rtol=tol, equal_nan=True):
            return True
        return bool(torch.nn.functional.cosine_similarity(ref, res, dim=0, eps=1e-6) >= 0.99)
    if torch.allclose(ref, res, atol=tol, rtol=tol, equal_nan=equal_nan):
        return True
    if fp64 is None or fp64.dtype != torch.float64:
        return False
    fp64 = fp64.detach().cpu()
    # Eager produced NaN where the compiled result is finite and close to fp64: the compiled one is better.
    if ref.isnan().any() and not res.isnan().any() and not fp64.isnan().any() and \
            torch.allclose(fp64.to(res.dtype), res, atol=4e-2, rtol=4e-2, equal_nan=equal_nan):
        return True
    ref_error = _rmse(fp64, ref)
    res_error = _rmse(fp64, res)
    if res_error <= _multiplier(res, fp64, tol, larger_multiplier) * ref_error + tol / 10.0:
        return True
    return equal_nan and math.isnan(ref_error) and math.isnan(res_error)


def same(ref: Any, res: Any, fp64_ref: Any = None, tol: float = 1e-4, cosine: bool = False, equal_nan: bool = True,
         larger_multiplier: bool = False) -> bool:
    """True when two model results agree leaf by leaf (see the module docstring)."""
    ref_leaves, res_leaves = flatten(ref), flatten(res)
    fp64_leaves = flatten(fp64_ref) if fp64_ref is not None else [None] * len(ref_leaves)
    if len(ref_leaves) != len(res_leaves) or len(fp64_leaves) != len(ref_leaves):
        return False
    for a, b, f in zip(ref_leaves, res_leaves, fp64_leaves, strict=True):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            f = f if isinstance(f, torch.Tensor) and f.shape == a.shape else None
            if not tensors_agree(a, b, f, tol, cosine, equal_nan, larger_multiplier):
                return False
        elif isinstance(a, float) and isinstance(b, float):
            if not math.isclose(a, b, rel_tol=tol, abs_tol=tol):
                return False
        elif a != b:
            return False
    return True


def exactly_same(a: Any, b: Any, equal_nan: bool = True) -> bool:
    """Eager run twice must give bit-identical results (PyTorch compares them with tolerance 0)."""
    return same(a, b, fp64_ref=None, tol=0.0, equal_nan=equal_nan)
