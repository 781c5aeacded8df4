"""BBT's soft prompt: a fixed random projection and a forward hook that adds the prompt.

The math (Sun et al., "Black-Box Tuning for Language-Model-as-a-Service", ICML 2022; the SABO
paper, Section 5.2, follows it):

- The optimizer searches z in R^d. A fixed matrix A in R^{d x (n D)} (n = 50 prompt tokens,
  D = the backbone's hidden size) maps it to the prompt p = A^T z, reshaped to (n, D).
- A's entries are i.i.d. N(0, s^2) with s = sigma_e / sqrt(d), where sigma_e is the population
  standard deviation (ddof = 0) of all entries of the backbone's word-embedding matrix. Then for
  z ~ N(0, I_d) each prompt entry has standard deviation ~ sigma_e: the prompt lives on the
  scale of the token embeddings.
- The prompt is ADDED to the OUTPUT of the embedding module (word + position (+ token type)
  embeddings after LayerNorm and dropout) at sequence positions 1..n, i.e. on top of the n
  placeholder tokens written right after ``<s>``. Passing ``inputs_embeds`` instead is not
  equivalent (it would go through position embeddings and LayerNorm), so we use a forward hook
  on the embedding module (:class:`PromptInjector`).

A population is evaluated in one forward pass by giving each group of rows its own prompt:
rows [c B, (c + 1) B) get candidate c's prompt when the batch holds B examples per candidate.
"""
from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["PromptProjection", "PromptInjector", "embedding_std", "embedding_module"]

N_PROMPT_TOKENS = 50


def embedding_module(model) -> torch.nn.Module:
    """The embedding module of a Hugging Face encoder (``model.roberta.embeddings`` for RoBERTa)."""
    base = getattr(model, "base_model", model)
    emb = getattr(base, "embeddings", None)
    if emb is None:
        raise TypeError(f"{type(model).__name__} has no base_model.embeddings module to hook")
    return emb


def embedding_std(weight: torch.Tensor, block_rows: int = 4096) -> float:
    """Population standard deviation (ddof = 0) of all entries of ``weight``, computed in float64.

    Two passes over row blocks, so no float64 copy of a large embedding matrix is made at once.
    """
    w = weight.detach()
    n = w.numel()
    total = sum(float(b.double().sum()) for b in w.split(block_rows))
    mean = total / n
    sq = sum(float(((b.double() - mean) ** 2).sum()) for b in w.split(block_rows))
    return math.sqrt(sq / n)


class PromptProjection:
    """The fixed projection A in R^{d x (n D)}: z -> p = A^T z reshaped to (n, D).

    Build with :meth:`from_model`. ``A`` is drawn on the CPU from a ``torch.Generator`` seeded
    with ``seed`` (the same A on every machine and device) and then kept on ``device`` in float32.

    Attributes
    ----------
    A : torch.Tensor, shape (d, n * D), float32
    sigma_e : float
        Population std of the word-embedding entries.
    std : float
        sigma_e / sqrt(d), the standard deviation A was drawn with.
    """

    def __init__(self, A: torch.Tensor, n_tokens: int, hidden_size: int, *, sigma_e: float | None = None,
                 seed: int | None = None):
        if A.dim() != 2 or A.shape[1] != n_tokens * hidden_size:
            raise ValueError(f"A must have shape (d, {n_tokens} * {hidden_size}), got {tuple(A.shape)}")
        self.A = A
        self.n_tokens = int(n_tokens)
        self.hidden_size = int(hidden_size)
        self.sigma_e = sigma_e
        self.seed = seed

    @property
    def dim(self) -> int:
        return int(self.A.shape[0])

    @property
    def std(self) -> float:
        return float("nan") if self.sigma_e is None else self.sigma_e / math.sqrt(self.dim)

    @property
    def device(self) -> torch.device:
        return self.A.device

    @classmethod
    def from_model(cls, model, dim: int, *, n_tokens: int = N_PROMPT_TOKENS, seed: int = 0, device=None,
                   sigma_e: float | None = None) -> PromptProjection:
        """A with entries N(0, (sigma_e / sqrt(dim))^2), sigma_e from the model's word embeddings.

        ``device`` defaults to the model's device. ``sigma_e`` may be given to skip computing it.
        """
        if int(dim) < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        emb = model.get_input_embeddings().weight
        if sigma_e is None:
            sigma_e = embedding_std(emb)
        hidden = int(emb.shape[1])
        device = emb.device if device is None else torch.device(device)
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        A = torch.randn(int(dim), n_tokens * hidden, generator=gen, dtype=torch.float32)
        A.mul_(sigma_e / math.sqrt(dim))
        return cls(A.to(device), n_tokens, hidden, sigma_e=float(sigma_e), seed=int(seed))

    def prompts(self, Z) -> torch.Tensor:
        """Prompts for the rows of ``Z`` (shape (n, d) or (d,)): a float32 tensor (n, n_tokens, D) on A's device.

        Z may be a numpy array (float64 is cast to float32: A is float32) or a torch tensor.
        """
        Z = torch.as_tensor(np.asarray(Z) if not isinstance(Z, torch.Tensor) else Z)
        Z = Z.to(device=self.A.device, dtype=torch.float32)
        if Z.dim() == 1:
            Z = Z[None]
        if Z.dim() != 2 or Z.shape[1] != self.dim:
            raise ValueError(f"Z must have shape (n, {self.dim}), got {tuple(Z.shape)}")
        return (Z @ self.A).view(Z.shape[0], self.n_tokens, self.hidden_size)


class PromptInjector:
    """Forward hook that adds prompts to the embedding output at positions ``offset .. offset + n - 1``.

    Use as a context manager (installs on enter, removes on exit) and set the prompts of the
    next forward with :meth:`set`::

        with PromptInjector(embedding_module(model)) as inj:
            inj.set(prompts, rows_per_candidate=B)   # prompts: (C, n, D); batch has C * B rows
            model(input_ids=ids, attention_mask=mask)

    Row r of the batch gets ``prompts[r // B]`` with ``rows_per_candidate=B``, or
    ``prompts[row_index[r]]`` with ``row_index``; with neither, the batch must have exactly C
    rows and row r gets ``prompts[r]``. With no prompts set (or after :meth:`clear`) the hook
    leaves the output untouched. The output is copied before the addition (not modified in
    place), so the unhooked embedding output is never altered.
    """

    def __init__(self, module: torch.nn.Module, *, offset: int = 1):
        self.module = module
        self.offset = int(offset)
        self._handle = None
        self._prompts: torch.Tensor | None = None
        self._rows_per_candidate: int | None = None
        self._row_index: torch.Tensor | None = None

    # -- installation -------------------------------------------------------------------------
    def install(self) -> PromptInjector:
        if self._handle is None:
            self._handle = self.module.register_forward_hook(self)
        return self

    def remove(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def __enter__(self) -> PromptInjector:
        return self.install()

    def __exit__(self, *exc) -> None:
        self.clear()
        self.remove()

    # -- prompts ------------------------------------------------------------------------------
    def set(self, prompts: torch.Tensor, *, rows_per_candidate: int | None = None,
            row_index: torch.Tensor | None = None) -> None:
        """Prompts (C, n, D) for the next forward passes; see the class docstring for the row mapping."""
        if prompts.dim() != 3:
            raise ValueError(f"prompts must have shape (C, n, D), got {tuple(prompts.shape)}")
        if rows_per_candidate is not None and row_index is not None:
            raise ValueError("give rows_per_candidate or row_index, not both")
        self._prompts = prompts
        self._rows_per_candidate = None if rows_per_candidate is None else int(rows_per_candidate)
        self._row_index = row_index

    def clear(self) -> None:
        self._prompts = None
        self._rows_per_candidate = None
        self._row_index = None

    def __call__(self, module, args, output):
        p = self._prompts
        if p is None:
            return None
        if not isinstance(output, torch.Tensor):
            raise TypeError(f"expected the embedding module to return a tensor, got {type(output).__name__}")
        rows, length, hidden = output.shape
        n = p.shape[1]
        lo, hi = self.offset, self.offset + n
        if hi > length:
            raise ValueError(f"sequence length {length} is too short for {n} prompt tokens at offset {lo}")
        p = p.to(dtype=output.dtype)
        out = output.clone()
        if self._row_index is not None:
            if self._row_index.shape[0] != rows:
                raise ValueError(f"row_index has {self._row_index.shape[0]} entries for a batch of {rows} rows")
            out[:, lo:hi] += p[self._row_index.to(p.device)]
        else:
            per = 1 if self._rows_per_candidate is None else self._rows_per_candidate
            if p.shape[0] * per != rows:
                raise ValueError(f"{p.shape[0]} prompts x {per} rows each != batch of {rows} rows")
            # broadcast candidate c's prompt over its block of rows without materialising copies
            out.view(p.shape[0], per, length, hidden)[:, :, lo:hi] += p[:, None]
        return out
