"""The accuracy rule on real tensors (PyTorch's `same()` semantics: allclose, else RMSE against fp64)."""

from __future__ import annotations

import torch

from runner.accuracy import exactly_same, flatten, same, scalar_loss


def _case(n: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    fp64 = torch.randn(n, generator=gen, dtype=torch.float64)
    return fp64, fp64.float()


def test_identical_and_within_tolerance_pass() -> None:
    fp64, ref = _case()
    assert same(ref, ref.clone(), fp64, tol=1e-4)
    assert same(ref, ref + 5e-5, fp64, tol=1e-4)


def test_perturbed_output_fails_even_against_fp64() -> None:
    fp64, ref = _case()
    assert not same(ref, ref + 1e-2, fp64, tol=1e-3)
    assert not same([ref, ref], [ref, ref + 1e-2], [fp64, fp64], tol=1e-3)


def test_rmse_rule_accepts_a_result_no_worse_than_eager() -> None:
    """Beyond allclose, the compiled result passes when it is about as close to fp64 as eager is."""
    gen = torch.Generator().manual_seed(1)
    fp64 = torch.randn(4096, generator=gen, dtype=torch.float64)
    ref = (fp64 + 1e-2 * torch.randn(4096, generator=gen, dtype=torch.float64)).float()  # eager: noisy
    res = (fp64 + 1e-2 * torch.randn(4096, generator=gen, dtype=torch.float64)).float()  # compiled: as noisy
    assert not torch.allclose(ref, res, atol=1e-3, rtol=1e-3)
    assert same(ref, res, fp64, tol=1e-3)
    worse = (fp64 + 5e-2 * torch.randn(4096, generator=gen, dtype=torch.float64)).float()
    assert not same(ref, worse, fp64, tol=1e-3)
    assert not same(ref, res, None, tol=1e-3)  # without a reference only allclose counts


def test_integers_shapes_and_structure_must_match() -> None:
    ids = torch.arange(10)
    assert same(ids, ids.clone())
    assert not same(ids, ids + 1)
    assert not same(torch.zeros(3), torch.zeros(4))
    assert not same([torch.zeros(3)], [torch.zeros(3), torch.zeros(3)])


def test_eager_reruns_must_be_bit_identical() -> None:
    _, ref = _case()
    assert exactly_same([ref], [ref.clone()])
    assert not exactly_same([ref], [ref + 1e-7 * ref.abs().max()])


def test_flatten_and_loss_handle_model_outputs() -> None:
    out = {"logits": torch.ones(2, 3), "hidden": (torch.zeros(2), None)}
    assert [t.shape for t in flatten(out)] == [torch.Size([2, 3]), torch.Size([2])]
    assert scalar_loss(out).item() == 0.5
