"""An accuracy bisection: a commit changes the numerics of a tiny torch model; the measure prints pass or fail."""

from __future__ import annotations

import json
import shlex
import sys

from perfdash.cli import main

MODEL_PY = """\
import torch
from torch import nn

EPS = {eps}


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.weight = nn.Parameter(torch.ones(16))

    def forward(self, x):
        x = self.proj(x)
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + EPS) * self.weight
"""

# Compare the model (float32) with the definition of layer norm in float64, as the dashboard's accuracy check does
# with its fp64 reference; print the status word.
CHECK_PY = """\
import torch
from model import TinyNet

torch.manual_seed(0)
net = TinyNet().eval()
x = torch.randn(4, 16)
with torch.no_grad():
    out = net(x)
    h = net.proj.double()(x.double())
    ref = torch.nn.functional.layer_norm(h, (16,), weight=net.weight.double(), eps=1e-5)
print("max abs error", (out.double() - ref).abs().max().item())
print("pass" if torch.allclose(out.double(), ref, rtol=1e-4, atol=1e-4) else "fail_accuracy")
"""


def test_accuracy_bisection_finds_the_commit_that_changed_numerics(synth, tmp_path, capsys):
    def set_eps(value: str):
        def change(repo):
            (repo / "model.py").write_text(MODEL_PY.format(eps=value))
            return f"norm: eps {value}"
        return change

    # Few commits: every measurement imports torch (seconds on this shared machine).
    changes = [synth.touch(n) for n in range(1, 5)] + [set_eps("1e-1")] + [synth.touch(n) for n in range(6, 9)]
    history = synth.make_history(tmp_path, changes, {"model.py": MODEL_PY.format(eps="1e-5"), "check.py": CHECK_PY})
    before = synth.snapshot(history.repo)
    out = tmp_path / "result.json"
    code = main(["bisect", "--repo", str(history.repo), "--good", history.shas[0], "--bad", history.shas[-1],
                 "--measure", f"{shlex.quote(sys.executable)} check.py", "--repeats", "1",
                 "--cache-dir", str(tmp_path / "cache"), "--json", str(out)])
    stderr = capsys.readouterr().err
    assert code == 0, stderr
    result = json.loads(out.read_text())
    assert result["verdict"] == "culprit_found"
    assert result["culprit"]["sha"] == history.shas[5] and result["culprit"]["subject"] == "norm: eps 1e-1"
    assert set(result["good_samples"]) == {"pass"} and set(result["bad_samples"]) == {"fail_accuracy"}
    for step in result["steps"]:
        assert step["samples"] == (["fail_accuracy"] if history.index(step["sha"]) >= 5 else ["pass"])
    assert synth.snapshot(history.repo) == before
