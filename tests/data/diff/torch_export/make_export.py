"""A PyTorch eager forward-hook dump and its `torch.onnx.export` (run with onnx and numpy; torch not needed).

model.onnx is what `torch.onnx.export` writes for a small ResNet (conv1 → bn1 → relu → one BasicBlock → avgpool →
fc) in eval mode: value names `/{module scopes}/{Op}_output_0`, each BatchNorm folded into the Conv before it, the
block's second ReLU call scoped `relu_1`. eager.npz is the forward hooks' dump of the same module on input.npy
(`{module name: output}`: conv1 before its BatchNorm, bn1, relu, layer1.0.conv1, …, layer1.0, layer1, avgpool,
fc; a module called twice keeps its last call), computed in float64 and stored as float32. eager_perturbed.npz is
the same with layer1.0.conv2's weight scaled by 1.01.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(3)
C, H = 4, 6


def conv(x, w, b):
    """3x3 convolution, stride 1, padding 1 (NCHW)."""
    n, c, h, wd = x.shape
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", p[:, :, i : i + h, j : j + wd], w[:, :, i, j])
    return out + b[None, :, None, None]


def bn(x, g, beta, mean, var, eps=1e-5):
    s = g / np.sqrt(var + eps)
    return x * s[None, :, None, None] + (beta - mean * s)[None, :, None, None]


def fold(w, b, g, beta, mean, var, eps=1e-5):
    s = g / np.sqrt(var + eps)
    return w * s[:, None, None, None], (b - mean) * s + beta


def params(cin):
    return dict(
        w=rng.normal(0, (cin * 9) ** -0.5, (C, cin, 3, 3)),
        b=np.zeros(C),
        g=rng.uniform(0.5, 1.5, C),
        beta=rng.normal(0, 0.1, C),
        mean=rng.normal(0, 0.1, C),
        var=rng.uniform(0.5, 1.5, C),
    )


P = {"conv1": params(3), "layer1.0.conv1": params(C), "layer1.0.conv2": params(C)}
FC_W, FC_B = rng.normal(0, 0.5, (3, C)), rng.normal(0, 0.1, 3)
X = rng.normal(0, 1, (1, 3, H, H))


def eager(conv2_scale=1.0):
    out, relu = {}, lambda v: np.maximum(v, 0)
    p = P["conv1"]
    out["conv1"] = conv(X, p["w"], p["b"])
    out["bn1"] = bn(out["conv1"], p["g"], p["beta"], p["mean"], p["var"])
    out["relu"] = relu(out["bn1"])
    p1, p2 = P["layer1.0.conv1"], P["layer1.0.conv2"]
    out["layer1.0.conv1"] = conv(out["relu"], p1["w"], p1["b"])
    out["layer1.0.bn1"] = bn(out["layer1.0.conv1"], p1["g"], p1["beta"], p1["mean"], p1["var"])
    first_relu = relu(out["layer1.0.bn1"])
    out["layer1.0.conv2"] = conv(first_relu, p2["w"] * conv2_scale, p2["b"])
    out["layer1.0.bn2"] = bn(out["layer1.0.conv2"], p2["g"], p2["beta"], p2["mean"], p2["var"])
    out["layer1.0.relu"] = relu(out["layer1.0.bn2"] + out["relu"])  # its last call
    out["layer1.0"] = out["layer1.0.relu"]
    out["layer1"] = out["layer1.0"]
    out["avgpool"] = out["layer1"].mean(axis=(2, 3), keepdims=True)
    out["fc"] = out["avgpool"].reshape(1, C) @ FC_W.T + FC_B
    return {k: v.astype(np.float32) for k, v in out.items()}


def exported():
    n, inits = helper.make_node, []

    def t(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v, np.float32), name))
        return name

    def folded_conv(scope, x, key):
        p = P[key]
        w, b = fold(p["w"], p["b"], p["g"], p["beta"], p["mean"], p["var"])
        prefix = scope.replace(".", "_")
        y = f"{scope}/Conv_output_0"
        return n("Conv", [x, t(f"onnx::Conv_{prefix}_w", w), t(f"onnx::Conv_{prefix}_b", b)], [y], name=f"{scope}/Conv", pads=[1, 1, 1, 1]), y

    nodes = []
    c1, y = folded_conv("/conv1", "input", "conv1")
    nodes.append(c1)
    nodes.append(n("Relu", [y], ["/relu/Relu_output_0"], name="/relu/Relu"))
    c2, y = folded_conv("/layer1/layer1.0/conv1", "/relu/Relu_output_0", "layer1.0.conv1")
    nodes.append(c2)
    nodes.append(n("Relu", [y], ["/layer1/layer1.0/relu/Relu_output_0"], name="/layer1/layer1.0/relu/Relu"))
    c3, y = folded_conv("/layer1/layer1.0/conv2", "/layer1/layer1.0/relu/Relu_output_0", "layer1.0.conv2")
    nodes.append(c3)
    nodes.append(n("Add", [y, "/relu/Relu_output_0"], ["/layer1/layer1.0/Add_output_0"], name="/layer1/layer1.0/Add"))
    nodes.append(n("Relu", ["/layer1/layer1.0/Add_output_0"], ["/layer1/layer1.0/relu_1/Relu_output_0"], name="/layer1/layer1.0/relu_1/Relu"))
    nodes.append(n("GlobalAveragePool", ["/layer1/layer1.0/relu_1/Relu_output_0"], ["/avgpool/GlobalAveragePool_output_0"], name="/avgpool/GlobalAveragePool"))
    nodes.append(n("Flatten", ["/avgpool/GlobalAveragePool_output_0"], ["/Flatten_output_0"], name="/Flatten", axis=1))
    nodes.append(n("Gemm", ["/Flatten_output_0", t("fc.weight", FC_W), t("fc.bias", FC_B)], ["output"], name="/fc/Gemm", transB=1))
    g = helper.make_graph(
        nodes,
        "main_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, H, H])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    onnx.save(exported(), "model.onnx")
    np.save("input.npy", X.astype(np.float32))
    np.savez("eager.npz", **eager())
    np.savez("eager_perturbed.npz", **eager(1.01))
