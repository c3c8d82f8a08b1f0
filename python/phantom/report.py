"""Reports as Python objects: thin views over the JSON the phantom binary writes (``schema/*.schema.json``)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Value:
    """One compared value (an ONNX tensor name) and its metrics against the f64 reference."""

    name: str
    node: str
    op_type: str
    #: ``pass``, ``fail`` or ``unchecked``
    status: str
    max_abs: Optional[float]
    max_rel: Optional[float]
    snr_db: Optional[float]
    #: The share of its tolerance the worst element uses (above 1 fails).
    tolerance_used: Optional[float]
    is_output: bool
    #: Why it was not compared (``unchecked`` only).
    reason: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


class DriftError(AssertionError):
    """Raised by :meth:`Report.raise_for_drift`: the verdict failed (phantom's exit code 1)."""

    def __init__(self, report: "Report"):
        fd = report.first_divergence
        where = f"; first divergence {fd['value']} ({fd['op_type']} {fd['node']})" if fd else ""
        culprits = ", ".join(c["node"] for c in report.culprits[:3])
        super().__init__(
            f"{report.status}: {report.failing_values} values out of tolerance{where}"
            + (f"; culprits {culprits}" if culprits else "")
        )
        self.report = report


class Report:
    """The result of :func:`phantom.compare` (one target). ``data`` is the whole JSON report."""

    def __init__(self, data: Dict[str, Any], returncode: int, terminal: str = "", workdir: Optional[Any] = None):
        self.data = data
        self.returncode = returncode
        #: phantom's terminal summary, as it printed it.
        self.terminal = terminal
        self._workdir = workdir  # keeps the HTML report alive as long as the Report

    @property
    def status(self) -> str:
        """``clean``, ``drift``, ``anomalous``, ``precision_limited``, ``precision_insufficient`` or ``incomplete``."""
        return self.data["verdict"]["status"]

    @property
    def passed(self) -> bool:
        """True when phantom exited 0 (clean, or precision-limited without ``strict``)."""
        return self.returncode == 0

    @property
    def failing_values(self) -> int:
        return int(self.data["verdict"].get("failing_values", 0))

    @property
    def first_divergence(self) -> Optional[Dict[str, Any]]:
        """The first value out of tolerance in topological order: ``{node, node_index, op_type, value}``."""
        return self.data["verdict"].get("first_divergence")

    @property
    def culprits(self) -> List[Dict[str, Any]]:
        """Nodes to blame, each with its ``causes``."""
        return list(self.data["verdict"].get("culprits", []))

    @property
    def values(self) -> Dict[str, Value]:
        """Every value by ONNX tensor name, in the model's order."""
        out: Dict[str, Value] = {}
        for node in self.data.get("nodes", []):
            for v in node.get("values", []):
                m = v.get("metrics") or {}
                out[v["name"]] = Value(
                    name=v["name"], node=node["name"], op_type=node["op_type"], status=v["status"],
                    max_abs=m.get("max_abs"), max_rel=m.get("max_rel"), snr_db=m.get("snr_db"),
                    tolerance_used=m.get("tolerance_used"),
                    is_output=bool(v.get("is_output")), reason=v.get("reason"), raw=v,
                )
        return out

    def to_html(self, path: "str | Path") -> Path:
        """Writes the self-contained HTML report phantom rendered for this run to ``path``."""
        src = Path(self._workdir.name) / "report.html" if self._workdir is not None else None
        if src is None or not src.exists():
            raise FileNotFoundError("this report was made with html=False: run phantom.compare(..., html=True)")
        dest = Path(path)
        shutil.copyfile(src, dest)
        return dest

    def raise_for_drift(self) -> "Report":
        """Raises :class:`DriftError` when the verdict failed (phantom's exit code 1); returns self otherwise."""
        if self.returncode == 1:
            raise DriftError(self)
        return self

    def __repr__(self) -> str:
        return f"<phantom.Report {self.status}: {self.failing_values} failing of {len(self.values)} values>"


class MultiReport:
    """:func:`phantom.compare` with several ``ep``: one :class:`Report` per target and their agreement."""

    def __init__(self, data: Dict[str, Any], returncode: int, terminal: str = "", workdir: Optional[Any] = None):
        self.data = data
        self.returncode = returncode
        self.terminal = terminal
        self.targets = [Report(t, returncode, "", workdir) for t in data.get("targets", [])]
        self._workdir = workdir

    @property
    def status(self) -> str:
        """The most severe of the targets' verdicts."""
        return self.data["status"]

    @property
    def agreement(self) -> Dict[str, Any]:
        """Where the targets agree with each other, and which is closer to the reference."""
        return self.data.get("agreement", {})

    def raise_for_drift(self) -> "MultiReport":
        if self.returncode == 1:
            bad = [t for t in self.targets if t.status in ("drift", "anomalous")] or self.targets
            raise DriftError(bad[0])
        return self

    def __repr__(self) -> str:
        return f"<phantom.MultiReport {self.status}: {len(self.targets)} targets>"


class DiffReport:
    """The result of :func:`phantom.diff`: two dumps paired by name."""

    def __init__(self, data: Dict[str, Any], returncode: int, terminal: str = ""):
        self.data = data
        self.returncode = returncode
        self.terminal = terminal

    @property
    def status(self) -> str:
        return self.data["verdict"]["status"]

    @property
    def first_divergent(self) -> Optional[str]:
        return self.data["verdict"].get("first_divergent")

    @property
    def pairs(self) -> List[Dict[str, Any]]:
        return list(self.data.get("pairs", []))

    def raise_for_drift(self) -> "DiffReport":
        if self.returncode == 1:
            raise AssertionError(f"{self.status}: first divergent {self.first_divergent}")
        return self

    def __repr__(self) -> str:
        return f"<phantom.DiffReport {self.status}: {len(self.pairs)} pairs>"


def workdir() -> "tempfile.TemporaryDirectory[str]":
    """A private temporary folder, removed when the report holding it is."""
    return tempfile.TemporaryDirectory(prefix="phantom-")
