"""RoBERTa's encoder on packed rows: no padding, variable-length attention (``prompt.attention: varlen``).

The batched objective (:mod:`replication.prompt.objective`) evaluates n candidates x B examples
= n B rows. Padded layouts process ``rows x longest`` tokens per forward; packing concatenates
the rows' real tokens into one sequence of T tokens per forward, so every linear layer,
LayerNorm and GELU touches real tokens only and a forward can hold a fixed number of tokens
whatever the rows' lengths (large, uniform matrix products). Attention must then stay inside
each row: the rows' boundaries ``cu`` (cumulative lengths, ``cu[0] = 0``, ``cu[-1] = T``) go
to PyTorch's variable-length flash attention (``torch.nn.attention.varlen.varlen_attn``, or
the ``aten._flash_attention_forward`` op it wraps on torch versions without the module), which
attends within each segment ``[cu[s], cu[s+1])``. On the CPU, or in fp32 (flash kernels take
fp16/bf16 only), rows of equal length are gathered into a batch and go through
``scaled_dot_product_attention`` instead: the same segments, the same math.

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
and GELU; the matrix products stay cuBLAS calls). Attention itself stays an eager call to the
flash kernel.
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
    ``max_len`` the longest row; ``groups`` for the SDPA path: (length, token index
    (n_rows_of_that_length * length,)) per distinct row length. ``cand``/``ex``: each row's
    candidate and example (length-sorted index), ``lengths`` their lengths, ``mask_rows`` (rows,)
    the packed index of each row's ``<mask>``, ``labels`` (rows,), ``prompt_rows``
    (rows * n_prompt,) packed indices of the prompt slots (row-major), or None.
    """

    ids: torch.Tensor
    pos: torch.Tensor
    cu: torch.Tensor
    max_len: int
    groups: list
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
    groups = []
    for length in np.unique(lengths):
        idx = (starts[lengths == length][:, None] + np.arange(length)[None]).ravel()
        groups.append((int(length), torch.as_tensor(idx, device=device)))
    prompt_rows = None
    if n_prompt:
        prompt_rows = torch.as_tensor((starts[:, None] + 1 + np.arange(n_prompt)[None]).ravel(), device=device)
    return PackedForward(
        ids=torch.as_tensor(ids, device=device), pos=torch.as_tensor(pos, device=device),
        cu=torch.as_tensor(np.r_[0, np.cumsum(lengths)], dtype=torch.int32, device=device),
        max_len=int(lengths.max()), groups=groups, ex=np.asarray(ex), lengths=lengths,
        cand=torch.as_tensor(np.asarray(cand, dtype=np.int64), device=device),
        mask_rows=torch.as_tensor(starts + np.asarray(mask_pos, dtype=np.int64), device=device),
        labels=torch.as_tensor(np.asarray(labels, dtype=np.int64), device=device), prompt_rows=prompt_rows)


def _layer_rest(a, h, wo, bo, g1, b1, w_in, b_in, w_out, b_out, g2, b2, eps: float):
    """Everything of a layer after attention: output projection, residual, LN, FFN with exact GELU, residual, LN."""
    h = F.layer_norm(F.linear(a, wo, bo) + h, (h.shape[-1],), g1, b1, eps)
    f = F.linear(F.gelu(F.linear(h, w_in, b_in)), w_out, b_out)
    return F.layer_norm(f + h, (h.shape[-1],), g2, b2, eps)


class PackedEncoder:
    """RoBERTa's encoder over :class:`PackedForward` inputs, with the weights of ``model`` (see the module docstring).

    Parameters
    ----------
    model : a transformers RoBERTa model (``RobertaForMaskedLM`` or its ``base_model``), eval mode.
    compile : ``torch.compile`` the per-layer work after attention (static shapes).
    """

    def __init__(self, model, *, compile: bool = False):
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
        self._rest = torch.compile(_layer_rest, dynamic=True) if compile else _layer_rest

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
        if self._flash is not None and qkv.is_cuda and qkv.dtype in (torch.float16, torch.bfloat16):
            return self._flash(q, k, v, fw.cu, fw.max_len).reshape(T, self.hidden)
        out = torch.empty_like(q)
        for length, idx in fw.groups:                                    # rows of one length form a batch
            def batch(t, length=length, idx=idx):
                return t.index_select(0, idx).view(-1, length, self.heads, t.shape[-1]).transpose(1, 2)
            o = F.scaled_dot_product_attention(batch(q), batch(k), batch(v))
            out.index_copy_(0, idx, o.transpose(1, 2).reshape(-1, self.heads, q.shape[-1]))
        return out.reshape(T, self.hidden)

    def __call__(self, fw: PackedForward, add: torch.Tensor | None = None) -> torch.Tensor:
        """Final hidden states (T, D) of the packed tokens; ``add`` (rows * n_prompt, D): the prompts, row-major."""
        h = self.embed(fw, add)
        for w in self.layers:
            a = self.attend(F.linear(h, w["w_qkv"], w["b_qkv"]), fw)
            h = self._rest(a, h, w["wo"], w["bo"], w["g1"], w["b1"], w["w_in"], w["b_in"], w["w_out"], w["b_out"],
                           w["g2"], w["b2"], w["eps"])
        return h
