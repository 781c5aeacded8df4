"""The black-box prompt-tuning objective (BBT; the SABO paper, Section 5.2), evaluated per population.

For a candidate z in R^d, prompt p(z) = A^T z (see :mod:`replication.prompt.soft_prompt`) and a
few-shot training set {(x_i, y_i)}_{i=1..B}, the objective is

    F(z) = (1/B) sum_i  -log softmax( l_i(z)[w_1], ..., l_i(z)[w_K] )_{y_i}

where l_i(z) in R^V are the masked-LM logits at the ``<mask>`` position of input x_i with p(z)
added to the embedding output at positions 1..50, and w_1..w_K are the label words' token ids:
the softmax is restricted to the label words (BBT's ``ce`` loss). Predictions are
argmax_k l_i(z)[w_k]; the metric is accuracy, or F1 with label 1 as the positive class (MRPC).

BBT evaluates candidates one at a time, each as one forward pass over the whole training set.
:meth:`PromptObjective.losses` evaluates a whole population of n candidates in batched forward
passes over n x B rows -- row (c, i) is example i with candidate c's prompt. By default the rows
are grouped into length buckets (:func:`length_buckets`): every forward holds whole candidates
on examples of one length (or of near-equal lengths where a length has too few examples for a
forward of its own), so it pads little or not at all, and a forward without padding gets no
attention mask (PyTorch SDPA then picks its fastest kernel). ``bucketing=False`` keeps the
earlier layout (blocks of length-sorted examples cut into chunks of ``chunk_rows`` rows, always
masked). :meth:`PromptObjective.loss_loop` is the per-candidate reference. Both run under
``torch.inference_mode``; the precision follows the model: bf16 weights compute in bf16, fp32
weights in fp32 on CPU and under bf16 autocast on CUDA. The MLM head runs in fp32 at the
``<mask>`` rows, for the label words only. In fp32 batched and reference losses agree to ~1e-7
relative (tested at 1e-5, bucketing included); in bf16 different batch shapes select different
kernels, and they agree to ~2e-4 relative (measured on an H200 with a RoBERTa-large-shaped
model, bf16 autocast).

Inputs. Each encoded input is ``<s>``, 50 prompt placeholder tokens (positions 1..50), the
template's text with exactly one ``<mask>``, ``</s>``. :func:`encode_template` builds them from a
template such as ``"{P} . {sentence} . It was <mask> ."`` (``{P}`` marks the prompt, ``<mask>``
is the tokenizer's mask token, other ``{fields}`` come from the examples); :func:`encode_texts`
takes already-filled strings with the literal ``{P}`` and ``<mask>``; :func:`encode_ids` takes
pre-tokenised id sequences. Inputs longer than ``max_length`` tokens (512, as BBT) are dropped
and counted (``EncodedSplit.n_dropped``).

Deviation from BBT's data code, on purpose: BBT writes the placeholders as the text
``tokenizer.decode(range(1000, 1050))`` and re-tokenises the whole string, which need not give
exactly 50 tokens; we insert the placeholder ids (default 1000..1049) directly, so positions
1..50 always hold exactly the 50 prompt slots.
"""
from __future__ import annotations

import contextlib
import string
from dataclasses import dataclass, field

import numpy as np
import torch

from .packed import PackedEncoder, PackedForward, pack_rows
from .soft_prompt import N_PROMPT_TOKENS, PromptInjector, PromptProjection, embedding_module

__all__ = ["EncodedSplit", "PromptObjective", "encode_ids", "encode_template", "encode_texts",
           "label_word_ids", "f1_score", "accuracy", "DEFAULT_PLACEHOLDER_OFFSET", "length_buckets",
           "padding_fraction"]

DEFAULT_PLACEHOLDER_OFFSET = 1000  # BBT's placeholder token ids: 1000 .. 1000 + n - 1
PROMPT_MARKER = "{P}"

# Default rows per forward: about this many (padded) tokens per forward pass. On a GPU large
# chunks keep the matmuls efficient (RoBERTa-large at 64k tokens: ~3 GB of activations in bf16);
# on a CPU the gain saturates early and big chunks only cost memory.
DEFAULT_CHUNK_TOKENS = {"cuda": 65536, "cpu": 8192}
# Default bucket size: length buckets (see length_buckets) holding fewer padded tokens than this
# take in the next length; 4096 keeps a single example of a population of 100 in a bucket of its
# own and puts one candidate's whole few-shot training set into a single forward.
DEFAULT_BUCKET_TOKENS = 4096
# Default example block (layout with bucketing=False): rows are grouped by blocks of this many
# length-sorted examples, so a chunk pads only to the longest example of its blocks (Yelp-like
# lengths: ~95% real tokens instead of ~78% when every row is padded to the longest of 32 examples).
DEFAULT_EXAMPLE_BLOCK = 8


# -- label words and metrics ------------------------------------------------------------------
def label_word_ids(tokenizer, words) -> list[int]:
    """Token id of each label word as BBT takes it: tokenised WITHOUT a leading space, first BPE token.

    For RoBERTa, ``"great"`` gives the id of ``great`` (not ``Ġgreat``); a word that splits into
    several BPE tokens contributes its first. Distinct words must give distinct ids.
    """
    ids = []
    for w in words:
        toks = tokenizer.encode(w, add_special_tokens=False)
        if not toks:
            raise ValueError(f"label word {w!r} tokenises to nothing")
        ids.append(int(toks[0]))
    if len(set(ids)) != len(ids):
        raise ValueError(f"label words {list(words)} share first tokens {ids}; the task would be ill-posed")
    return ids


_words_to_ids = label_word_ids  # PromptObjective's argument of the same name shadows the function


def accuracy(y_true, y_pred) -> float:
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    return float(np.mean(y_true == y_pred)) if y_true.size else float("nan")


def f1_score(y_true, y_pred, positive: int = 1) -> float:
    """Binary F1 = 2 TP / (2 TP + FP + FN) with ``positive`` as the positive class; 0 when undefined."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    tp = int(np.sum((y_pred == positive) & (y_true == positive)))
    fp = int(np.sum((y_pred == positive) & (y_true != positive)))
    fn = int(np.sum((y_pred != positive) & (y_true == positive)))
    denom = 2 * tp + fp + fn
    return 2.0 * tp / denom if denom else 0.0


METRICS = {"accuracy": accuracy, "f1": f1_score}


# -- encoding ---------------------------------------------------------------------------------
@dataclass
class EncodedSplit:
    """Encoded inputs of one split: id sequences, labels, and what was dropped.

    ``input_ids[j]`` is a 1-D int64 array ``<s> P_1..P_n ... <mask> ... </s>``; ``labels[j]`` its
    label; ``kept[j]`` its index in the original example list; ``dropped`` the indices of the
    examples dropped for being longer than ``max_length`` tokens.
    """

    input_ids: list
    labels: np.ndarray
    mask_positions: np.ndarray
    kept: np.ndarray
    dropped: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    n_prompt_tokens: int = N_PROMPT_TOKENS
    max_length: int = 512

    @property
    def n_dropped(self) -> int:
        return int(self.dropped.size)

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(x) for x in self.input_ids], dtype=np.int64)


def _placeholders(tokenizer, n_prompt_tokens, placeholder_ids):
    if placeholder_ids is None:
        placeholder_ids = list(range(DEFAULT_PLACEHOLDER_OFFSET, DEFAULT_PLACEHOLDER_OFFSET + n_prompt_tokens))
        if placeholder_ids and placeholder_ids[-1] >= len(tokenizer):
            raise ValueError(f"the tokenizer has {len(tokenizer)} tokens, too few for BBT's placeholder ids "
                             f"{DEFAULT_PLACEHOLDER_OFFSET}..{placeholder_ids[-1]}; pass placeholder_ids")
    placeholder_ids = [int(i) for i in placeholder_ids]
    if len(placeholder_ids) != n_prompt_tokens:
        raise ValueError(f"need {n_prompt_tokens} placeholder ids, got {len(placeholder_ids)}")
    return placeholder_ids


def encode_ids(sequences, labels, *, mask_token_id: int, n_prompt_tokens: int = N_PROMPT_TOKENS,
               max_length: int = 512) -> EncodedSplit:
    """Wrap pre-tokenised sequences (each ``<s>``, n placeholders, text with one mask, ``</s>``).

    Checks that each sequence has exactly one ``mask_token_id``, after position ``n_prompt_tokens``;
    drops sequences longer than ``max_length`` (counted in ``n_dropped``).
    """
    labels = np.asarray(labels, dtype=np.int64)
    if len(sequences) != labels.size:
        raise ValueError(f"{len(sequences)} inputs but {labels.size} labels")
    ids_out, masks, kept, dropped = [], [], [], []
    for j, seq in enumerate(sequences):
        seq = np.asarray(seq, dtype=np.int64).ravel()
        pos = np.flatnonzero(seq == mask_token_id)
        if pos.size != 1:
            raise ValueError(f"input {j} has {pos.size} mask tokens; exactly one is required")
        if pos[0] <= n_prompt_tokens:
            raise ValueError(f"input {j}: the mask is at position {pos[0]}, "
                             f"inside the prompt slots 1..{n_prompt_tokens}")
        if seq.size > max_length:
            dropped.append(j)
            continue
        ids_out.append(seq)
        masks.append(int(pos[0]))
        kept.append(j)
    return EncodedSplit(ids_out, labels[np.asarray(kept, dtype=np.int64)], np.asarray(masks, dtype=np.int64),
                        np.asarray(kept, dtype=np.int64), np.asarray(dropped, dtype=np.int64),
                        n_prompt_tokens, max_length)


def _encode_pieces(tokenizer, pieces, placeholder_ids):
    """Token ids for a list of pieces: ("text", str) | ("P",) | ("mask",), wrapped in <s> ... </s>.

    Each run of text between markers is tokenised on its own (no special tokens). Whitespace
    right before ``<mask>`` and at the very end is stripped: RoBERTa's mask token absorbs the
    space to its left (``lstrip``), so ``"It was <mask>"`` tokenises as ``It was`` + ``<mask>``.
    """
    if sum(p[0] == "P" for p in pieces) != 1 or pieces[0][0] != "P":
        raise ValueError("the prompt marker {P} must appear exactly once, at the start of the template")
    if sum(p[0] == "mask" for p in pieces) != 1:
        raise ValueError(f"the template must contain the mask token {tokenizer.mask_token!r} exactly once")
    ids = [tokenizer.bos_token_id]
    for k, piece in enumerate(pieces):
        if piece[0] == "P":
            ids.extend(placeholder_ids)
        elif piece[0] == "mask":
            ids.append(tokenizer.mask_token_id)
        else:
            text = piece[1]
            if k + 1 == len(pieces) or pieces[k + 1][0] == "mask":
                text = text.rstrip()
            if text:
                ids.extend(tokenizer.encode(text, add_special_tokens=False))
    ids.append(tokenizer.eos_token_id)
    return ids


def _merge_text(pieces):
    out = []
    for p in pieces:
        if p[0] == "text" and out and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + p[1])
        elif p[0] != "text" or p[1]:
            out.append(p)
    return out


def _split_literal(text, mask_token):
    pieces = []
    for k, part in enumerate(text.split(mask_token)):
        if k:
            pieces.append(("mask",))
        pieces.append(("text", part))
    return pieces


def encode_template(tokenizer, template: str, examples, labels, *, n_prompt_tokens: int = N_PROMPT_TOKENS,
                    placeholder_ids=None, max_length: int = 512) -> EncodedSplit:
    """Encode examples through a template such as ``"{P} . {sentence} . It was <mask> ."``.

    ``{P}`` (first, exactly once) becomes the n placeholder ids; the tokenizer's mask token
    written literally in the template becomes ``<mask>``; every other ``{field}`` is filled from
    the example (a dict, or a plain string when the template has a single field). Field values
    are inserted verbatim (braces in the data are not format fields); a special-token string such
    as ``<mask>`` inside the data is still turned into that token by the tokenizer, and the
    resulting second mask raises ``ValueError``.
    """
    placeholder_ids = _placeholders(tokenizer, n_prompt_tokens, placeholder_ids)
    parsed = list(string.Formatter().parse(template))
    fields = [f for _, f, _, _ in parsed if f is not None and f != "P"]
    seqs = []
    for ex in examples:
        if isinstance(ex, str):
            if len(set(fields)) != 1:
                raise ValueError(f"a plain-string example needs a template with one field, got {fields}")
            ex = {fields[0]: ex}
        pieces = []
        for literal, fname, spec, _ in parsed:
            pieces.extend(_split_literal(literal, tokenizer.mask_token))
            if fname == "P":
                pieces.append(("P",))
            elif fname is not None:
                pieces.append(("text", format(ex[fname], spec or "")))
        seqs.append(_encode_pieces(tokenizer, _merge_text(pieces), placeholder_ids))
    return encode_ids(seqs, labels, mask_token_id=tokenizer.mask_token_id, n_prompt_tokens=n_prompt_tokens,
                      max_length=max_length)


def encode_texts(tokenizer, texts, labels, *, n_prompt_tokens: int = N_PROMPT_TOKENS, placeholder_ids=None,
                 max_length: int = 512) -> EncodedSplit:
    """Encode already-filled texts holding the literal ``{P}`` (first) and the mask token once each."""
    placeholder_ids = _placeholders(tokenizer, n_prompt_tokens, placeholder_ids)
    seqs = []
    for t in texts:
        pieces = []
        for k, part in enumerate(t.split(PROMPT_MARKER)):
            if k:
                pieces.append(("P",))
            pieces.extend(_split_literal(part, tokenizer.mask_token))
        seqs.append(_encode_pieces(tokenizer, _merge_text(pieces), placeholder_ids))
    return encode_ids(seqs, labels, mask_token_id=tokenizer.mask_token_id, n_prompt_tokens=n_prompt_tokens,
                      max_length=max_length)


# -- the objective ----------------------------------------------------------------------------
def padding_fraction(row_lengths) -> float:
    """Share of the processed tokens that are padding, for forwards given by their rows' real lengths.

    ``row_lengths``: one sequence of real lengths per forward pass; each forward pads its rows to
    its longest, so it processes ``rows x max`` tokens of which ``sum`` are real. Returns
    ``1 - sum(real) / sum(processed)`` (0 for no padding), or 0.0 for no forward at all.
    """
    real = padded = 0
    for lengths in row_lengths:
        a = np.asarray(lengths, dtype=np.int64).ravel()
        if a.size:
            real += int(a.sum())
            padded += int(a.size) * int(a.max())
    return 1.0 - real / padded if padded else 0.0


def length_buckets(lengths, n: int, *, min_tokens: int, max_pad: float) -> list[tuple[int, int]]:
    """Buckets ``[start, end)`` of consecutive examples of ascending ``lengths``, for n candidates each.

    Examples of equal length form a group; a group is appended to the open bucket while the bucket
    holds fewer than ``min_tokens`` padded tokens (``n x examples x longest``: too little work for
    a forward of its own), or while the bucket with the group keeps a padding share of at most
    ``max_pad``. ``max_pad = 0`` and ``min_tokens = 0``: one bucket per distinct length (no padding).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and np.any(np.diff(lengths) < 0):
        raise ValueError("lengths must be sorted ascending")
    starts = np.flatnonzero(np.r_[True, np.diff(lengths) != 0]) if lengths.size else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], lengths.size].astype(np.int64)
    buckets: list[list[int]] = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        if buckets:
            b0, b1 = buckets[-1]
            small = n * (b1 - b0) * int(lengths[b1 - 1]) < min_tokens
            pad = 1.0 - float(lengths[b0:e].sum()) / ((e - b0) * int(lengths[e - 1]))
            if small or pad <= max_pad:
                buckets[-1][1] = e
                continue
        buckets.append([s, e])
    return [(b0, b1) for b0, b1 in buckets]


def _near_equal(total: int, parts: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges cutting ``range(total)`` into ``parts`` pieces whose sizes differ by at most 1."""
    edges = [total * k // parts for k in range(parts + 1)]
    return [(edges[k], edges[k + 1]) for k in range(parts)]


@dataclass
class _Forward:
    """One forward pass: its device inputs and which (candidate, example) each row is.

    Either candidates ``c0 .. c1 - 1`` each on the same ``per`` examples (rows candidate-major:
    the prompt is broadcast, losses summed per candidate), or an explicit per-row candidate index
    ``cand`` (the general layout of ``bucketing=False``).
    """

    ids: torch.Tensor                  # (rows, L) token ids
    att: torch.Tensor | None           # (rows, L) attention mask; None when no row is padded
    mask_pos: torch.Tensor             # (rows,) position of <mask>
    labels: torch.Tensor               # (rows,) class of each row
    arange: torch.Tensor               # (rows,) 0..rows-1
    ex: np.ndarray                     # (rows,) example index (length-sorted order) of each row
    lengths: np.ndarray                # (rows,) real length of each row
    c0: int = 0
    c1: int = 1
    cand: torch.Tensor | None = None   # (rows,) candidate of each row, general layout only

    @property
    def rows(self) -> int:
        return int(self.ex.size)

    @property
    def length(self) -> int:
        return int(self.ids.shape[1])


class _Batch:
    """A split moved to the device: padded ids, attention mask, mask positions, labels (sorted by length).

    ``plans`` caches the forward passes of each layout (:meth:`PromptObjective._plan`).
    """

    def __init__(self, split: EncodedSplit, pad_id: int, device):
        lengths = split.lengths
        # sort by length so that a chunk holding only some examples pads less
        order = np.argsort(lengths, kind="stable")
        self.order = order
        self.lengths = lengths[order]
        n, lmax = len(order), int(lengths.max())
        ids = np.full((n, lmax), pad_id, dtype=np.int64)
        att = np.zeros((n, lmax), dtype=np.int64)
        for r, j in enumerate(order):
            ids[r, : lengths[j]] = split.input_ids[j]
            att[r, : lengths[j]] = 1
        self.ids = torch.as_tensor(ids, device=device)
        self.attention = torch.as_tensor(att, device=device)
        self.mask_pos_np = split.mask_positions[order]
        self.mask_pos = torch.as_tensor(self.mask_pos_np, device=device)
        self.labels_np = split.labels[order]
        self.labels = torch.as_tensor(self.labels_np, device=device)
        self.seqs = [np.asarray(split.input_ids[j]) for j in order]   # host copies, for packed layouts
        self.n = n
        self.plans: dict = {}


class PromptObjective:
    """F(z) for a population: ``losses(Z)`` -> (n,) float64; see the module docstring for the math.

    Parameters
    ----------
    model : transformers masked LM (RoBERTa), in eval mode (set here: dropout would make F random).
        Its weight dtype and attention implementation (``attn_implementation``: ``"sdpa"``,
        transformers' default, or ``"eager"``) are used as they are.
    tokenizer : its tokenizer (special-token ids; encoding of texts)
    texts_or_encoded : EncodedSplit, or a list of token-id sequences (see :func:`encode_ids`), or a
        list of filled texts holding ``{P}`` and the mask token (see :func:`encode_texts`)
    labels : class indices (0..K-1); may be None with an EncodedSplit (its labels are used)
    label_word_ids : K token ids, or K words (converted with :func:`label_word_ids`)
    projection : :class:`PromptProjection` (A, on the model's device), or None for the zero-shot
        objective: inputs encoded without prompt slots, nothing added; it evaluates only ``z=None``
        (:meth:`scores`, :meth:`evaluate`) and has no ``losses``
    metric : ``"accuracy"`` or ``"f1"`` (binary, positive class = label 1)
    max_length : inputs longer than this many tokens are dropped (``n_dropped``)
    chunk_rows : at most this many rows (candidate x example) per forward pass. Default: about
        ``chunk_tokens`` padded tokens per forward (with bucketing: per bucket's length).
    chunk_tokens : the default's token budget: 65536 on CUDA, 8192 on CPU.
    bucketing : True (default): rows are grouped into length buckets (:func:`length_buckets`:
        examples of equal length, merged with their neighbours only while a bucket is too small
        for a forward of its own -- ``bucket_tokens`` -- or while its padding share stays at most
        ``bucket_pad``); each bucket's rows are cut into near-equal forwards of whole candidates,
        each padded only to its own longest row, and a forward with no padded row gets no
        attention mask (SDPA can then use its fastest kernel). False: the earlier layout, below.
    bucket_tokens : see ``bucketing``; default 4096 (a single example of a population of 100
        forms a bucket of its own; one candidate's whole training set shares a forward).
    bucket_pad : see ``bucketing``; default 0 (no padding beyond what ``bucket_tokens`` forces).
    packed : False (default): the padded layouts above, through the model's own forward. True:
        rows are packed without any padding, up to ``chunk_tokens`` real tokens per forward
        (near-equal forwards of whole rows), and run through
        :class:`~replication.prompt.packed.PackedEncoder` (RoBERTa's layers on the model's
        weights, variable-length flash attention on CUDA); ``bucketing`` is then unused.
    compile : with ``packed``: ``torch.compile`` the packed encoder's per-layer work (once per
        process, symbolic token count). Without ``packed`` compile the model itself
        (:func:`~replication.prompt.model.compile_encoder`).
    encoder_options : with ``packed``: more keyword arguments of
        :class:`~replication.prompt.packed.PackedEncoder` (``attention``, ``compile_mode``,
        ``gelu``; the benchmark's variants, not study options).
    example_block : layout with ``bucketing=False``: rows are ordered by blocks of this many
        length-sorted examples, then by candidate, then by example, and cut into consecutive
        chunks of ``chunk_rows``, each padded to its longest row and always given the attention
        mask. None: all examples in one block (plain candidate-major order).
    placeholder_ids : for texts: the n placeholder token ids (default BBT's 1000..1049)
    autocast : bf16 autocast; default on for CUDA with fp32 weights, off otherwise (fp32 on CPU;
        bf16 weights compute in bf16)

    Notes
    -----
    The MLM head (dense, GELU, LayerNorm, decoder) runs in fp32 on the ``<mask>`` rows only, and
    its decoder only for the K label words: the same logits as ``model(...).logits[..., label
    ids]``, without the V-word projection and without bf16 rounding of the logits.
    Each call evaluates the whole training set (BBT: one batch per evaluation). Counters:
    ``n_calls`` (calls of ``losses``/``loss_loop``), ``n_evaluations`` (candidates evaluated).
    The object is callable: ``objective(Z) == objective.losses(Z)``, the vectorised form
    (``sabo.minimize(objective, x0, vectorized=True)``).
    """

    def __init__(self, model, tokenizer, texts_or_encoded, labels, label_word_ids, projection: PromptProjection | None,
                 *, metric: str = "accuracy", max_length: int = 512, chunk_rows: int | None = None,
                 chunk_tokens: int | None = None, bucketing: bool = True, bucket_tokens: int = DEFAULT_BUCKET_TOKENS,
                 bucket_pad: float = 0.0, example_block: int | None = DEFAULT_EXAMPLE_BLOCK, placeholder_ids=None,
                 autocast: bool | None = None, packed: bool = False, compile: bool = False,
                 encoder_options: dict | None = None):
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.projection = projection
        self.metric = metric
        self.max_length = int(max_length)
        # projection None: the zero-shot objective (templates without prompt slots, nothing added)
        self.device = next(model.parameters()).device if projection is None else projection.device
        self.n_prompt_tokens = 0 if projection is None else projection.n_tokens
        self._placeholder_ids = placeholder_ids
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token")
        self.pad_id = int(tokenizer.pad_token_id)
        words = list(label_word_ids)
        if words and isinstance(words[0], str):
            words = _words_to_ids(tokenizer, words)
        self.label_ids = torch.as_tensor([int(w) for w in words], device=self.device)
        self.train = self.encode(texts_or_encoded, labels)
        if len(self.train) == 0:
            raise ValueError("no training examples left (all longer than max_length?)")
        if self.train.labels.min() < 0 or self.train.labels.max() >= len(words):
            raise ValueError(f"labels must lie in 0..{len(words) - 1}")
        self._batch = _Batch(self.train, self.pad_id, self.device)
        self.example_block = self._batch.n if example_block is None else max(1, int(example_block))
        self.chunk_tokens = int(chunk_tokens or DEFAULT_CHUNK_TOKENS["cuda" if self.device.type == "cuda" else "cpu"])
        self._explicit_chunk = chunk_rows is not None
        if chunk_rows is None:
            chunk_rows = max(1, self.chunk_tokens // int(self._batch.lengths.max()))
        if int(chunk_rows) < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        self.chunk_rows = int(chunk_rows)
        self.bucketing = bool(bucketing)
        self.bucket_tokens = int(bucket_tokens)
        self.bucket_pad = float(bucket_pad)
        if self.bucket_tokens < 0 or not 0.0 <= self.bucket_pad < 1.0:
            raise ValueError(f"need bucket_tokens >= 0 and 0 <= bucket_pad < 1, got {bucket_tokens}, {bucket_pad}")
        weights_dtype = next(model.parameters()).dtype
        self.autocast = (self.device.type == "cuda" and weights_dtype == torch.float32) if autocast is None \
            else bool(autocast)
        self._base = model.base_model
        # RoBERTa's MLM head (dense, GELU, LayerNorm, decoder), applied only at the mask positions
        self._head = getattr(model, "lm_head", None)
        if self._head is None:
            raise TypeError(f"{type(model).__name__} has no lm_head; a RoBERTa-style masked LM is required")
        self._head32 = self._label_head_weights(self._head, self.label_ids)
        self._injector = PromptInjector(embedding_module(model), offset=1)
        self.packed = bool(packed)
        self._compile_packed = bool(compile) and self.packed
        if compile and not self.packed:
            raise ValueError("compile=True needs packed=True here; compile a padded model with "
                             "replication.prompt.model.compile_encoder")
        if encoder_options and not self.packed:
            raise ValueError(f"encoder_options need packed=True; got {encoder_options}")
        self._packed = PackedEncoder(model, compile=self._compile_packed, **(encoder_options or {})) \
            if self.packed else None
        self._split_batches: dict[int, tuple[EncodedSplit, _Batch]] = {}
        self.n_calls = 0
        self.n_evaluations = 0

    # -- data ---------------------------------------------------------------------------------
    @property
    def n_dropped(self) -> int:
        return self.train.n_dropped

    @property
    def n_examples(self) -> int:
        return len(self.train)

    def encode(self, texts_or_encoded, labels=None) -> EncodedSplit:
        """An :class:`EncodedSplit` from any accepted input form (see the class docstring)."""
        if isinstance(texts_or_encoded, EncodedSplit):
            if labels is not None and not np.array_equal(np.asarray(labels)[texts_or_encoded.kept],
                                                         texts_or_encoded.labels):
                raise ValueError("labels disagree with the EncodedSplit's labels")
            if texts_or_encoded.n_prompt_tokens != self.n_prompt_tokens:
                raise ValueError("the split's prompt length differs from the projection's")
            return texts_or_encoded
        if labels is None:
            raise ValueError("labels are required unless an EncodedSplit is given")
        items = list(texts_or_encoded)
        if items and isinstance(items[0], str):
            return encode_texts(self.tokenizer, items, labels, n_prompt_tokens=self.n_prompt_tokens,
                                placeholder_ids=self._placeholder_ids, max_length=self.max_length)
        return encode_ids(items, labels, mask_token_id=self.tokenizer.mask_token_id,
                          n_prompt_tokens=self.n_prompt_tokens, max_length=self.max_length)

    # -- layouts: which rows go into which forward pass -------------------------------------------
    def _rows_limit(self, length: int) -> int:
        return self.chunk_rows if self._explicit_chunk else max(1, self.chunk_tokens // max(1, int(length)))

    def row_layout(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(candidate, example) of each row of a generation of n candidates, in processing order.

        With bucketing: bucket by bucket (:func:`length_buckets`), candidate-major within each.
        Without: blocks of ``example_block`` length-sorted examples; within a block, candidate-major.
        Packed: example by example in length order, all candidates of each.
        """
        if self.packed:
            fws = self._plan(self._batch, n, "packed")
            return np.concatenate([f.cand.cpu().numpy() for f in fws]), np.concatenate([f.ex for f in fws])
        if self.bucketing:
            fws = self._plan(self._batch, n, "bucket")
            return (np.concatenate([np.repeat(np.arange(f.c0, f.c1), f.rows // (f.c1 - f.c0)) for f in fws]),
                    np.concatenate([f.ex for f in fws]))
        return self._block_layout(n)

    def _block_layout(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        B, b = self._batch.n, self.example_block
        cand, ex = [], []
        for e0 in range(0, B, b):
            e = np.arange(e0, min(B, e0 + b))
            cand.append(np.repeat(np.arange(n), e.size))
            ex.append(np.tile(e, n))
        return np.concatenate(cand), np.concatenate(ex)

    def _forward_of(self, batch: _Batch, ex: np.ndarray, *, c0: int = 0, c1: int = 1, cand=None,
                    mask: bool | None = None) -> _Forward:
        """The device inputs of rows = examples ``ex`` (sorted positions), padded to their longest.

        ``mask``: pass the attention mask (True), never (False: rows must be unpadded), or only
        when some row is padded (None).
        """
        lengths = batch.lengths[ex]
        length = int(lengths.max())
        ex_t = torch.as_tensor(ex, device=self.device)
        padded = bool(np.any(lengths != length))
        if mask is False and padded:
            raise ValueError("rows of different lengths need an attention mask")
        return _Forward(ids=batch.ids.index_select(0, ex_t)[:, :length].contiguous(),
                        att=batch.attention.index_select(0, ex_t)[:, :length].contiguous()
                        if (mask or (mask is None and padded)) else None,
                        mask_pos=batch.mask_pos.index_select(0, ex_t), labels=batch.labels.index_select(0, ex_t),
                        arange=torch.arange(len(ex), device=self.device), ex=np.asarray(ex), lengths=lengths,
                        c0=int(c0), c1=int(c1),
                        cand=None if cand is None else torch.as_tensor(cand, device=self.device))

    def _plan(self, batch: _Batch, n: int, kind: str) -> list[_Forward]:
        """The forward passes for n candidates on ``batch``, built once per (n, kind) and cached.

        ``kind``: ``"bucket"`` (length buckets), ``"block"`` (the ``bucketing=False`` layout) or
        ``"loop"`` (one candidate: its examples in length order, chunks of ``chunk_rows``, with mask).
        """
        key = (int(n), kind)
        if key in batch.plans:
            return batch.plans[key]
        fws = []
        if kind == "bucket":
            for b0, b1 in length_buckets(batch.lengths, n, min_tokens=self.bucket_tokens, max_pad=self.bucket_pad):
                limit = self._rows_limit(int(batch.lengths[b1 - 1]))
                for e0, e1 in _near_equal(b1 - b0, -(-(b1 - b0) // limit)):       # example parts <= limit rows
                    ex = np.arange(b0 + e0, b0 + e1)
                    per_fwd = max(1, self._rows_limit(int(batch.lengths[ex[-1]])) // ex.size)  # whole candidates
                    for c0, c1 in _near_equal(n, -(-n // per_fwd)):
                        fws.append(self._forward_of(batch, np.tile(ex, c1 - c0), c0=c0, c1=c1))
        elif kind == "block":
            cand, ex = self._block_layout(n)
            for r0 in range(0, len(ex), self.chunk_rows):
                fws.append(self._forward_of(batch, ex[r0: r0 + self.chunk_rows], cand=cand[r0: r0 + self.chunk_rows],
                                            mask=True))
        elif kind == "packed":
            fws = self._packed_plan(batch, n)
        elif kind == "loop":
            ex = np.arange(batch.n)
            for r0 in range(0, batch.n, self.chunk_rows):
                fws.append(self._forward_of(batch, ex[r0: r0 + self.chunk_rows], mask=True))
        else:
            raise ValueError(f"unknown plan kind {kind!r}")
        if len(batch.plans) >= 8:  # a few population sizes at most; drop the oldest
            batch.plans.pop(next(iter(batch.plans)))
        batch.plans[key] = fws
        return fws

    def _packed_plan(self, batch: _Batch, n: int) -> list[PackedForward]:
        """Rows packed into near-equal forwards of about ``chunk_tokens`` tokens (whole rows).

        Rows in length order (the examples are sorted by length; all n candidates of an example
        together), so that a forward holds one run of rows per distinct length (the SDPA path's
        dense batches, see :class:`~replication.prompt.packed.PackedForward`).
        """
        cand = np.tile(np.arange(n), batch.n)
        ex = np.repeat(np.arange(batch.n), n)
        lengths = batch.lengths[ex]
        ends = np.cumsum(lengths)
        parts = max(1, -(-int(ends[-1]) // self.chunk_tokens))
        # cut after the row whose end is nearest below each k/parts of the tokens (whole rows)
        cuts = np.unique(np.r_[0, np.searchsorted(ends, ends[-1] * np.arange(1, parts) / parts, side="right"),
                               ex.size])
        spans = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        enc = self._packed
        return [pack_rows([batch.seqs[e] for e in ex[a:b]], cand[a:b], ex[a:b], batch.mask_pos_np[ex[a:b]],
                          batch.labels_np[ex[a:b]], n_prompt=self.n_prompt_tokens, padding_idx=enc.padding_idx,
                          max_len=enc.max_len, device=self.device) for a, b in spans]

    def _plan_kind(self) -> str:
        return "packed" if self.packed else "bucket" if self.bucketing else "block"

    def forward_shapes(self, n: int, *, loop: bool = False) -> list[tuple[int, int]]:
        """(rows, padded length) of every forward pass that ``losses`` (or ``loss_loop``) makes for n candidates.

        Packed forwards have no common length: each of their rows is listed as a forward of one
        row of its length, which gives the same token and attention counts.
        """
        if loop:
            return [(f.rows, f.length) for f in self._plan(self._batch, 1, "loop")] * n
        fws = self._plan(self._batch, n, self._plan_kind())
        if self.packed:
            return [(1, int(length)) for f in fws for length in f.lengths]
        return [(f.rows, f.length) for f in fws]

    def padding_fraction(self, n: int, *, loop: bool = False) -> float:
        """Share of padding among the tokens processed by ``losses`` (``loss_loop``) for n candidates."""
        if self.packed and not loop:  # packed rows are never padded
            return 0.0
        fws = self._plan(self._batch, 1, "loop") if loop else self._plan(self._batch, n, self._plan_kind())
        return padding_fraction([f.lengths for f in fws])

    # -- forward passes -----------------------------------------------------------------------
    @staticmethod
    def _label_head_weights(head, label_ids):
        """fp32 copies of the MLM head's weights, the decoder's rows for the label words only; None if not RoBERTa's."""
        parts = [getattr(head, a, None) for a in ("dense", "layer_norm", "decoder")]
        if any(p is None for p in parts) or not isinstance(parts[1], torch.nn.LayerNorm):
            return None
        dense, ln, dec = parts
        bias = dec.bias if getattr(dec, "bias", None) is not None else getattr(head, "bias", None)

        def f32(t):
            return None if t is None else t.detach().to(torch.float32).clone()

        with torch.no_grad():
            return {"dense_w": f32(dense.weight), "dense_b": f32(dense.bias), "ln_w": f32(ln.weight),
                    "ln_b": f32(ln.bias), "ln_eps": float(ln.eps), "ln_shape": tuple(ln.normalized_shape),
                    "dec_w": f32(dec.weight.index_select(0, label_ids)),
                    "dec_b": None if bias is None else f32(bias.index_select(0, label_ids))}

    def _label_head(self, at_mask: torch.Tensor) -> torch.Tensor:
        """Label-word logits (rows, K) float32 from the final hidden states at ``<mask>`` (rows, D)."""
        F = torch.nn.functional
        h = self._head32
        if h is None:  # not RoBERTa's head: run it as it is, then keep the label words
            return self._head(at_mask).index_select(1, self.label_ids).float()
        with torch.autocast(device_type=self.device.type, enabled=False):
            x = F.linear(at_mask.float(), h["dense_w"], h["dense_b"])
            x = F.gelu(x)
            x = F.layer_norm(x, h["ln_shape"], h["ln_w"], h["ln_b"], h["ln_eps"])
            return F.linear(x, h["dec_w"], h["dec_b"])

    def _context(self):
        stack = contextlib.ExitStack()
        stack.enter_context(torch.inference_mode())
        if self.autocast:
            stack.enter_context(torch.autocast(device_type=self.device.type, dtype=torch.bfloat16))
        stack.enter_context(self._injector)
        return stack

    def _label_logits(self, fw: _Forward | PackedForward, prompts: torch.Tensor | None) -> torch.Tensor:
        """Label-word logits (rows, K) float32 of one forward. Must run inside :meth:`_context`."""
        if isinstance(fw, PackedForward):
            add = None if prompts is None else prompts.index_select(0, fw.cand).reshape(-1, prompts.shape[-1])
            return self._label_head(self._packed(fw, add).index_select(0, fw.mask_rows))
        if prompts is None:
            self._injector.clear()
        elif fw.cand is not None:
            self._injector.set(prompts, row_index=fw.cand)
        else:
            self._injector.set(prompts[fw.c0: fw.c1], rows_per_candidate=fw.rows // (fw.c1 - fw.c0))
        hidden = self._base(input_ids=fw.ids, attention_mask=fw.att)[0]          # (rows, L, D)
        return self._label_head(hidden[fw.arange, fw.mask_pos])

    def _losses_of(self, batch: _Batch, prompts, fws, n_cand: int, c_offset: int = 0) -> torch.Tensor:
        """Summed CE per candidate (n_cand,) float64 on the device; forwards ``fws``, candidates shifted by c_offset."""
        total = torch.zeros(n_cand, dtype=torch.float64, device=self.device)
        for fw in fws:
            ce = torch.nn.functional.cross_entropy(self._label_logits(fw, prompts), fw.labels, reduction="none")
            if fw.cand is not None:
                total.index_add_(0, fw.cand, ce.double())
            else:
                c0 = fw.c0 + c_offset
                total[c0: c0 + fw.c1 - fw.c0] += ce.double().view(fw.c1 - fw.c0, -1).sum(1)
        return total

    def _prompts(self, Z) -> tuple[torch.Tensor, int]:
        if self.projection is None:
            raise ValueError("this objective has no projection (zero-shot): it takes no candidates; use z=None")
        if isinstance(Z, torch.Tensor):
            Zc = Z.detach()
        else:
            Zc = torch.as_tensor(np.asarray(Z, dtype=np.float64))
        if Zc.dim() == 1:
            Zc = Zc[None]
        if Zc.dim() != 2 or Zc.shape[1] != self.projection.dim:
            raise ValueError(f"Z must have shape (n, {self.projection.dim}), got {tuple(Zc.shape)}")
        if not bool(torch.isfinite(Zc).all()):
            raise ValueError("Z contains non-finite values")
        return self.projection.prompts(Zc), int(Zc.shape[0])

    def losses(self, Z) -> np.ndarray:
        """F(z) for each row of Z (n, d): float64 (n,), the population in batched forward passes.

        The forwards are queued without a host-device synchronisation; the only one is the copy
        of the n losses back at the end.
        """
        prompts, n = self._prompts(Z)
        fws = self._plan(self._batch, n, self._plan_kind())
        with self._context():
            total = self._losses_of(self._batch, prompts, fws, n)
        out = (total / self._batch.n).cpu().numpy()
        self.n_calls += 1
        self.n_evaluations += n
        return out

    __call__ = losses

    def loss_loop(self, Z) -> np.ndarray:
        """Reference for :meth:`losses`: one candidate at a time (as BBT), its examples in chunks of
        ``chunk_rows`` in length order, always with the attention mask."""
        prompts, n = self._prompts(Z)
        fws = self._plan(self._batch, 1, "loop")
        out = np.empty(n)
        with self._context():
            for c in range(n):
                out[c] = float(self._losses_of(self._batch, prompts[c: c + 1], fws, 1)[0]) / self._batch.n
        self.n_calls += 1
        self.n_evaluations += n
        return out

    def _split_batch(self, split: EncodedSplit | None) -> _Batch:
        """The device copy of ``split`` (default: the training set), built once per split object."""
        if split is None:
            return self._batch
        key = id(split)
        if key not in self._split_batches:  # the split is kept with its batch, so its id stays unique
            self._split_batches[key] = (split, _Batch(self.encode(split), self.pad_id, self.device))
        return self._split_batches[key][1]

    def split_logits(self, z, split: EncodedSplit | None = None) -> tuple[torch.Tensor, np.ndarray]:
        """Label-word logits (B, K) float32 of one candidate z on ``split`` (default: training set), and the labels.

        Rows are in the split's order. ``z=None`` adds no prompt (the zero-shot objective, or the
        placeholders' own embeddings when there is a projection).
        """
        batch = self._split_batch(split)
        prompts = None
        if z is not None:
            prompts, n = self._prompts(z)
            if n != 1:
                raise ValueError("split_logits/predict/evaluate take one candidate z of shape (d,)")
        fws = self._plan(batch, 1, "packed" if self.packed else "bucket" if self.bucketing else "loop")
        with self._context():
            chunks = [self._label_logits(fw, prompts) for fw in fws]
        key = ("split-order", len(fws))
        if key not in batch.plans:  # row r of the concatenation -> its index in the split's order
            batch.plans[key] = torch.as_tensor(batch.order[np.concatenate([f.ex for f in fws])], device=self.device)
        logits = torch.empty((batch.n, len(self.label_ids)), dtype=torch.float32, device=self.device)
        logits[batch.plans[key]] = torch.cat(chunks)   # back to the split's order
        true = np.empty(batch.n, dtype=np.int64)
        true[batch.order] = batch.labels_np
        return logits, true

    def predict(self, z, split: EncodedSplit | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(predicted labels, true labels) of one candidate z on ``split`` (default: the training set)."""
        logits, true = self.split_logits(z, split)
        return logits.argmax(1).cpu().numpy(), true

    def evaluate(self, z, split: EncodedSplit | None = None) -> float:
        """Accuracy, or F1 (positive class = label 1), of candidate z on ``split`` (default: training set)."""
        pred, true = self.predict(z, split)
        return METRICS[self.metric](true, pred)

    def scores(self, z, split: EncodedSplit | None = None) -> dict[str, float]:
        """``{"loss": mean CE, "metric": accuracy or F1}`` of one candidate z on ``split`` (one pass)."""
        logits, true = self.split_logits(z, split)
        labels = torch.as_tensor(true, device=self.device)
        loss = torch.nn.functional.cross_entropy(logits, labels).item()
        return {"loss": float(loss), "metric": METRICS[self.metric](true, logits.argmax(1).cpu().numpy())}
