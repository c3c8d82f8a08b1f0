"""pytest helpers: guard a model's numerics in a regression suite.

    from phantom.testing import assert_numerics

    def test_model_numerics():
        assert_numerics("model.onnx", ep="cpu")                       # against phantom's f64 reference
        assert_numerics("model.onnx", ep="cpu", golden="golden/")    # against a recorded known-good run
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import phantom
from phantom._binary import run
from phantom.report import workdir


def assert_numerics(
    model: "str | os.PathLike[str]",
    ep: str = "cpu",
    golden: "Optional[str | os.PathLike[str]]" = None,
    precision: str = "fp32",
    *,
    record: Optional[bool] = None,
    budget: Optional[float] = None,
    **options: Any,
) -> Any:
    """Fails the test when the model's numerics on ``ep`` are not what they should be.

    Without ``golden``: :func:`phantom.compare` against the f64 reference must exit 0 (clean, or precision-limited
    unless ``strict=True``); the assertion names the verdict, first divergence and culprits. With ``golden``: the run
    must match that record (``phantom check``; ``budget`` is its default drift budget). A missing record is an error
    unless ``record=True`` or ``PHANTOM_RECORD=1``, which writes it (``phantom record``) and passes. Returns the
    report (a :class:`phantom.Report`, or the check report's JSON as a dict).
    """
    if golden is None:
        return phantom.compare(model, ep=ep, precision=precision, html=False, **options).raise_for_drift()
    if options:
        raise TypeError(f"assert_numerics with golden= takes no compare options (got {sorted(options)})")
    golden = Path(golden)
    engine = ["--ep", ep, "--precision", precision]
    if not golden.exists():
        if record or (record is None and os.environ.get("PHANTOM_RECORD") == "1"):
            run(["record", str(model), "-o", str(golden), *engine])
            return {"status": "recorded", "golden": str(golden)}
        raise FileNotFoundError(f"no golden record at {golden}: run once with record=True or PHANTOM_RECORD=1")
    folder = workdir()
    out = Path(folder.name) / "check.json"
    args = ["check", str(model), "--golden", str(golden), "--json", str(out), *engine]
    if budget is not None:
        args += ["--budget", str(budget)]
    proc = run(args)
    data = json.loads(out.read_text())
    if proc.returncode == 1:
        raise AssertionError(f"{model} regressed against {golden} on {ep}:\n{proc.stdout.strip()}")
    return data
