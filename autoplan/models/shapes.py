"""Transformer shapes: the built-in named sizes and JSON shape files.

A shape is all the planner needs to build the reference model or an analytic profile::

    layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len [, mlp: gelu | swiglu]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from autoplan.errors import InputError
from autoplan.jsonio import as_dict, short_repr

MAX_SHAPE_VALUE = 2 ** 24
"""largest value of any shape field (16.7M): above every published transformer's width, vocabulary and
context, small enough that the cost model's products of a few of them stay exact"""


@dataclass(frozen=True)
class ModelShape:
    """Shape of a decoder-only transformer (GPT/Llama style)."""

    name: str
    layers: int
    """number of transformer blocks"""
    hidden: int
    """model width h"""
    heads: int
    """attention heads a"""
    kv_heads: int
    """key/value heads (grouped-query attention when < heads)"""
    ffn_hidden: int
    """inner width of the MLP"""
    vocab: int
    """vocabulary size"""
    seq_len: int
    """default training sequence length s"""
    mlp: str = "gelu"
    """gelu: two MLP matrices, w2(gelu(w1 x)) (GPT); swiglu: three, w2(silu(w1 x) * w3 x) (Llama)"""

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= MAX_SHAPE_VALUE:
                raise InputError(f"model shape {short_repr(self.name)}: {f} must be an integer from 1 to "
                                 f"{MAX_SHAPE_VALUE}, got {short_repr(v)}")
        if self.hidden % self.heads:
            raise InputError(f"model shape {self.name!r}: hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.mlp not in MLP_KINDS:
            raise InputError(f"model shape {self.name!r}: mlp must be one of {', '.join(MLP_KINDS)}, "
                             f"got {short_repr(self.mlp)}")
        if self.heads % self.kv_heads:
            raise InputError(f"model shape {self.name!r}: heads {self.heads} not divisible by kv_heads {self.kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def mlp_matrices(self) -> int:
        """h x f matrices in the MLP: 2 (GeLU) or 3 (SwiGLU: gate, up, down)."""
        return 3 if self.mlp == "swiglu" else 2

    def block_param_count(self) -> int:
        """Parameters of one block: q,o (h*h each), k,v (h*kv*hd each), MLP (2 or 3 * h*f), two norms."""
        h, kv = self.hidden, self.kv_heads * self.head_dim
        return 2 * h * h + 2 * h * kv + self.mlp_matrices * h * self.ffn_hidden + 2 * h

    def param_count(self) -> int:
        """All parameters: embedding, blocks, final norm, untied LM head."""
        return self.vocab * self.hidden * 2 + self.layers * self.block_param_count() + self.hidden

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, source: str = "shape") -> "ModelShape":
        keys = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len")
        d = as_dict(d, source)
        missing = [k for k in keys if k not in d]
        if missing:
            raise InputError(f"{source}: transformer shape is missing {', '.join(missing)}")
        name, mlp = d.get("name", source), d.get("mlp", "gelu")
        return cls(name=name if isinstance(name, str) else source, mlp=mlp if isinstance(mlp, str) else repr(mlp),
                   **{k: d[k] for k in keys})


def tp_violation(tp: int, *, heads: int | None = None, kv_heads: int | None = None,
                 ffn_hidden: int | None = None) -> str | None:
    """The rule tensor parallelism puts on a transformer, in words, or None: ``tp`` divides the
    attention heads, the key/value heads and the MLP width (each rank holds whole heads and an equal
    slice of the MLP). A part given as None is not checked."""
    for n, what in ((heads, f"the {heads} attention heads"), (kv_heads, f"the {kv_heads} key/value heads"),
                    (ffn_hidden, f"the MLP width {ffn_hidden}")):
        if n is not None and n % tp:
            return f"tp={tp} does not divide {what}"
    return None


def tp_degrees_allowed(shape: ModelShape) -> list[int]:
    """TP degrees that divide heads, KV heads and the MLP width (:func:`tp_violation`)."""
    return [t for t in range(1, shape.heads + 1)
            if tp_violation(t, heads=shape.heads, kv_heads=shape.kv_heads, ffn_hidden=shape.ffn_hidden) is None]


MLP_KINDS = ("gelu", "swiglu")


def _s(name, layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len, mlp="gelu") -> ModelShape:
    return ModelShape(name, layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len, mlp)


BUILTIN_SHAPES: dict[str, ModelShape] = {s.name: s for s in [
    # Tiny: trains in seconds on one CPU core; used by the equivalence tests.
    _s("gpt-tiny", 4, 64, 4, 4, 256, 256, 32),
    # Small enough to train on a 2-core CPU, large enough that layouts differ in step time.
    _s("gpt-small", 8, 256, 8, 8, 1024, 4096, 128),
    # GPT-3 family (Brown et al. 2020, Table 2.1), vocab 50257 padded to 51200 (Megatron-LM).
    _s("gpt3-125m", 12, 768, 12, 12, 3072, 51200, 2048),
    _s("gpt3-350m", 24, 1024, 16, 16, 4096, 51200, 2048),
    _s("gpt3-1.3b", 24, 2048, 16, 16, 8192, 51200, 2048),
    _s("gpt3-2.7b", 32, 2560, 32, 32, 10240, 51200, 2048),
    _s("gpt3-6.7b", 32, 4096, 32, 32, 16384, 51200, 2048),
    _s("gpt3-13b", 40, 5120, 40, 40, 20480, 51200, 2048),
    _s("gpt3-175b", 96, 12288, 96, 96, 49152, 51200, 2048),
    # 1T: the Megatron-LM scaling table (Narayanan et al. 2021, Table 1), 128 layers, h=25600, 160 heads.
    _s("gpt-1t", 128, 25600, 160, 160, 102400, 51200, 2048),
    # Llama 2 (Touvron et al. 2023, "Llama 2", Table 1 and the released configs): SwiGLU, vocab 32000,
    # 4k context; 70B uses GQA with 8 KV heads.
    _s("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, "swiglu"),
    _s("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, "swiglu"),
    _s("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, "swiglu"),
    # Llama 3 (Meta, "The Llama 3 Herd of Models", 2024, Table 3); GQA with 8 KV heads, SwiGLU MLP.
    _s("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, "swiglu"),
    _s("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, "swiglu"),
    _s("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, "swiglu"),
]}


def forward_flops_per_sample(kind: str, shape: ModelShape, seq_len: int) -> float:
    """Forward FLOPs of one layer of ``kind`` on one sequence of ``seq_len`` tokens (unsharded;
    attention counted without the causal discount, as Megatron-LM counts)."""
    s, h = seq_len, shape.hidden
    if kind == "block":
        kv = shape.kv_heads * shape.head_dim
        return (2.0 * s * h * (2 * h + 2 * kv) + 2.0 * shape.mlp_matrices * s * h * shape.ffn_hidden
                + 4.0 * s * s * h)
    if kind == "head":
        return 2.0 * s * h * shape.vocab
    if kind == "embed":
        return 0.0
    raise InputError(f"unknown layer kind {kind!r}")


