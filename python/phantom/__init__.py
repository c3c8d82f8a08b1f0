"""phantom from Python: where and why an ONNX model's numbers diverge between runtimes.

A thin layer over the ``phantom`` binary this package installs (its JSON reports and ``.npy`` files; no second
engine)::

    import phantom
    report = phantom.compare("model.onnx", ep="cpu", precision="fp16")
    print(report.status, report.first_divergence, report.culprits)
    report.to_html("report.html")
    report.raise_for_drift()

``phantom.torch`` dumps and compares PyTorch modules (torch is imported only when called);
``phantom.testing.assert_numerics`` guards a model's numerics in pytest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from phantom._binary import PhantomError, binary, run
from phantom.report import DiffReport, DriftError, MultiReport, Report, Value, workdir

__all__ = ["compare", "diff", "Report", "MultiReport", "DiffReport", "Value", "DriftError", "PhantomError", "binary"]

ModelLike = Union[str, "os.PathLike[str]", bytes, Any]


def _model_path(model: ModelLike, folder: Path) -> Path:
    """A path to the model: given, or written from bytes or an ``onnx.ModelProto``."""
    if isinstance(model, (str, os.PathLike)):
        return Path(model)
    if isinstance(model, (bytes, bytearray)):
        data = bytes(model)
    elif hasattr(model, "SerializeToString"):
        data = model.SerializeToString()
    else:
        raise TypeError(f"model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}")
    path = folder / "model.onnx"
    path.write_bytes(data)
    return path


def _input_flags(inputs: Any, folder: Path) -> list:
    """``--input`` flags: numpy arrays by input name go through one ``.npz``; strings and paths pass as they are."""
    if inputs is None:
        return []
    if isinstance(inputs, Mapping):
        import numpy as np

        arrays = {k: np.asarray(v) for k, v in inputs.items()}
        path = folder / "inputs.npz"
        np.savez(path, **arrays)
        return ["--input", str(path)]
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    return [flag for item in inputs for flag in ("--input", str(item))]


def _option_flags(options: Mapping[str, Any]) -> list:
    """Keyword options as flags: ``max_memory="2GiB"`` → ``--max-memory 2GiB``, ``strict=True`` → ``--strict``,
    lists repeat the flag, ``dim={"batch": 1}`` → ``--dim batch=1``."""
    flags: list = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                flags += [flag, f"{k}={v}"]
        elif isinstance(value, (list, tuple)):
            for v in value:
                flags += [flag, str(v)]
        else:
            flags += [flag, str(value)]
    return flags


def compare(
    model: ModelLike,
    inputs: Any = None,
    ep: Union[str, Sequence[str]] = "cpu",
    precision: str = "fp32",
    *,
    html: bool = True,
    **options: Any,
) -> Union[Report, MultiReport]:
    """Compares every intermediate value of ``model`` between phantom's f64 reference and the target(s).

    ``model``: a path, the model's bytes or an ``onnx.ModelProto``. ``inputs``: ``{name: numpy array}``, or paths
    phantom's ``--input`` takes (``.npz``, ``NAME=file.npy``, an image, a ``test_data_set`` folder); default:
    seeded random inputs. ``ep``: an execution provider (``cpu``, ``cuda``...), ``wgpu``, or several (a
    :class:`MultiReport`). ``precision``: ``fp32``, ``fp16`` or ``bf16``. Other keywords are ``phantom onnx``'s
    flags (``atol=1e-3``, ``max_memory="2GiB"``, ``dim={"batch": 1}``, ``ep_option=["device_id=1"]``).

    Returns the report whatever the verdict (see :meth:`Report.raise_for_drift`); raises :class:`PhantomError` when
    phantom cannot run the comparison (exit 2).
    """
    folder = workdir()
    tmp = Path(folder.name)
    eps = [ep] if isinstance(ep, str) else list(ep)
    args = ["onnx", str(_model_path(model, tmp)), "--json", str(tmp / "report.json")]
    if precision != "fp32":  # fp32 is the default, and --target-model refuses any --precision
        args += ["--precision", precision]
    args += [flag for e in eps for flag in ("--ep", e)]
    if html:
        args += ["--html", str(tmp / "report.html")]
    args += _input_flags(inputs, tmp) + _option_flags(options)
    proc = run(args)
    data = json.loads((tmp / "report.json").read_text())
    kind = MultiReport if "targets" in data else Report
    return kind(data, proc.returncode, proc.stdout, folder)


def diff(a: "str | os.PathLike[str]", b: "str | os.PathLike[str]", **options: Any) -> DiffReport:
    """Pairs two tensor dumps by name (directories, archives, ``.pt``, ``.npz``, ``.safetensors``, ONNX
    ``TensorProto`` files) and compares each pair, as ``phantom diff A B`` does. Keywords are its flags
    (``rename=["^model\\\\.=", ...]``, ``order="{layer}_{stage}"``, ``atol=1e-3``)."""
    folder = workdir()
    out = Path(folder.name) / "diff.json"
    proc = run(["diff", str(a), str(b), "--json", str(out), *_option_flags(options)])
    return DiffReport(json.loads(out.read_text()), proc.returncode, proc.stdout)
