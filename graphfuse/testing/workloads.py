"""The benchmark workloads, as graph-dialect MLIR text.

Each function returns the text of `func.func @main`; weights are arguments, so the timing
includes reading them as a deployed model would. `WORKLOADS` names them for bench/ and tests.
"""

from __future__ import annotations

import math


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(str(d) for d in shape)}xf32>"


def elementwise_chain(n: int = 4096, m: int = 1024) -> str:
    """relu(x*a + b) * sigmoid(x) + tanh(x) with per-column a and b: 4M floats."""
    x, v = _t(n, m), _t(m)
    return f"""func.func @main(%x: {x}, %a: {v}, %b: {v}) -> {x} {{
  %xa = graph.mul %x, %a : ({x}, {v}) -> {x}
  %xb = graph.add %xa, %b : ({x}, {v}) -> {x}
  %r = graph.relu %xb : {x}
  %s = graph.sigmoid %x : {x}
  %rs = graph.mul %r, %s : ({x}, {x}) -> {x}
  %t = graph.tanh %x : {x}
  %y = graph.add %rs, %t : ({x}, {x}) -> {x}
  func.return %y : {x}
}}
"""


def softmax(n: int = 4096, m: int = 1024) -> str:
    x = _t(n, m)
    return f"""func.func @main(%x: {x}) -> {x} {{
  %y = graph.softmax %x axis = -1 : {x}
  func.return %y : {x}
}}
"""


def layernorm(n: int = 4096, m: int = 1024) -> str:
    x, v = _t(n, m), _t(m)
    return f"""func.func @main(%x: {x}, %g: {v}, %b: {v}) -> {x} {{
  %y = graph.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05 : ({x}, {v}, {v}) -> {x}
  func.return %y : {x}
}}
"""


def mlp(tokens: int = 512, width: int = 768, hidden: int = 3072) -> str:
    """gelu(x @ W1 + b1) @ W2 + b2 (tanh GELU, as GPT-2)."""
    x, w1, b1, h = _t(tokens, width), _t(width, hidden), _t(hidden), _t(tokens, hidden)
    w2, b2 = _t(hidden, width), _t(width)
    return f"""func.func @main(%x: {x}, %w1: {w1}, %b1: {b1}, %w2: {w2}, %b2: {b2}) -> {x} {{
  %h0 = graph.matmul %x, %w1 : ({x}, {w1}) -> {h}
  %h1 = graph.add %h0, %b1 : ({h}, {b1}) -> {h}
  %h2 = graph.gelu %h1 approximate = tanh : {h}
  %y0 = graph.matmul %h2, %w2 : ({h}, {w2}) -> {x}
  %y = graph.add %y0, %b2 : ({x}, {b2}) -> {x}
  func.return %y : {x}
}}
"""


def _conv_bn(
    name: str, source: str, batch: int, channels: int, size: int, groups: int = 1
) -> tuple[str, str]:
    x, c = _t(batch, channels, size, size), _t(channels)
    w = _t(channels, channels // groups, 3, 3)
    grouped = f" groups = {groups}" if groups > 1 else ""
    conv = f"graph.conv2d %{source}, %{name}_w padding = [1, 1, 1, 1]{grouped} : ({x}, {w}) -> {x}"
    stats = f"%{name}_c, %{name}_g, %{name}_b, %{name}_m, %{name}_v epsilon = 1.0e-05"
    bn = f"graph.batch_norm {stats} : ({x}, {c}, {c}, {c}, {c}) -> {x}"
    text = f"  %{name}_c = {conv}\n  %{name} = {bn}\n"
    args = f"%{name}_w: {w}, %{name}_g: {c}, %{name}_b: {c}, %{name}_m: {c}, %{name}_v: {c}"
    return text, args


def conv_bn_relu(batch: int = 8, channels: int = 64, size: int = 56, groups: int = 1) -> str:
    x = _t(batch, channels, size, size)
    body, args = _conv_bn("bn1", "x", batch, channels, size, groups)
    return f"""func.func @main(%x: {x}, {args}) -> {x} {{
{body}  %y = graph.relu %bn1 : {x}
  func.return %y : {x}
}}
"""


def grouped_conv_bn_relu(batch: int = 4, channels: int = 128, size: int = 28) -> str:
    """A RegNet-style grouped 3x3 convolution: 4 groups of 32 channels."""
    return conv_bn_relu(batch, channels, size, groups=4)


def depthwise_conv_bn_relu(batch: int = 8, channels: int = 144, size: int = 56) -> str:
    """A MobileNetV2-style depthwise 3x3 convolution (one channel per group)."""
    return conv_bn_relu(batch, channels, size, groups=channels)


def resnet_block(batch: int = 8, channels: int = 64, size: int = 56) -> str:
    """conv-bn-relu, conv-bn, + identity, relu."""
    x = _t(batch, channels, size, size)
    body1, args1 = _conv_bn("bn1", "x", batch, channels, size)
    body2, args2 = _conv_bn("bn2", "r1", batch, channels, size)
    return f"""func.func @main(%x: {x}, {args1}, {args2}) -> {x} {{
{body1}  %r1 = graph.relu %bn1 : {x}
{body2}  %s = graph.add %bn2, %x : ({x}, {x}) -> {x}
  %y = graph.relu %s : {x}
  func.return %y : {x}
}}
"""


def attention(batch: int = 8, heads: int = 12, seq: int = 128, dim: int = 64) -> str:
    """softmax(Q Kᵀ / sqrt(d) + mask) V."""
    q, kt, s = _t(batch, heads, seq, dim), _t(batch, heads, dim, seq), _t(batch, heads, seq, seq)
    mask = _t(batch, 1, 1, seq)
    scale = 1 / math.sqrt(dim)
    return f"""func.func @main(%q: {q}, %k: {q}, %v: {q}, %mask: {mask}) -> {q} {{
  %kt = graph.transpose %k perm = [0, 1, 3, 2] : {q} -> {kt}
  %s0 = graph.matmul %q, %kt : ({q}, {kt}) -> {s}
  %c = graph.constant dense<{scale:.9e}> : tensor<f32>
  %s1 = graph.mul %s0, %c : ({s}, tensor<f32>) -> {s}
  %s2 = graph.add %s1, %mask : ({s}, {mask}) -> {s}
  %p = graph.softmax %s2 axis = -1 : {s}
  %o = graph.matmul %p, %v : ({s}, {q}) -> {q}
  func.return %o : {q}
}}
"""


def bert_layer(batch: int = 4, seq: int = 128, width: int = 768, heads: int = 12) -> str:
    """One post-norm BERT encoder layer (erf GELU)."""
    d, ff = width // heads, 4 * width
    x, w, v = _t(batch, seq, width), _t(width, width), _t(width)
    x4, xh, kh = _t(batch, seq, heads, d), _t(batch, heads, seq, d), _t(batch, heads, d, seq)
    s, mask = _t(batch, heads, seq, seq), _t(batch, 1, 1, seq)
    w1, b1, h, w2 = _t(width, ff), _t(ff), _t(batch, seq, ff), _t(ff, width)
    lines = [f"func.func @main(%x: {x}, %mask: {mask}, "]
    params = []
    for p in ("q", "k", "v", "o"):
        params += [f"%w{p}: {w}", f"%b{p}: {v}"]
    params += [f"%g1: {v}", f"%n1: {v}", f"%w1: {w1}", f"%b1: {b1}", f"%w2: {w2}", f"%b2: {v}"]
    params += [f"%g2: {v}", f"%n2: {v}"]
    lines[0] += ", ".join(params) + f") -> {x} {{"
    for p in ("q", "k", "v"):
        lines.append(f"  %{p}0 = graph.matmul %x, %w{p} : ({x}, {w}) -> {x}")
        lines.append(f"  %{p}1 = graph.add %{p}0, %b{p} : ({x}, {v}) -> {x}")
        lines.append(f"  %{p}2 = graph.reshape %{p}1 : {x} -> {x4}")
    lines.append(f"  %qh = graph.transpose %q2 perm = [0, 2, 1, 3] : {x4} -> {xh}")
    lines.append(f"  %kh = graph.transpose %k2 perm = [0, 2, 3, 1] : {x4} -> {kh}")
    lines.append(f"  %vh = graph.transpose %v2 perm = [0, 2, 1, 3] : {x4} -> {xh}")
    lines.append(f"  %s0 = graph.matmul %qh, %kh : ({xh}, {kh}) -> {s}")
    lines.append(f"  %sc = graph.constant dense<{1 / math.sqrt(d):.9e}> : tensor<f32>")
    lines.append(f"  %s1 = graph.mul %s0, %sc : ({s}, tensor<f32>) -> {s}")
    lines.append(f"  %s2 = graph.add %s1, %mask : ({s}, {mask}) -> {s}")
    lines.append(f"  %p = graph.softmax %s2 axis = -1 : {s}")
    lines.append(f"  %c0 = graph.matmul %p, %vh : ({s}, {xh}) -> {xh}")
    lines.append(f"  %c1 = graph.transpose %c0 perm = [0, 2, 1, 3] : {xh} -> {x4}")
    lines.append(f"  %c2 = graph.reshape %c1 : {x4} -> {x}")
    lines.append(f"  %o0 = graph.matmul %c2, %wo : ({x}, {w}) -> {x}")
    lines.append(f"  %o1 = graph.add %o0, %bo : ({x}, {v}) -> {x}")
    lines.append(f"  %r1 = graph.add %o1, %x : ({x}, {x}) -> {x}")
    ln = "axis = 2 epsilon = 1.0e-12"
    lines.append(f"  %l1 = graph.layer_norm %r1, %g1, %n1 {ln} : ({x}, {v}, {v}) -> {x}")
    lines.append(f"  %f0 = graph.matmul %l1, %w1 : ({x}, {w1}) -> {h}")
    lines.append(f"  %f1 = graph.add %f0, %b1 : ({h}, {b1}) -> {h}")
    lines.append(f"  %f2 = graph.gelu %f1 : {h}")
    lines.append(f"  %f3 = graph.matmul %f2, %w2 : ({h}, {w2}) -> {x}")
    lines.append(f"  %f4 = graph.add %f3, %b2 : ({x}, {v}) -> {x}")
    lines.append(f"  %r2 = graph.add %f4, %l1 : ({x}, {x}) -> {x}")
    lines.append(f"  %y = graph.layer_norm %r2, %g2, %n2 {ln} : ({x}, {v}, {v}) -> {x}")
    lines.append(f"  func.return %y : {x}")
    lines.append("}")
    return "\n".join(lines) + "\n"


WORKLOADS = {
    "elementwise chain [4096x1024]": (elementwise_chain, True),
    "softmax [4096x1024]": (softmax, True),
    "layernorm [4096x1024]": (layernorm, True),
    "MLP 512x768x3072": (mlp, False),
    "conv3x3 64->64 [8,64,56,56]+bn+relu": (conv_bn_relu, False),
    "grouped conv3x3 g=4 [4,128,28,28]+bn+relu": (grouped_conv_bn_relu, False),
    "depthwise conv3x3 [8,144,56,56]+bn+relu": (depthwise_conv_bn_relu, False),
    "ResNet basic block [8,64,56,56]": (resnet_block, False),
    "attention [8,12,128,64]": (attention, False),
    "BERT-base layer (4x128)": (bert_layer, False),
}
"""name -> (text maker, memory-bound?)."""
