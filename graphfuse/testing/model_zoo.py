"""Real networks nobody on this project wrote: Hugging Face models built from a config with
random weights (no download), exported by torch.onnx, run by onnxruntime for reference.

`tiny=True` gives CI-sized configs (two layers, hidden 32, 32x32 images); `tiny=False` the
published sizes (BERT-base, GPT-2 small, ViT-B/16, ResNet-50, MobileNetV2 1.0/224) for the
benchmark. The dynamo exporter is used: it gives static shapes and folds shape arithmetic
(the TorchScript exporter rejects transformers 5's keyword-only forward signatures).

`HELD_OUT` holds shapes the compiler was not developed against: a Whisper audio
encoder (Conv1D stem), Swin (shifted-window attention) and a Llama decoder (grouped-query
attention, rotary embeddings, RMSNorm, SwiGLU, causal mask); full sizes are whisper-tiny's
encoder, Swin-T and SmolLM-135M's decoder. Issue 25 adds MobileViT (apple/mobilevit-small,
256x256), ConvNeXt (convnext-tiny-224), DistilBERT (distilbert-base-uncased) and t5-small's
encoder (sequences of 128, batch 1 at full size). `export` takes a name from either table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 18


@dataclass(frozen=True)
class Exported:
    name: str
    path: Path
    inputs: dict[str, np.ndarray]


def _text_inputs(vocab: int, batch: int, seq: int) -> dict[str, Any]:
    import torch

    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=generator)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[-1, seq // 2 :] = 0  # one padded sequence, so the mask matters
    return {"input_ids": ids, "attention_mask": mask}


def _image_inputs(batch: int, size: int) -> dict[str, Any]:
    import torch

    generator = torch.Generator().manual_seed(1)
    return {"pixel_values": torch.randn(batch, 3, size, size, generator=generator)}


def bert(tiny: bool) -> tuple[Any, dict[str, Any]]:
    from transformers import BertConfig, BertModel

    config = (
        BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            vocab_size=100,
            max_position_embeddings=32,
        )
        if tiny
        else BertConfig()
    )
    return BertModel(config), _text_inputs(config.vocab_size, 2 if tiny else 4, 16 if tiny else 128)


def gpt2(tiny: bool) -> tuple[Any, dict[str, Any]]:
    from transformers import GPT2Config, GPT2Model

    config = (
        GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=100, n_positions=32)
        if tiny
        else GPT2Config()
    )
    config.use_cache = False
    return GPT2Model(config), _text_inputs(config.vocab_size, 2 if tiny else 4, 16 if tiny else 128)


def vit(tiny: bool) -> tuple[Any, dict[str, Any]]:
    from transformers import ViTConfig, ViTModel

    config = (
        ViTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
        )
        if tiny
        else ViTConfig()
    )
    return ViTModel(config), _image_inputs(2 if tiny else 1, config.image_size)


def resnet(tiny: bool) -> tuple[Any, dict[str, Any]]:
    from transformers import ResNetConfig, ResNetModel

    config = (
        ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic")
        if tiny
        else ResNetConfig()
    )
    return ResNetModel(config), _image_inputs(2 if tiny else 1, 32 if tiny else 224)


def mobilenet_v2(tiny: bool) -> tuple[Any, dict[str, Any]]:
    from transformers import MobileNetV2Config, MobileNetV2Model

    config = (
        # With the default initializer (0.02) activations vanish through 50 convs; with 0.5
        # they explode until f32 rounding decides the result. 0.2 keeps them in between.
        MobileNetV2Config(depth_multiplier=0.35, image_size=32, initializer_range=0.2)
        if tiny
        else MobileNetV2Config()
    )
    return MobileNetV2Model(config), _image_inputs(2 if tiny else 1, 32 if tiny else 224)


MODELS: dict[str, Callable[[bool], tuple[Any, dict[str, Any]]]] = {
    "bert": bert,
    "gpt2": gpt2,
    "vit": vit,
    "resnet": resnet,
    "mobilenet_v2": mobilenet_v2,
}


def whisper(tiny: bool) -> tuple[Any, dict[str, Any]]:
    """Whisper's audio encoder alone: two Conv1D layers over log-mel frames, then a
    transformer encoder. Its input length is fixed at 2 * max_source_positions frames."""
    import torch
    from transformers import WhisperConfig, WhisperModel

    config = (
        WhisperConfig(
            d_model=64,
            encoder_layers=2,
            encoder_attention_heads=4,
            encoder_ffn_dim=128,
            decoder_layers=1,
            decoder_attention_heads=4,
            decoder_ffn_dim=128,
            num_mel_bins=80,
            max_source_positions=16,
            max_target_positions=16,
            vocab_size=100,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
        )
        if tiny
        else WhisperConfig()  # whisper-tiny: d_model 384, 4 layers, 6 heads, 3000 frames
    )
    encoder = WhisperModel(config).get_encoder()
    generator = torch.Generator().manual_seed(1)
    frames = 2 * config.max_source_positions
    features = torch.randn(2 if tiny else 1, config.num_mel_bins, frames, generator=generator)
    return encoder, {"input_features": features}


def swin(tiny: bool) -> tuple[Any, dict[str, Any]]:
    from transformers import SwinConfig, SwinModel

    config = (
        # 16x16 patches, then 8x8 after the merge: 4x4 windows at both stages, so both
        # stages' second block shifts its windows (and masks across the wrap).
        SwinConfig(
            image_size=32,
            patch_size=2,
            embed_dim=16,
            depths=[2, 2],
            num_heads=[2, 4],
            window_size=4,
        )
        if tiny
        else SwinConfig()  # Swin-T: 224x224, window 7, depths 2-2-6-2
    )
    return SwinModel(config), _image_inputs(2 if tiny else 1, config.image_size)


def llama(tiny: bool) -> tuple[Any, dict[str, Any]]:
    from transformers import LlamaConfig, LlamaModel

    config = (
        LlamaConfig(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=100,
            max_position_embeddings=64,
        )
        if tiny
        else LlamaConfig(  # SmolLM-135M's shapes (the decoder, without the LM head)
            hidden_size=576,
            intermediate_size=1536,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            vocab_size=49152,
            max_position_embeddings=2048,
            rms_norm_eps=1e-5,
        )
    )
    config.use_cache = False
    return LlamaModel(config), _text_inputs(
        config.vocab_size, 2 if tiny else 1, 16 if tiny else 128
    )


def mobilevit(tiny: bool) -> tuple[Any, dict[str, Any]]:
    """MobileViT: MobileNetV2 blocks, then three stages that unfold the feature map into
    2x2 patches, run a transformer over them and fold them back (Swish everywhere)."""
    from transformers import MobileViTConfig, MobileViTModel

    config = (
        # 64x64 so that the last stage's map (1/32) still splits into whole 2x2 patches
        # (a 32x32 image would make the model interpolate instead).
        MobileViTConfig(
            image_size=64,
            hidden_sizes=[16, 24, 32],
            neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
            num_attention_heads=4,
            expand_ratio=2.0,
        )
        if tiny
        else MobileViTConfig(  # apple/mobilevit-small
            image_size=256,
            hidden_sizes=[144, 192, 240],
            neck_hidden_sizes=[16, 32, 64, 96, 128, 160, 640],
            num_attention_heads=4,
            expand_ratio=4.0,
            # Batch norms at their initial statistics do not rescale: with the default
            # initializer (0.02) activations shrink to denormals (output ~5e-40, which
            # would time denormal arithmetic); 0.3 keeps the output's deviation near 1.
            initializer_range=0.3,
        )
    )
    return MobileViTModel(config), _image_inputs(2 if tiny else 1, config.image_size)


def convnext(tiny: bool) -> tuple[Any, dict[str, Any]]:
    """ConvNeXt: a 4x4 patchify stem, then blocks of a 7x7 depthwise conv, LayerNorm over
    channels (channels last), a GELU MLP and a layer scale."""
    from transformers import ConvNextConfig, ConvNextModel

    config = (
        ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, image_size=32)
        if tiny
        else ConvNextConfig(  # facebook/convnext-tiny-224
            hidden_sizes=[96, 192, 384, 768], depths=[3, 3, 9, 3], image_size=224
        )
    )
    return ConvNextModel(config), _image_inputs(2 if tiny else 1, config.image_size)


def distilbert(tiny: bool) -> tuple[Any, dict[str, Any]]:
    from transformers import DistilBertConfig, DistilBertModel

    config = (
        DistilBertConfig(
            dim=32, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=100, max_position_embeddings=32
        )
        if tiny
        else DistilBertConfig(  # distilbert-base-uncased
            dim=768, n_layers=6, n_heads=12, hidden_dim=3072, vocab_size=30522
        )
    )
    return DistilBertModel(config), _text_inputs(
        config.vocab_size, 2 if tiny else 1, 16 if tiny else 128
    )


def t5_encoder(tiny: bool) -> tuple[Any, dict[str, Any]]:
    """T5's encoder: RMS-style LayerNorm without bias, a relative position bias added to the
    attention scores (bucketed by log distance), unscaled attention and a ReLU MLP."""
    from transformers import T5Config, T5EncoderModel

    config = (
        T5Config(
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            vocab_size=100,
            relative_attention_num_buckets=8,
            relative_attention_max_distance=16,
        )
        if tiny
        else T5Config(  # t5-small
            d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128
        )
    )
    config.use_cache = False
    return T5EncoderModel(config), _text_inputs(
        config.vocab_size, 2 if tiny else 1, 16 if tiny else 128
    )


HELD_OUT: dict[str, Callable[[bool], tuple[Any, dict[str, Any]]]] = {
    "whisper": whisper,
    "swin": swin,
    "llama": llama,
    "mobilevit": mobilevit,
    "convnext": convnext,
    "distilbert": distilbert,
    "t5_encoder": t5_encoder,
}
"""Networks added after the first five (the held-out Whisper, Swin and Llama;
MobileViT, ConvNeXt, DistilBERT and T5 encoder); kept apart from MODELS so that the
scripts and tests that loop over MODELS see the same five networks as before."""


def build(name: str, tiny: bool) -> tuple[Any, dict[str, Any]]:
    """Model `name` of MODELS or HELD_OUT and its example inputs (torch tensors)."""
    return (MODELS.get(name) or HELD_OUT[name])(tiny)


def export(name: str, folder: Path, tiny: bool = True) -> Exported:
    """Build model `name` (seeded random weights), export it to folder/name.onnx."""
    import torch

    torch.manual_seed(0)
    model, inputs = build(name, tiny)
    model.eval()
    if tiny:
        _perturb(model)
    path = folder / f"{name}.onnx"
    with torch.no_grad():
        torch.onnx.export(
            model,
            (),
            kwargs=inputs,
            f=str(path),
            input_names=list(inputs),
            opset_version=OPSET,
            dynamo=True,
            external_data=not tiny,
            verbose=False,
        )
    return Exported(name, path, {k: v.numpy() for k, v in inputs.items()})


def _perturb(model: Any) -> None:
    """Nudge every parameter and batch-norm statistic off its initial value: a default
    init has zero biases and unit norm scales, which the exporter drops or merges, leaving
    those code paths (Gemm's C input, Conv bias, ...) untested."""
    import torch

    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.add_(0.05 * noise)
        for name, buffer in model.named_buffers():
            if name.endswith("running_var"):
                buffer.copy_(0.5 + torch.rand(buffer.shape, generator=generator))
            elif name.endswith("running_mean"):
                buffer.copy_(0.1 * torch.randn(buffer.shape, generator=generator))


def onnxruntime_run(exported: Exported) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {n: exported.inputs[n] for n in names})
