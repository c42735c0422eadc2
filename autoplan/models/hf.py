"""Hugging Face ``transformers`` GPT-2 and Llama as unit models (random init from a config, no download).

Spec forms (``autoplan ... --model hf:NAME``)::

    hf:gpt2-tiny      GPT-2, 4 layers, hidden 64, 4 heads, vocab 256, 32 positions
    hf:llama-tiny     Llama, 4 layers, hidden 64, 4 heads, 2 KV heads, MLP 128, vocab 256, 32 positions
    hf:gpt2           GPT2Config() defaults (GPT-2 small, 124M, 1024 positions)
    hf:llama          LlamaConfig() defaults (Llama-2-7B shape, 2048 positions)
    hf:NAME,key=value,...   overrides: layers, hidden, heads, kv_heads (Llama), ffn_hidden, vocab,
                            seq_len, or any attribute of the transformers config class
    hf:DIR            a local checkpoint directory (``config.json`` of a ``gpt2`` or ``llama`` model and
                      safetensors weights, one file or sharded with ``model.safetensors.index.json``;
                      no overrides). Built with ``load_weights=True`` (training scripts), the model is
                      made on the meta device and its weights are read shard by shard into the layout
                      (:mod:`autoplan.models.hf_weights`); otherwise (profiling) it is a random
                      initialisation of the checkpoint's config, like ``hf:NAME``.

A spec is a directory when its text (after ``hf:``) is not a preset name and names a directory, or
looks like a path (holds ``/`` or starts with ``.``).

The full-size ``hf:gpt2`` / ``hf:llama`` are for planning: on a catalogue cluster the planner uses
their shape analytically without building them (see
:func:`autoplan.plan.api.resolve_model_profile`); measuring or training ``hf:llama`` builds the
whole 6.7B-parameter model (about 27 GB in fp32).

Every config is built with ``tie_word_embeddings=False`` (the embedding and the LM head may sit on
different pipeline stages) and all dropout probabilities 0 (training is deterministic; the adapters
hold no dropout modules). The model's default training sequence length ``seq_len`` is the number of
positions (``n_positions`` / ``max_position_embeddings``).

How the HF modules become units (the unit-model protocol of :mod:`autoplan.models.units`):

- **GPT-2** (``GPT2LMHeadModel``): ``embed`` = token + position embedding (``wte``, ``wpe``);
  every ``GPT2Block`` becomes a :class:`GPT2Block` whose fused ``Conv1D`` layers are converted to
  ``nn.Linear`` (weight transposed): ``c_attn`` split into ``q_proj``, ``k_proj``, ``v_proj`` so
  column-parallel TP gives each rank whole heads; ``head`` = ``ln_f`` + ``lm_head``. The attention is
  ``scaled_dot_product_attention`` with GPT-2's scaling (``scale_attn_weights``,
  ``scale_attn_by_inverse_layer_idx``) and the config's activation (``gelu_new``).
- **Llama** (``LlamaForCausalLM``): ``embed`` = ``embed_tokens``; every ``LlamaDecoderLayer`` becomes
  a :class:`LlamaBlock` holding the layer's own ``input_layernorm``, ``mlp`` (``LlamaMLP``),
  ``post_attention_layernorm`` and its ``self_attn`` as a :class:`SelfContainedLlamaAttention` (a
  ``LlamaAttention`` subclass with the same weights that computes its rotary position embeddings from
  the token positions, so a block runs alone on any pipeline stage); ``head`` = ``norm`` + ``lm_head``.
  Attention runs HF's projections and rotary embedding, then the causal SDPA core
  (``attention_core``, which context parallel replaces; positions from ``sequence_shard``).

Both reshape q/k/v with ``-1`` heads (HF's Llama does; the GPT-2 block here does too), so under TP a
rank's column-parallel projections hold ``heads/t`` (and ``kv_heads/t``) whole heads and the forward
needs no per-layer head count. The TP plans (Megatron pairs, with sequence-parallel norms):

    GPT-2   colwise attn.q_proj, attn.k_proj, attn.v_proj, mlp.c_fc      rowwise attn.c_proj, mlp.c_proj
    Llama   colwise self_attn.{q,k,v}_proj, mlp.gate_proj, mlp.up_proj  rowwise self_attn.o_proj, mlp.down_proj

The adapters compute the same logits as the HF model with the same weights (checked in
``tests/test_models_hf.py``).

Run::

    python -c "from autoplan.models.hf import build_hf_model; print(build_hf_model('hf:gpt2-tiny').unit_names())"
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from autoplan.errors import InputError
from autoplan.models.attention import CausalAttention, SequenceShard, sequence_positions
from autoplan.models.shapes import ModelShape
from autoplan.models.units import TensorParallelPlan, UnitModel

HF_PREFIX = "hf:"

GPT2_TP_PLAN = TensorParallelPlan(
    colwise=("attn.q_proj", "attn.k_proj", "attn.v_proj", "mlp.c_fc"),
    rowwise=("attn.c_proj", "mlp.c_proj"),
    sp_norms=("ln_1", "ln_2"), sp_gather=("attn", "mlp"))

LLAMA_TP_PLAN = TensorParallelPlan(
    colwise=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"),
    rowwise=("self_attn.o_proj", "mlp.down_proj"),
    sp_norms=("input_layernorm", "post_attention_layernorm"), sp_gather=("self_attn", "mlp"))


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise InputError("hf: models need the `transformers` package: pip install 'autoplan[hf]'") from None
    return transformers


# --------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HFArch:
    """One supported architecture: its config class, the generic-key -> config-field names."""

    family: str
    config_class: str
    fields: dict[str, str]
    """generic override key (layers, hidden, ...) -> attribute of the config class"""


_GPT2 = HFArch("gpt2", "GPT2Config", {"layers": "n_layer", "hidden": "n_embd", "heads": "n_head",
                                      "ffn_hidden": "n_inner", "vocab": "vocab_size", "seq_len": "n_positions"})
_LLAMA = HFArch("llama", "LlamaConfig", {"layers": "num_hidden_layers", "hidden": "hidden_size",
                                         "heads": "num_attention_heads", "kv_heads": "num_key_value_heads",
                                         "ffn_hidden": "intermediate_size", "vocab": "vocab_size",
                                         "seq_len": "max_position_embeddings"})

HF_PRESETS: dict[str, tuple[HFArch, dict[str, Any]]] = {
    "gpt2-tiny": (_GPT2, {"n_layer": 4, "n_embd": 64, "n_head": 4, "vocab_size": 256, "n_positions": 32}),
    "gpt2": (_GPT2, {}),
    "llama-tiny": (_LLAMA, {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256,
                            "max_position_embeddings": 32}),
    "llama": (_LLAMA, {}),
}

_NO_DROPOUT = {"gpt2": {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
               "llama": {"attention_dropout": 0.0}}


def is_hf_spec(spec: str) -> bool:
    return spec.startswith(HF_PREFIX)


def _parse_value(text: str) -> int | float | bool | str:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


_FAMILIES = {"gpt2": _GPT2, "llama": _LLAMA}


def checkpoint_dir(spec: str) -> Path | None:
    """The checkpoint directory ``hf:DIR`` names, or None for ``hf:NAME`` (see the module docstring)."""
    text = spec[len(HF_PREFIX):] if is_hf_spec(spec) else spec
    if text.split(",")[0] in HF_PRESETS:
        return None
    path = Path(text)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(f"{path}: not a Hugging Face checkpoint directory (no config.json)")
        return path
    if "/" in text or text.startswith("."):
        raise InputError(f"checkpoint directory not found: {path}")
    return None


def _checkpoint_config(path: Path) -> tuple[HFArch, Any]:
    """The architecture and ``transformers`` config of a checkpoint directory (read as it is)."""
    tf = _transformers()
    try:
        config = tf.AutoConfig.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, KeyError) as e:
        raise InputError(f"{path}/config.json: not a readable Hugging Face config "
                         f"({str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__})") from None
    arch = _FAMILIES.get(getattr(config, "model_type", None))
    if arch is None:
        raise InputError(f"{path}: model_type {getattr(config, 'model_type', None)!r} is not supported "
                         f"(supported: {', '.join(_FAMILIES)})")
    return arch, config


def checkpoint_config(path: Path) -> Any:
    """The ``transformers`` config of a checkpoint directory as stored (dropout, tied embeddings and all)."""
    return _checkpoint_config(path)[1]


def hf_arch(spec: str) -> HFArch:
    """The architecture (family) of an ``hf:`` spec, a preset's or a checkpoint directory's."""
    path = checkpoint_dir(spec)
    return _checkpoint_config(path)[0] if path is not None else parse_hf_spec(spec)[0]


def parse_hf_spec(spec: str) -> tuple[HFArch, dict[str, Any]]:
    """``hf:NAME[,key=value...]`` -> (architecture, config keyword arguments)."""
    if not is_hf_spec(spec):
        raise InputError(f"not a Hugging Face model spec (hf:NAME): {spec!r}")
    if checkpoint_dir(spec) is not None:
        raise InputError(f"{spec!r} is a checkpoint directory, not a preset with overrides")
    name, *pairs = spec[len(HF_PREFIX):].split(",")
    if name not in HF_PRESETS:
        raise InputError(f"unknown Hugging Face model {spec!r} (known: "
                         f"{', '.join(HF_PREFIX + n for n in HF_PRESETS)}; overrides as hf:NAME,layers=2,...)")
    arch, preset = HF_PRESETS[name]
    kwargs = dict(preset)
    config_cls = getattr(_transformers(), arch.config_class)
    defaults = config_cls()
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"{spec!r}: override {pair!r} is not key=value")
        field = arch.fields.get(key, key)
        if field not in arch.fields.values() and not hasattr(defaults, field):
            raise InputError(f"{spec!r}: {key!r} is neither a shape key ({', '.join(arch.fields)}) "
                             f"nor a {arch.config_class} attribute")
        kwargs[field] = _parse_value(value.strip())
    return arch, kwargs


def hf_config(spec: str) -> Any:
    """The ``transformers`` config of ``spec`` (untied embeddings, no dropout, sdpa attention); for a
    checkpoint directory its ``config.json`` with those three changed."""
    path = checkpoint_dir(spec)
    if path is not None:
        arch, config = _checkpoint_config(path)
        for key, value in _NO_DROPOUT[arch.family].items():
            setattr(config, key, value)
        config.tie_word_embeddings = False
        config._attn_implementation = "sdpa"
        return config
    arch, kwargs = parse_hf_spec(spec)
    config_cls = getattr(_transformers(), arch.config_class)
    vocab = kwargs.get("vocab_size", config_cls().vocab_size)
    for tok in ("bos_token_id", "eos_token_id"):   # GPT-2's 50256 lies outside a small vocabulary
        default = getattr(config_cls(), tok, None)
        if tok not in kwargs and isinstance(default, int) and isinstance(vocab, int) and default >= vocab:
            kwargs[tok] = vocab - 1
    try:
        config = config_cls(**{**kwargs, **_NO_DROPOUT[arch.family], "tie_word_embeddings": False})
    except _config_errors() as e:
        raise InputError(f"{spec!r}: bad {arch.config_class}: {str(e).strip().splitlines()[-1]}") from None
    config._attn_implementation = "sdpa"
    return config


def _config_errors() -> tuple[type[Exception], ...]:
    """What a ``transformers`` config raises on a bad value: TypeError/ValueError, and in recent
    versions huggingface_hub's strict-dataclass validation errors."""
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:
        return TypeError, ValueError
    return TypeError, ValueError, StrictDataclassError


def hf_shape(spec: str) -> ModelShape:
    """The transformer shape of ``spec`` (for the planner's TP-degree checks and cost fractions)."""
    arch = hf_arch(spec)
    c = hf_config(spec)
    if arch.family == "gpt2":
        vals = dict(layers=c.n_layer, hidden=c.n_embd, heads=c.n_head, kv_heads=c.n_head,
                    ffn_hidden=c.n_inner or 4 * c.n_embd, vocab=c.vocab_size, seq_len=c.n_positions)
    else:
        vals = dict(layers=c.num_hidden_layers, hidden=c.hidden_size, heads=c.num_attention_heads,
                    kv_heads=c.num_key_value_heads or c.num_attention_heads, ffn_hidden=c.intermediate_size,
                    vocab=c.vocab_size, seq_len=c.max_position_embeddings)
    bad = {k: v for k, v in vals.items() if isinstance(v, bool) or not isinstance(v, int)}
    if bad:
        raise InputError(f"{spec!r}: {', '.join(f'{k} must be an integer, got {v!r}' for k, v in bad.items())}")
    return ModelShape(name=spec, mlp="gelu" if arch.family == "gpt2" else "swiglu", **vals)


def build_hf_reference(spec: str, seed: int = 0) -> nn.Module:
    """The plain ``transformers`` model of ``spec`` (``GPT2LMHeadModel`` / ``LlamaForCausalLM``), its
    random initialisation drawn from ``seed`` (the caller's RNG state is left unchanged)."""
    arch = hf_arch(spec)
    tf = _transformers()
    config = hf_config(spec)
    cls = tf.GPT2LMHeadModel if arch.family == "gpt2" else tf.LlamaForCausalLM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls(config)
    return model.float().eval()


def build_hf_model(spec: str, seed: int = 0, *, load_weights: bool = False) -> UnitModel:
    """The unit model of ``spec``: the HF model of :func:`build_hf_reference` (same ``seed``), converted.

    ``load_weights`` with a checkpoint directory: the model is built on the meta device and carries a
    :class:`~autoplan.models.hf_weights.CheckpointWeights` (``model.checkpoint_weights``, checked against
    the files' headers here) that :func:`autoplan.parallelize` uses to read each rank's shards."""
    arch = hf_arch(spec)
    path = checkpoint_dir(spec) if load_weights else None
    if path is None:
        ref = build_hf_reference(spec, seed)
    else:
        tf = _transformers()
        with torch.device("meta"):
            cls = tf.GPT2LMHeadModel if arch.family == "gpt2" else tf.LlamaForCausalLM
            ref = cls(hf_config(spec)).float()
    with torch.device("meta") if path is not None else contextlib.nullcontext():
        model = GPT2Units.from_hf(ref) if arch.family == "gpt2" else LlamaUnits.from_hf(ref)
    model.spec = spec
    model.shape = hf_shape(spec)
    if path is not None:
        from autoplan.models.hf_weights import CheckpointWeights

        # the config as stored (tie_word_embeddings as the files were written)
        model.checkpoint_weights = CheckpointWeights.open(path, arch.family, checkpoint_config(path), model)
    return model



# --------------------------------------------------------------------------------------------
# GPT-2
# --------------------------------------------------------------------------------------------

def _linear_from_conv1d(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Linear:
    """``nn.Linear`` equal to HF's ``Conv1D`` with ``weight`` [in, out] and ``bias`` [out]."""
    n_in, n_out = weight.shape
    lin = nn.Linear(n_in, n_out, bias=bias is not None, dtype=weight.dtype)
    with torch.no_grad():
        lin.weight.copy_(weight.t())
        if bias is not None:
            lin.bias.copy_(bias)
    return lin


def _gpt2_scaling(attn: nn.Module) -> float:
    """GPT-2's attention-score scale: ``1/sqrt(head_dim)`` if ``scale_attn_weights``, further divided by
    ``layer_idx + 1`` if ``scale_attn_by_inverse_layer_idx`` (computed from the config's flags, as
    older ``transformers`` versions keep no ``scaling`` attribute)."""
    scale = attn.head_dim ** -0.5 if attn.scale_attn_weights else 1.0
    if attn.scale_attn_by_inverse_layer_idx:
        scale /= float(attn.layer_idx + 1)
    return scale


class GPT2Embed(nn.Module):
    """Token plus learned position embedding: tokens [b, s] -> [b, s, h]. Under context parallel the
    tokens are a share of the sequence and ``sequence_shard`` gives their global positions."""

    def __init__(self, wte: nn.Embedding, wpe: nn.Embedding):
        super().__init__()
        self.wte = wte
        self.wpe = wpe
        self.sequence_shard: SequenceShard | None = None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pos = sequence_positions(self.sequence_shard, tokens.shape[1], tokens.device)
        return self.wte(tokens) + self.wpe(pos)[None]


class GPT2Attention(nn.Module):
    """Causal self-attention of one GPT-2 block with separate q/k/v ``nn.Linear`` projections."""

    def __init__(self, q_proj: nn.Linear, k_proj: nn.Linear, v_proj: nn.Linear, c_proj: nn.Linear,
                 head_dim: int, scaling: float):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.c_proj = q_proj, k_proj, v_proj, c_proj
        self.head_dim = head_dim
        self.scaling = scaling
        self.attention_core: nn.Module = CausalAttention()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        # -1: the local head count under tensor parallel (column-parallel q/k/v hold whole heads)
        q = self.q_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)   # [b, a, s, hd]
        k = self.k_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        o = self.attention_core(q, k, v, scale=self.scaling)
        return self.c_proj(o.transpose(1, 2).reshape(b, s, -1))


class GPT2MLP(nn.Module):
    """``c_proj(act(c_fc(x)))`` with ``nn.Linear`` layers."""

    def __init__(self, c_fc: nn.Linear, c_proj: nn.Linear, act: nn.Module):
        super().__init__()
        self.c_fc, self.c_proj, self.act = c_fc, c_proj, act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    """Pre-norm GPT-2 block: ``x + attn(ln_1(x))``, then ``+ mlp(ln_2(.))``."""

    def __init__(self, ln_1: nn.LayerNorm, attn: GPT2Attention, ln_2: nn.LayerNorm, mlp: GPT2MLP):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = ln_1, attn, ln_2, mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    @classmethod
    def from_hf(cls, block: nn.Module) -> "GPT2Block":
        """Convert a ``transformers`` ``GPT2Block`` (its weights copied; the original is unchanged)."""
        hf_attn, hf_mlp = block.attn, block.mlp
        if getattr(hf_attn, "is_cross_attention", False) or hasattr(block, "crossattention"):
            raise InputError("GPT-2 with cross-attention is not supported")
        h = hf_attn.embed_dim
        w, bias = hf_attn.c_attn.weight.detach(), hf_attn.c_attn.bias.detach()      # [h, 3h], [3h]
        q, k, v = (_linear_from_conv1d(w[:, i * h:(i + 1) * h], bias[i * h:(i + 1) * h]) for i in range(3))
        c_proj = _linear_from_conv1d(hf_attn.c_proj.weight.detach(), hf_attn.c_proj.bias.detach())
        attn = GPT2Attention(q, k, v, c_proj, head_dim=hf_attn.head_dim, scaling=_gpt2_scaling(hf_attn))
        mlp = GPT2MLP(_linear_from_conv1d(hf_mlp.c_fc.weight.detach(), hf_mlp.c_fc.bias.detach()),
                      _linear_from_conv1d(hf_mlp.c_proj.weight.detach(), hf_mlp.c_proj.bias.detach()),
                      hf_mlp.act)
        return cls(copy.deepcopy(block.ln_1), attn, copy.deepcopy(block.ln_2), mlp)


class LMHead(nn.Module):
    """Final norm and LM head: hidden [b, s, h] -> logits [b, s, vocab]. Attribute names follow HF."""

    def __init__(self, norm_name: str, norm: nn.Module, lm_head: nn.Linear):
        super().__init__()
        self.norm_name = norm_name
        self.add_module(norm_name, norm)
        self.lm_head = lm_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(getattr(self, self.norm_name)(x))


class GPT2Units(UnitModel):
    """``GPT2LMHeadModel`` as units ``embed``, ``block.i``, ``head`` (see the module docstring)."""

    tp_plan = GPT2_TP_PLAN

    @classmethod
    def from_hf(cls, model: nn.Module) -> "GPT2Units":
        tr, c = model.transformer, model.config
        embed = GPT2Embed(copy.deepcopy(tr.wte), copy.deepcopy(tr.wpe))
        blocks = [GPT2Block.from_hf(b) for b in tr.h]
        head = LMHead("ln_f", copy.deepcopy(tr.ln_f), copy.deepcopy(model.lm_head))
        return cls(embed, blocks, head, vocab_size=c.vocab_size, seq_len=c.n_positions)


# --------------------------------------------------------------------------------------------
# Llama
# --------------------------------------------------------------------------------------------

def _self_contained_attention_class() -> type:
    """``LlamaAttention`` subclass whose forward takes hidden states only (built lazily: transformers
    is an optional dependency)."""
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding, apply_rotary_pos_emb

    class SelfContainedLlamaAttention(LlamaAttention):
        """HF ``LlamaAttention`` that computes its rotary embeddings from the token positions.

        ``forward(x [b, s, h]) -> [b, s, h]``: HF's projections and ``apply_rotary_pos_emb`` at
        positions ``0..s-1`` (the global positions of ``sequence_shard`` under context parallel),
        then causal attention by ``attention_core`` (:mod:`autoplan.models.attention`; SDPA, K/V
        heads repeated as HF's ``repeat_kv`` does), then ``o_proj``. The rotary table has no
        parameters (``inv_freq`` is a non-persistent buffer)."""

        def __init__(self, config: Any, layer_idx: int):
            super().__init__(config, layer_idx)
            self.rotary_emb = LlamaRotaryEmbedding(config)
            self.attention_core: nn.Module = CausalAttention()
            self.sequence_shard: SequenceShard | None = None

        def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            b, s, _ = hidden_states.shape
            position_ids = sequence_positions(self.sequence_shard, s, hidden_states.device)[None]
            cos, sin = self.rotary_emb(hidden_states, position_ids)
            # -1: the local head count under tensor parallel
            q = self.q_proj(hidden_states).view(b, s, -1, self.head_dim).transpose(1, 2)  # [b, a, s, hd]
            k = self.k_proj(hidden_states).view(b, s, -1, self.head_dim).transpose(1, 2)  # [b, kv, s, hd]
            v = self.v_proj(hidden_states).view(b, s, -1, self.head_dim).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            o = self.attention_core(q, k, v, scale=self.scaling)                           # [b, a, s, hd]
            return self.o_proj(o.transpose(1, 2).reshape(b, s, -1))

    return SelfContainedLlamaAttention


_ATTN_CLASS: type | None = None


def self_contained_llama_attention(config: Any, layer_idx: int) -> nn.Module:
    """A new :class:`SelfContainedLlamaAttention` (see :func:`_self_contained_attention_class`)."""
    global _ATTN_CLASS
    if _ATTN_CLASS is None:
        _ATTN_CLASS = _self_contained_attention_class()
    return _ATTN_CLASS(config, layer_idx)


class LlamaBlock(nn.Module):
    """One ``LlamaDecoderLayer``'s modules, run as HF runs them, with a self-contained attention."""

    def __init__(self, input_layernorm: nn.Module, self_attn: nn.Module, post_attention_layernorm: nn.Module,
                 mlp: nn.Module):
        super().__init__()
        self.input_layernorm, self.self_attn = input_layernorm, self_attn
        self.post_attention_layernorm, self.mlp = post_attention_layernorm, mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))

    @classmethod
    def from_hf(cls, layer: nn.Module, config: Any) -> "LlamaBlock":
        """Convert a ``transformers`` ``LlamaDecoderLayer`` (weights copied; the original is unchanged)."""
        attn = self_contained_llama_attention(config, layer.self_attn.layer_idx)
        missing, unexpected = attn.load_state_dict(layer.self_attn.state_dict(), strict=False)
        if unexpected or any(not m.startswith("rotary_emb.") for m in missing):
            raise InputError(f"Llama attention weights do not match: missing {missing}, unexpected {unexpected}")
        attn.to(dtype=layer.self_attn.q_proj.weight.dtype)
        return cls(copy.deepcopy(layer.input_layernorm), attn, copy.deepcopy(layer.post_attention_layernorm),
                   copy.deepcopy(layer.mlp))


class LlamaUnits(UnitModel):
    """``LlamaForCausalLM`` as units ``embed``, ``block.i``, ``head`` (see the module docstring)."""

    tp_plan = LLAMA_TP_PLAN

    @classmethod
    def from_hf(cls, model: nn.Module) -> "LlamaUnits":
        inner, c = model.model, model.config
        if getattr(c, "rope_scaling", None) and c.rope_scaling.get("rope_type", "default") == "dynamic":
            raise InputError("Llama with dynamic RoPE scaling is not supported (positions must not depend on a cache)")
        embed = copy.deepcopy(inner.embed_tokens)
        blocks = [LlamaBlock.from_hf(layer, c) for layer in inner.layers]
        head = LMHead("norm", copy.deepcopy(inner.norm), copy.deepcopy(model.lm_head))
        return cls(embed, blocks, head, vocab_size=c.vocab_size, seq_len=c.max_position_embeddings)


def reference_logits(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Logits ``[b, s, vocab]`` of a plain HF causal LM on ``tokens`` (no cache, no mask)."""
    return model(input_ids=tokens, use_cache=False).logits


__all__ = ["GPT2_TP_PLAN", "LLAMA_TP_PLAN", "GPT2Units", "LlamaUnits", "build_hf_model", "build_hf_reference",
           "hf_config", "hf_shape", "is_hf_spec", "parse_hf_spec", "reference_logits", "HF_PRESETS"]

