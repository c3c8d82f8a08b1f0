"""The Python API on the demo models, through the real binary and ONNX Runtime.

Run: ``python -m pytest python/tests`` with the package installed (``pip install .``) or with ``PYTHONPATH=python``
and ``PHANTOM_BIN`` pointing at a built binary.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import phantom
from phantom.testing import assert_numerics

ROOT = Path(__file__).resolve().parents[2]
CONVNET = ROOT / "models" / "convnet.onnx"
FP16 = ROOT / "tests" / "data" / "fp16"


@pytest.fixture(scope="module")
def convnet_report():
    return phantom.compare(CONVNET, ep="cpu")


def test_a_clean_model_is_clean_with_every_value_measured(convnet_report):
    r = convnet_report
    assert r.status == "clean" and r.passed and r.first_divergence is None and r.culprits == []
    values = r.values
    assert len(values) >= 13
    compared = [v for v in values.values() if v.status == "pass"]
    assert len(compared) >= 12
    # fp32 on ONNX Runtime's CPU against f64: errors of fp32 rounding, not zero and well inside the tolerance.
    worst = max(v.tolerance_used for v in compared)
    assert 0 < worst < 0.1
    assert any(v.is_output for v in values.values())
    r.raise_for_drift()


def test_html_report_is_written(convnet_report, tmp_path):
    out = convnet_report.to_html(tmp_path / "r.html")
    text = out.read_text()
    assert text.lstrip().lower().startswith("<!doctype html") and "Conv" in text


def test_inputs_as_numpy_arrays_are_the_ones_compared(tmp_path):
    rng = np.random.default_rng(1)
    image = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    a = phantom.compare(CONVNET, inputs={"image": image}, html=False)
    b = phantom.compare(CONVNET.read_bytes(), inputs={"image": image}, html=False)
    c = phantom.compare(CONVNET, html=False)
    out = [v for v in a.values.values() if v.is_output][0].name
    stats = lambda r: r.values[out].raw["reference_stats"]  # noqa: E731
    assert stats(a) == stats(b), "bytes and a path give the same run"
    assert stats(a) != stats(c), "given inputs are used, not the random default"


def perturbed(src: Path, initializer: str, factor: float, dst: Path) -> Path:
    """A copy of ``src`` with one float32 initializer scaled (its ``raw_data``, found after its name field)."""
    b = bytearray(src.read_bytes())
    key = bytes([0x42, len(initializer)]) + initializer.encode()  # TensorProto.name (field 8)
    i = b.find(key)
    assert i >= 0 and b[i + len(key)] == 0x4A, "raw_data (field 9) follows the name"
    k, n, shift = i + len(key) + 1, 0, 0
    while True:
        n |= (b[k] & 0x7F) << shift
        shift += 7
        k += 1
        if b[k - 1] < 0x80:
            break
    b[k:k + n] = (np.frombuffer(bytes(b[k:k + n]), dtype=np.float32) * factor).astype(np.float32).tobytes()
    dst.write_bytes(bytes(b))
    return dst


def test_a_faulty_layer_is_drift_named_and_raises(tmp_path):
    faulty = perturbed(CONVNET, "fc.w", 1.05, tmp_path / "faulty.onnx")
    r = phantom.compare(CONVNET, target_model=faulty, html=False)
    assert r.status == "drift" and not r.passed and r.failing_values > 0
    fd = r.first_divergence
    assert fd["node"] == "fc" and r.values[fd["value"]].status == "fail"
    assert [c["node"] for c in r.culprits][:1] == ["fc"]
    with pytest.raises(phantom.DriftError, match="first divergence logits"):
        r.raise_for_drift()


def test_precision_verdicts_pass_only_while_the_outputs_pass():
    # fp16 intermediates fail, outputs pass: precision-limited passes a gate unless strict.
    r = phantom.compare(FP16 / "ln_variance_overflow.onnx", precision="fp16", html=False)
    assert r.status == "precision_limited" and r.passed
    r.raise_for_drift()
    strict = phantom.compare(FP16 / "ln_variance_overflow.onnx", precision="fp16", strict=True, html=False)
    assert strict.status == "precision_limited" and not strict.passed
    with pytest.raises(phantom.DriftError):
        strict.raise_for_drift()
    # The fp16 output is destroyed: precision-insufficient always fails, naming the culprit.
    bad = phantom.compare(FP16 / "bn_var_overflow.onnx", precision="fp16", html=False)
    assert bad.status == "precision_insufficient" and not bad.passed
    with pytest.raises(phantom.DriftError, match="culprits bn"):
        bad.raise_for_drift()


def test_bad_input_raises_phantom_error_naming_the_file(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(phantom.PhantomError) as e:
        phantom.compare(bad, html=False)
    assert e.value.returncode == 2 and "broken.onnx" in str(e.value)
    with pytest.raises(TypeError):
        phantom.compare(42)


def test_several_targets_give_one_report_each():
    r = phantom.compare(CONVNET, ep=["cpu", "wgpu"], html=False)
    assert isinstance(r, phantom.MultiReport) and len(r.targets) == 2
    assert all(t.status == "clean" for t in r.targets) and r.status == "clean"


def test_diff_pairs_dumps_and_names_the_fault(tmp_path):
    rng = np.random.default_rng(0)
    layers = {f"layer{i}": rng.standard_normal((4, 8)).astype(np.float32) for i in range(3)}
    np.savez(tmp_path / "a.npz", **layers)
    bad = dict(layers, layer1=layers["layer1"] * 1.05)
    np.savez(tmp_path / "b.npz", **bad)
    same = phantom.diff(tmp_path / "a.npz", tmp_path / "a.npz")
    assert same.status == "clean" and len(same.pairs) == 3
    d = phantom.diff(tmp_path / "a.npz", tmp_path / "b.npz")
    assert d.returncode == 1 and d.first_divergent == "layer1"
    with pytest.raises(AssertionError):
        d.raise_for_drift()


def test_assert_numerics_against_the_reference_and_a_golden_record(tmp_path):
    assert_numerics(CONVNET, ep="cpu")
    golden = tmp_path / "golden"
    with pytest.raises(FileNotFoundError):
        assert_numerics(CONVNET, golden=golden)
    assert assert_numerics(CONVNET, golden=golden, record=True)["status"] == "recorded"
    assert_numerics(CONVNET, golden=golden)
    with pytest.raises(AssertionError, match="regressed"):
        assert_numerics(CONVNET, golden=golden, precision="fp16")
    faulty = perturbed(CONVNET, "fc.w", 1.05, tmp_path / "faulty.onnx")
    with pytest.raises(phantom.DriftError, match="culprits fc"):
        assert_numerics(CONVNET, target_model=faulty)


def test_python_dash_m_runs_the_binary():
    p = subprocess.run([sys.executable, "-m", "phantom", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("phantom ")
    p = subprocess.run([sys.executable, "-m", "phantom", "onnx", "/nonexistent.onnx"], capture_output=True, text=True)
    assert p.returncode == 2 and "nonexistent.onnx" in p.stderr


def test_torch_module_dump_and_compare(tmp_path):
    torch = pytest.importorskip("torch")
    import phantom.torch as pt

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.LazyLinear(4))
    x = torch.randn(1, 3, 16, 16)
    dumped = pt.dump(net, x, tmp_path / "eager.pt")
    assert {"0", "1", "2", "3", "output"} <= set(dumped)
    assert torch.equal(dumped["3"], dumped["output"])
    r = pt.compare(net, x)
    assert r.status == "clean"
    assert r.eager.status == "clean" and [p["name"] for p in r.eager.pairs] == ["output_0"]


@pytest.mark.skipif(os.environ.get("PHANTOM_GPU") != "1", reason="needs an NVIDIA GPU (PHANTOM_GPU=1)")
def test_cuda_fp32_against_the_reference():
    r = phantom.compare(CONVNET, ep="cuda", html=False)
    assert "CUDA" in str(r.data["target"]) and r.status in ("clean", "precision_limited")
