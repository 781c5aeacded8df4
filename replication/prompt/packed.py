"""RoBERTa's encoder on packed rows: no padding, variable-length attention (``prompt.attention: varlen``).

The batched objective (:mod:`replication.prompt.objective`) evaluates n candidates x B examples
= n B rows. Padded layouts process ``rows x longest`` tokens per forward; packing concatenates
the rows' real tokens into one sequence of T tokens per forward, so every linear layer,
LayerNorm and GELU touches real tokens only and a forward can hold a fixed number of tokens
whatever the rows' lengths (large, uniform matrix products). Attention must then stay inside
each row: the rows' boundaries ``cu`` (cumulative lengths, ``cu[0] = 0``, ``cu[-1] = T``) go
to PyTorch's variable-length flash attention (``torch.nn.attention.varlen.varlen_attn``, or
the ``aten._flash_attention_forward`` op it wraps on torch versions without the module), which
attends within each segment ``[cu[s], cu[s+1])``. On the CPU, in fp32 (flash kernels take
fp16/bf16 only), or with ``attention="sdpa"``, each run of consecutive rows of equal length is
one dense batch, a view of the packed tokens, through ``scaled_dot_product_attention`` (on CUDA
its fixed-length kernels, cuDNN's among them): the same segments, the same math. The
objective packs rows in length order (examples sorted by length, all candidates of an
example together), so a forward has one run per distinct length.

The computation is RoBERTa's (transformers' ``RobertaModel``, post-LayerNorm BERT layers), with
the model's own weights (the query, key and value projections concatenated into one matrix, so
one product per layer instead of three)::

    h_0   = LN_emb(E_word[ids] + E_pos[pos] + E_type[0]) (+ the prompt at positions 1..n of each row)
    a     = Attention_within_rows(h W_qkv^T + b_qkv)                  (16 heads, scale 1/sqrt(d_head))
    h'    = LN_1(a W_o^T + b_o + h)
    h_out = LN_2(GELU(h' W_1^T + b_1) W_2^T + b_2 + h')

with position ids ``padding_idx + 1 + t`` for token t of a row, exactly what RoBERTa derives
for an unpadded row, and GELU the exact (erf) form RoBERTa's ``hidden_act = "gelu"`` names.
Dropout is the identity (eval). The prompt is added to the embedding output (after LN_emb), as
:class:`~replication.prompt.soft_prompt.PromptInjector` does for the padded layouts. Packed and
padded forwards agree to ~1e-7 relative in fp32 (tested at 1e-5 on the CPU).

``compile=True`` compiles the layer's work after attention (output projection, residual,
LayerNorm, FFN, GELU, residual, LayerNorm) with ``torch.compile``: one graph for all layers and,
with a symbolic token count (``dynamic=True``), for every forward of every split, so it compiles
once per process (the element-wise kernels it generates fuse the residual additions, LayerNorms
and GELU; in the default ``compile_mode`` the matrix products stay cuBLAS calls). Attention
itself stays an eager call to the flash kernel. ``compile_mode="max-autotune-no-cudagraphs"``
lets the compiler choose generated (Triton) matrix-product kernels where they are faster, and
those can take the bias and GELU into their epilogue.

``gelu="tanh"`` (a named deviation from RoBERTa, for throughput; not a study option): the FFN's
GELU in its tanh form, ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, which on CUDA is
the epilogue of the FFN's first matrix product (cuBLASLt's ``GELU_BIAS``, through
``torch._addmm_activation``): the bias and GELU cost no pass of their own over the (T, 4 D)
activations. The tanh form differs from the exact one by at most 4.7e-4 in absolute value per
activation (at x = 2.70). On the CPU the same tanh form is computed unfused. It needs torch >= 2.4
(``torch.get_autocast_dtype``, to cast under autocast as autocast casts a linear layer).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["PackedEncoder", "PackedForward", "pack_rows", "flash_varlen"]


def flash_varlen():
    """PyTorch's variable-length flash attention as ``f(q, k, v, cu, max_len)``, or None if torch lacks it.

    ``torch.nn.attention.varlen.varlen_attn`` (torch >= 2.10), else the ``aten`` op it wraps
    (present since torch 2.2 for CUDA builds).
    """
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        varlen_attn = None
    if varlen_attn is not None:
        return lambda q, k, v, cu, max_len: varlen_attn(q, k, v, cu, cu, max_len, max_len)
    op = getattr(torch.ops.aten, "_flash_attention_forward", None)
    if op is None:
        return None
    return lambda q, k, v, cu, max_len: op(q, k, v, cu, cu, max_len, max_len, 0.0, False, False)[0]


@dataclass
class PackedForward:
    """One packed forward pass: rows ``(candidate, example)`` concatenated without padding.

    ``ids``/``pos`` (T,) token and position ids; ``cu`` (rows+1,) int32 row boundaries;
    ``max_len`` the longest row; ``runs``: consecutive rows of equal length as (length, first
    token, rows), each a contiguous (rows * length) slice of the packed tokens (the SDPA path
    attends within each as one dense batch; rows sorted by length make one run per length).
    ``cand``/``ex``: each row's
    candidate and example (length-sorted index), ``lengths`` their lengths, ``mask_rows`` (rows,)
    the packed index of each row's ``<mask>``, ``labels`` (rows,), ``prompt_rows``
    (rows * n_prompt,) packed indices of the prompt slots (row-major), or None.
    """

    ids: torch.Tensor
    pos: torch.Tensor
    cu: torch.Tensor
    max_len: int
    runs: list[tuple[int, int, int]]
    cand: torch.Tensor
    ex: np.ndarray
    lengths: np.ndarray
    mask_rows: torch.Tensor
    labels: torch.Tensor
    prompt_rows: torch.Tensor | None

    @property
    def rows(self) -> int:
        return int(self.ex.size)

    @property
    def tokens(self) -> int:
        return int(self.ids.shape[0])


def pack_rows(seqs, cand, ex, mask_pos, labels, *, n_prompt: int, padding_idx: int, max_len: int,
              device) -> PackedForward:
    """Concatenate the rows' id sequences ``seqs`` into one :class:`PackedForward`.

    ``max_len``: the longest row the model's position table allows (``ValueError`` beyond).
    """
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    if lengths.size == 0 or lengths.max() > max_len:
        raise ValueError(f"rows must be 1..{max_len} tokens long (the model's positions); got lengths "
                         f"{lengths.min(initial=0)}..{lengths.max(initial=0)} in {lengths.size} rows")
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs])
    pos = padding_idx + 1 + (np.arange(ids.size) - np.repeat(starts, lengths))   # position within the row
    prompt_rows = None
    if n_prompt:
        prompt_rows = torch.as_tensor((starts[:, None] + 1 + np.arange(n_prompt)[None]).ravel(), device=device)
    return PackedForward(
        ids=torch.as_tensor(ids, device=device), pos=torch.as_tensor(pos, device=device),
        cu=torch.as_tensor(np.r_[0, np.cumsum(lengths)], dtype=torch.int32, device=device),
        max_len=int(lengths.max()), runs=_runs(lengths, starts), ex=np.asarray(ex), lengths=lengths,
        cand=torch.as_tensor(np.asarray(cand, dtype=np.int64), device=device),
        mask_rows=torch.as_tensor(starts + np.asarray(mask_pos, dtype=np.int64), device=device),
        labels=torch.as_tensor(np.asarray(labels, dtype=np.int64), device=device), prompt_rows=prompt_rows)


ATTENTIONS = ("varlen", "sdpa")
GELUS = ("exact", "tanh")


def _ffn_in_tanh(h, w_in, b_in):
    """GELU_tanh(h W_1^T + b_1); on CUDA one cuBLASLt product with the bias and GELU in its epilogue."""
    if not h.is_cuda:
        return F.gelu(F.linear(h, w_in, b_in), approximate="tanh")
    if torch.is_autocast_enabled("cuda"):  # autocast has no rule for this op: cast as it does for linear
        dtype = torch.get_autocast_dtype("cuda")
        h, w_in, b_in = h.to(dtype), w_in.to(dtype), b_in.to(dtype)
    # cuBLASLt's GELU epilogue is the tanh form (torch's fallback without cuBLASLt applies the same form)
    return torch._addmm_activation(b_in, h, w_in.t(), use_gelu=True)


def _runs(lengths: np.ndarray, starts: np.ndarray) -> list[tuple[int, int, int]]:
    """(length, first token, rows) of each maximal run of consecutive rows of equal length."""
    first = np.flatnonzero(np.r_[True, lengths[1:] != lengths[:-1]])
    count = np.diff(np.r_[first, lengths.size])
    return [(int(lengths[f]), int(starts[f]), int(c)) for f, c in zip(first, count)]


def _layer_rest(a, h, wo, bo, g1, b1, w_in, b_in, w_out, b_out, g2, b2, eps: float, gelu: str = "exact"):
    """Everything of a layer after attention: output projection, residual, LN, FFN with GELU, residual, LN."""
    h = F.layer_norm(F.linear(a, wo, bo) + h, (h.shape[-1],), g1, b1, eps)
    up = F.gelu(F.linear(h, w_in, b_in)) if gelu == "exact" else _ffn_in_tanh(h, w_in, b_in)
    return F.layer_norm(F.linear(up, w_out, b_out) + h, (h.shape[-1],), g2, b2, eps)


class PackedEncoder:
    """RoBERTa's encoder over :class:`PackedForward` inputs, with the weights of ``model`` (see the module docstring).

    Parameters
    ----------
    model : a transformers RoBERTa model (``RobertaForMaskedLM`` or its ``base_model``), eval mode.
    attention : ``"varlen"``: variable-length flash attention where it runs (CUDA, fp16/bf16),
        else the ``"sdpa"`` path: each run of equal-length rows through SDPA as a dense batch.
    compile : ``torch.compile`` the per-layer work after attention (symbolic token count).
    compile_mode : ``torch.compile``'s ``mode`` (None: its default); needs ``compile``.
    gelu : ``"exact"`` (RoBERTa's) or ``"tanh"`` (fused into the product on CUDA; see the module docstring).
    """

    def __init__(self, model, *, attention: str = "varlen", compile: bool = False, compile_mode: str | None = None,
                 gelu: str = "exact"):
        if attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}; got {attention!r}")
        if gelu not in GELUS:
            raise ValueError(f"gelu must be one of {', '.join(GELUS)}; got {gelu!r}")
        if gelu == "tanh" and not hasattr(torch, "get_autocast_dtype"):
            raise ValueError(f"gelu='tanh' needs torch >= 2.4 (torch.get_autocast_dtype); "
                             f"this is torch {torch.__version__}")
        if compile_mode is not None and not compile:
            raise ValueError(f"compile_mode={compile_mode!r} needs compile=True")
        base = getattr(model, "base_model", model)
        cfg = base.config
        if getattr(cfg, "hidden_act", None) != "gelu":
            raise ValueError(f"the packed encoder implements RoBERTa's exact GELU; this model's hidden_act is "
                             f"{getattr(cfg, 'hidden_act', None)!r} (use prompt.attention: sdpa)")
        if getattr(cfg, "position_embedding_type", "absolute") != "absolute" or getattr(cfg, "is_decoder", False):
            raise ValueError("the packed encoder needs absolute positions and an encoder-only model "
                             "(use prompt.attention: sdpa)")
        emb = base.embeddings
        self.emb = emb
        self.padding_idx = int(emb.padding_idx)
        self.max_positions = int(emb.position_embeddings.num_embeddings)
        self.heads = int(cfg.num_attention_heads)
        self.hidden = int(cfg.hidden_size)
        self.layers = []
        with torch.no_grad():
            for layer in base.encoder.layer:
                att, out = layer.attention, layer.output
                q, k, v = att.self.query, att.self.key, att.self.value
                self.layers.append(dict(
                    w_qkv=torch.cat([q.weight, k.weight, v.weight]), b_qkv=torch.cat([q.bias, k.bias, v.bias]),
                    wo=att.output.dense.weight, bo=att.output.dense.bias, g1=att.output.LayerNorm.weight,
                    b1=att.output.LayerNorm.bias, w_in=layer.intermediate.dense.weight,
                    b_in=layer.intermediate.dense.bias, w_out=out.dense.weight, b_out=out.dense.bias,
                    g2=out.LayerNorm.weight, b2=out.LayerNorm.bias, eps=float(out.LayerNorm.eps)))
        self._flash = flash_varlen()
        self.attention = attention
        self.gelu = gelu
        self._rest = torch.compile(_layer_rest, dynamic=True, mode=compile_mode) if compile else _layer_rest

    @property
    def max_len(self) -> int:
        """The longest row the position table allows."""
        return self.max_positions - self.padding_idx - 1

    def embed(self, fw: PackedForward, add: torch.Tensor | None) -> torch.Tensor:
        """LN_emb(word + position + type-0 embeddings) (T, D), plus ``add`` at ``fw.prompt_rows``."""
        e = self.emb
        x = e.word_embeddings(fw.ids) + e.position_embeddings(fw.pos) + e.token_type_embeddings.weight[0]
        h = e.LayerNorm(x)
        if add is not None:
            h = h.index_add(0, fw.prompt_rows, add.to(h.dtype))
        return h

    def attend(self, qkv: torch.Tensor, fw: PackedForward) -> torch.Tensor:
        """Attention within each row: (T, 3 D) projections -> (T, D)."""
        T = qkv.shape[0]
        q, k, v = qkv.view(T, 3, self.heads, -1).unbind(1)               # (T, H, d_head) each
        if self.attention == "varlen" and self._flash is not None and qkv.is_cuda and \
                qkv.dtype in (torch.float16, torch.bfloat16):
            return self._flash(q, k, v, fw.cu, fw.max_len).reshape(T, self.hidden)
        out = []
        for length, t0, rows in fw.runs:                  # a run of equal-length rows is one dense batch (a view)
            def batch(t, length=length, t0=t0, rows=rows):
                return t[t0: t0 + rows * length].view(rows, length, self.heads, -1).transpose(1, 2)
            o = F.scaled_dot_product_attention(batch(q), batch(k), batch(v))     # (rows, H, length, d_head)
            out.append(o.transpose(1, 2).reshape(rows * length, self.hidden))
        return out[0] if len(out) == 1 else torch.cat(out)

    def __call__(self, fw: PackedForward, add: torch.Tensor | None = None) -> torch.Tensor:
        """Final hidden states (T, D) of the packed tokens; ``add`` (rows * n_prompt, D): the prompts, row-major."""
        h = self.embed(fw, add)
        for w in self.layers:
            a = self.attend(F.linear(h, w["w_qkv"], w["b_qkv"]), fw)
            h = self._rest(a, h, w["wo"], w["bo"], w["g1"], w["b1"], w["w_in"], w["b_in"], w["w_out"], w["b_out"],
                           w["g2"], w["b2"], w["eps"], self.gelu)
        return h
