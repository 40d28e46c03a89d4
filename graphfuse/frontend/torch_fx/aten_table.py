"""The one table of ATen ops graphfuse maps: op overload -> builder, dtypes, conditions.

Everything else about an op (whether the partitioner may take it, how it is imported)
is read from here: adding an op is one line. The ops are those core ATen
(torch._decomp.core_aten_decompositions) leaves of MLPs, transformer blocks and CNNs, plus
the few composite ones a graph may still hold (t, reshape, clamp). An op not listed, or a
call its entry does not accept, runs eagerly.
"""

from __future__ import annotations

import torch
from torch._ops import OpOverload

from graphfuse.dialects import graph
from graphfuse.frontend.torch_fx import aten_nn as nn
from graphfuse.frontend.torch_fx import aten_tensor as t
from graphfuse.frontend.torch_fx.aten_call import FLOAT, INDEX, LOGICAL, AtenOp

aten = torch.ops.aten

ATEN_OPS: dict[OpOverload, AtenOp] = {
    # elementwise
    aten.relu.default: AtenOp(t.unary(graph.ReluOp)),
    aten.tanh.default: AtenOp(t.unary(graph.TanhOp)),
    aten.sigmoid.default: AtenOp(t.unary(graph.SigmoidOp)),
    aten.exp.default: AtenOp(t.unary(graph.ExpOp)),
    aten.log.default: AtenOp(t.unary(graph.LogOp)),
    aten.sqrt.default: AtenOp(t.unary(graph.SqrtOp)),
    aten.rsqrt.default: AtenOp(t.unary(graph.RsqrtOp)),
    aten.erf.default: AtenOp(t.unary(graph.ErfOp)),
    aten.neg.default: AtenOp(t.unary(graph.NegOp)),
    aten.abs.default: AtenOp(t.unary(graph.AbsOp)),
    aten.sin.default: AtenOp(t.unary(graph.SinOp)),
    aten.cos.default: AtenOp(t.unary(graph.CosOp)),
    aten.gelu.default: AtenOp(t.gelu),
    aten.silu.default: AtenOp(t.unary(graph.SiluOp)),
    aten.add.Tensor: AtenOp(t.binary(graph.AddOp)),
    aten.add.Scalar: AtenOp(t.binary(graph.AddOp)),
    aten.sub.Tensor: AtenOp(t.binary(graph.SubOp)),
    aten.sub.Scalar: AtenOp(t.binary(graph.SubOp)),
    aten.mul.Tensor: AtenOp(t.binary(graph.MulOp)),
    aten.mul.Scalar: AtenOp(t.binary(graph.MulOp)),
    aten.div.Tensor: AtenOp(t.binary(graph.DivOp)),
    aten.div.Scalar: AtenOp(t.binary(graph.DivOp)),
    aten.maximum.default: AtenOp(t.binary(graph.MaxOp)),
    aten.minimum.default: AtenOp(t.binary(graph.MinOp)),
    aten.pow.Tensor_Scalar: AtenOp(t.pow_scalar),
    aten.clamp.default: AtenOp(t.clamp),
    aten.hardtanh.default: AtenOp(t.clamp),
    aten._softmax.default: AtenOp(t.softmax(graph.SoftmaxOp)),
    aten._log_softmax.default: AtenOp(t.softmax(graph.LogSoftmaxOp)),
    # masks
    aten.eq.Scalar: AtenOp(t.compare("eq"), LOGICAL),
    aten.eq.Tensor: AtenOp(t.compare("eq"), LOGICAL),
    aten.ne.Scalar: AtenOp(t.compare("ne"), LOGICAL),
    aten.lt.Scalar: AtenOp(t.compare("lt"), LOGICAL),
    aten.lt.Tensor: AtenOp(t.compare("lt"), LOGICAL),
    aten.gt.Scalar: AtenOp(t.compare("gt"), LOGICAL),
    aten.gt.Tensor: AtenOp(t.compare("gt"), LOGICAL),
    aten.logical_not.default: AtenOp(t.logical_not, LOGICAL),
    aten.any.dim: AtenOp(t.any_dim, LOGICAL),
    aten.where.self: AtenOp(t.where, LOGICAL),
    aten.full_like.default: AtenOp(t.full, LOGICAL),
    aten.full.default: AtenOp(t.full, LOGICAL),
    # copies and casts (values have no layout here)
    aten.clone.default: AtenOp(t.identity, INDEX),
    aten.alias.default: AtenOp(t.identity, INDEX),
    aten._to_copy.default: AtenOp(t.to_copy, INDEX),
    # shape
    aten.view.default: AtenOp(t.reshape, INDEX),
    aten._unsafe_view.default: AtenOp(t.reshape, INDEX),
    aten.reshape.default: AtenOp(t.reshape, INDEX),
    aten.unsqueeze.default: AtenOp(t.reshape, INDEX),
    aten.squeeze.dim: AtenOp(t.reshape, INDEX),
    aten.squeeze.dims: AtenOp(t.reshape, INDEX),
    aten.squeeze.default: AtenOp(t.reshape, INDEX),
    aten.permute.default: AtenOp(t.permute, INDEX),
    aten.t.default: AtenOp(t.transpose_2d, INDEX),
    aten.expand.default: AtenOp(t.expand, INDEX),
    aten.slice.Tensor: AtenOp(t.slice_tensor, INDEX),
    aten.select.int: AtenOp(t.select, INDEX),
    aten.split.Tensor: AtenOp(t.split, INDEX, results=1 << 16),
    aten.split_with_sizes.default: AtenOp(t.split, INDEX, results=1 << 16),
    aten.cat.default: AtenOp(t.cat, INDEX),
    aten.constant_pad_nd.default: AtenOp(t.constant_pad, accepts=t.pads_not_negative),
    # reductions
    aten.sum.dim_IntList: AtenOp(t.reduce(graph.ReduceSumOp)),
    aten.mean.dim: AtenOp(t.reduce(graph.ReduceMeanOp)),
    aten.amax.default: AtenOp(t.reduce(graph.ReduceMaxOp)),
    aten.amin.default: AtenOp(t.reduce(graph.ReduceMinOp)),
    aten.var.correction: AtenOp(t.var),
    # matmul, convolution, pooling, normalisation, embedding
    aten.mm.default: AtenOp(nn.matmul),
    aten.bmm.default: AtenOp(nn.matmul),
    aten.addmm.default: AtenOp(nn.addmm),
    aten.convolution.default: AtenOp(nn.convolution, accepts=nn.not_transposed),
    aten.max_pool2d_with_indices.default: AtenOp(nn.max_pool, accepts=nn.pool_without_ceil),
    aten.avg_pool2d.default: AtenOp(nn.avg_pool, accepts=nn.pool_without_ceil),
    aten._adaptive_avg_pool2d.default: AtenOp(nn.adaptive_avg_pool, accepts=nn.equal_windows),
    aten.native_layer_norm.default: AtenOp(nn.layer_norm),
    aten._native_batch_norm_legit_no_training.default: AtenOp(nn.batch_norm),
    aten.embedding.default: AtenOp(nn.embedding, INDEX),
}
"""Every ATen overload graphfuse computes (see AtenOp for the fields)."""

VIEWS: frozenset[OpOverload] = frozenset(
    {
        aten.view.default,
        aten._unsafe_view.default,
        aten.reshape.default,
        aten.unsqueeze.default,
        aten.squeeze.dim,
        aten.squeeze.dims,
        aten.squeeze.default,
        aten.permute.default,
        aten.t.default,
        aten.expand.default,
        aten.slice.Tensor,
        aten.select.int,
        aten.split.Tensor,
        aten.split_with_sizes.default,
        aten.alias.default,
    }
)
"""Ops whose results alias their input in torch: a partition made only of them is left to
eager (a view costs nothing there), and one on a graph input stays eager so that torch
sees the aliasing it expects."""

__all__ = ["ATEN_OPS", "FLOAT", "VIEWS"]
