"""PyTorch modules: dump every leaf module's output, and compare a module's ONNX export with phantom's f64 reference
and with eager PyTorch. torch is imported only when these functions are called."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Sequence, Tuple

import phantom
from phantom.report import workdir


def _as_tuple(inputs: Any) -> Tuple[Any, ...]:
    return tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)


def _tensors(name: str, out: Any) -> Dict[str, Any]:
    """A module's output as named tensors: one tensor as is, tuples and lists as ``name.0``, ``name.1``…"""
    import torch

    if isinstance(out, torch.Tensor):
        return {name: out.detach().cpu()}
    if isinstance(out, (tuple, list)):
        found: Dict[str, Any] = {}
        for i, o in enumerate(out):
            found.update(_tensors(f"{name}.{i}", o))
        return found
    return {}


def dump(module: Any, inputs: Any, path: "str | os.PathLike[str]") -> Dict[str, Any]:
    """Runs ``module(*inputs)`` in eval mode without gradients, keeping every leaf module's output (forward hooks),
    and saves ``{module name: tensor}`` with ``torch.save`` to ``path``: the format ``phantom diff`` reads. Returns
    the dict (the final output under ``"output"``)."""
    import torch

    captured: Dict[str, Any] = {}
    handles = []
    for name, sub in module.named_modules():
        if name and not any(True for _ in sub.children()):
            handles.append(sub.register_forward_hook(
                lambda _m, _i, out, name=name: captured.update(_tensors(name, out))))
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            result = module(*_as_tuple(inputs))
    finally:
        for h in handles:
            h.remove()
        module.train(was_training)
    captured.update(_tensors("output", result))
    torch.save(captured, str(path))
    return captured


def compare(module: Any, inputs: Any, ep: str = "cpu", opset: int = 17, **options: Any) -> "phantom.Report":
    """Exports ``module`` to ONNX (``torch.onnx.export``, inputs named ``input_0``…, outputs ``output_0``…), compares
    the export with phantom's f64 reference on ``ep`` (:func:`phantom.compare`, the same inputs), and diffs eager
    PyTorch's outputs against ONNX Runtime's (``report.eager``, a :class:`phantom.DiffReport`; the per-module dump is
    at ``report.eager_dump``). Pairing eager modules with the export's intermediate values is not done here: only
    the model outputs are paired."""
    import numpy as np
    import torch

    folder = workdir()
    tmp = Path(folder.name)
    args = _as_tuple(inputs)
    module.eval()
    with torch.no_grad():
        eager = module(*args)
    outs = list(_tensors("output", eager).values())
    onnx_path = tmp / "model.onnx"
    torch.onnx.export(module, args, str(onnx_path), opset_version=opset, dynamo=False,
                      input_names=[f"input_{i}" for i in range(len(args))],
                      output_names=[f"output_{i}" for i in range(len(outs))])
    feeds = {f"input_{i}": a.detach().cpu().numpy() for i, a in enumerate(args)}
    report = phantom.compare(onnx_path, inputs=feeds, ep=ep, dump=str(tmp / "dump"), **options)
    eager_dir = tmp / "eager_outputs"  # one .npy per output: names pair with the dump's file names
    eager_dir.mkdir()
    for i, o in enumerate(outs):
        np.save(eager_dir / f"output_{i}.npy", o.numpy())
    target_dir = next(p for p in sorted((tmp / "dump").iterdir()) if p.is_dir() and p.name != "reference")
    report.eager = phantom.diff(eager_dir, target_dir)
    report.eager_dump = tmp / "eager.pt"
    dump(module, args, report.eager_dump)
    report._torch_workdir = folder
    return report


def named_inputs(inputs: Sequence[Any]) -> Dict[str, Any]:
    """The ``{input_0: array, ...}`` feeds :func:`compare` gives phantom, for reuse with :func:`phantom.compare`."""
    return {f"input_{i}": a.detach().cpu().numpy() for i, a in enumerate(_as_tuple(inputs))}
