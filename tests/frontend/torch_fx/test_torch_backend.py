"""torch.compile(backend="graphfuse") against eager PyTorch: the sample models, partial and
whole fallback to eager, recompiles on new shapes, and what the backend refuses."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
import torch
from torch import nn

from graphfuse.compiler import CompileOptions
from graphfuse.parsing import GraphfuseError
from graphfuse.testing.torch_models import SAMPLES
from graphfuse.torch_backend import EagerFallbackWarning, GraphfuseBackend, options_from

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    """Each test compiles from scratch (Dynamo would otherwise reuse or mark dims dynamic)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _backend() -> GraphfuseBackend:
    return GraphfuseBackend(CompileOptions(threads=2))


def _run(model: nn.Module, *inputs: torch.Tensor, **compile_args: object) -> GraphfuseBackend:
    """Compile `model` with a fresh backend, check it against eager on `inputs` (without
    fallback warnings), and return the backend's record."""
    backend = _backend()
    compiled = torch.compile(model, backend=backend, **compile_args)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", EagerFallbackWarning)
        for x in inputs:
            torch.testing.assert_close(compiled(x), model(x), **TOLERANCE)
    return backend


def test_backend_by_its_registered_name_matches_eager() -> None:
    """The `torch_dynamo_backends` entry point: torch finds "graphfuse" and passes it the
    options (the other tests pass a backend object, to read what it compiled)."""
    sample = SAMPLES["mlp"](False)
    compiled = torch.compile(sample.model, backend="graphfuse", options={"threads": 2})
    with torch.no_grad():
        torch.testing.assert_close(compiled(sample.input), sample.model(sample.input), **TOLERANCE)


@pytest.mark.parametrize("name", list(SAMPLES))
def test_sample_model_matches_eager_in_one_kernel_graph(name: str) -> None:
    sample = SAMPLES[name](False)
    backend = _run(sample.model, sample.input)
    assert len(backend.kernels) == 1 and backend.eager == []


def test_stock_transformer_encoder_layer_matches_eager() -> None:
    """nn.TransformerEncoderLayer's own path (fast path off: its fused op has no ATen
    decomposition); its masks (eq, logical_not, any, where) map too. Only the permute of
    the input, a view of a graph input, stays eager."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        backend = _run(layer, torch.randn(2, 8, 32))
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    assert len(backend.kernels) == 1 and backend.eager == ["aten.permute.default"]


class _CumulativeMiddle(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.cumsum(torch.tanh(x) * 2, dim=1)) + 1


def test_unsupported_op_runs_eagerly_between_two_kernels() -> None:
    backend = _run(_CumulativeMiddle(), torch.randn(4, 6))
    assert backend.eager == ["aten.cumsum.default"]
    assert sorted(k.split(":")[1].strip() for k in backend.kernels) == [
        "relu.default, add.Tensor",
        "tanh.default, mul.Tensor",
    ]


class _OnlyCumsum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=0)


def test_graph_of_only_unsupported_ops_runs_eagerly() -> None:
    backend = _run(_OnlyCumsum(), torch.randn(5, 3))
    assert backend.kernels == [] and backend.eager == ["aten.cumsum.default"]


def test_new_input_shape_compiles_again_static() -> None:
    sample = SAMPLES["mlp"](False)
    backend = _run(sample.model, sample.input, torch.randn(6, 32), dynamic=False)
    assert len(backend.kernels) == 2


def test_dims_dynamo_made_dynamic_compile_per_shape() -> None:
    """Dynamo marks the batch dim dynamic on the second shape; graphfuse compiles each
    concrete shape it then meets, and reuses them."""
    sample = SAMPLES["mlp"](False)
    inputs = [torch.randn(n, 32) for n in (4, 6, 9, 6)]
    backend = _run(sample.model, *inputs)
    assert len(backend.kernels) == 3


class _Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table, self.out = nn.Embedding(50, 16), nn.Linear(16, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.out(self.table(ids)))


def test_int64_indices_into_an_embedding() -> None:
    torch.manual_seed(0)
    backend = _run(_Embed().eval(), torch.randint(0, 50, (3, 5)))
    assert len(backend.kernels) == 1 and backend.eager == []


def test_float64_runs_eagerly() -> None:
    sample = SAMPLES["mlp"](False)
    backend = _run(sample.model.double(), sample.input.double())
    assert backend.kernels == []


class _ReturnsViews(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.relu(x) * 2
        return x.t(), y, y.permute(1, 0)


def test_views_the_graph_returns_keep_their_layout() -> None:
    x = torch.randn(3, 4)
    backend = _backend()
    with torch.no_grad():
        got = torch.compile(_ReturnsViews(), backend=backend)(x)
    expected = _ReturnsViews()(x)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
    assert got[0].data_ptr() == x.data_ptr()
    assert len(backend.kernels) == 1


def test_gradients_needed_run_eagerly_with_a_warning() -> None:
    sample = SAMPLES["mlp"](False)
    compiled = torch.compile(sample.model, backend=_backend())
    with pytest.warns(EagerFallbackWarning, match="inference only"):
        out = compiled(sample.input)
    out.sum().backward()
    assert sample.model[0].weight.grad is not None


def test_compile_options_come_from_torch_compile() -> None:
    assert options_from({"threads": 3, "fuse": False}) == CompileOptions(threads=3, fuse=False)


def test_unknown_option_is_refused_in_one_line() -> None:
    with pytest.raises(GraphfuseError, match="unknown graphfuse option 'thread' \\(options: "):
        options_from({"thread": 2})


class _Mutates(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return torch.relu(x) * 3


def test_input_mutated_in_the_model_is_updated() -> None:
    x = torch.randn(3, 4)
    mutated = x.clone()
    with torch.no_grad():
        got = torch.compile(_Mutates(), backend=_backend())(mutated)
        expected = _Mutates()(x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(mutated, x)


class _Convs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.line, self.volume = nn.Conv1d(4, 6, 3, padding=1), nn.Conv3d(2, 3, 3, groups=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        volume = self.volume(x.view(2, 2, 5, 4, 1).expand(2, 2, 5, 4, 3))
        return torch.relu(self.line(x.view(2, 4, 10))).sum() + volume.sum()


def test_1d_and_3d_convolutions_match_eager() -> None:
    torch.manual_seed(0)
    backend = _run(_Convs().eval(), torch.randn(2, 40))
    assert len(backend.kernels) == 1
