"""Test fixtures: a tiny RoBERTa masked LM and a byte-level BPE tokenizer, built offline in seconds.

Nothing is downloaded: the tokenizer is trained with the ``tokenizers`` library on a few
sentences and wrapped in ``PreTrainedTokenizerFast`` with RoBERTa's special tokens
(``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<mask>`` 4); the model is a
``RobertaForMaskedLM`` with random weights from a small ``RobertaConfig``.
"""
from __future__ import annotations

import functools

import numpy as np

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]

POSITIVE = [
    "a great movie with a wonderful cast", "the film was great and moving", "wonderful acting , great story",
    "I loved this movie", "a fine and funny film", "great fun from start to end", "the best film of the year",
    "a moving and beautiful story", "funny , warm and great", "a wonderful and clever film",
]
NEGATIVE = [
    "a bad movie with a dull cast", "the film was bad and boring", "terrible acting , bad story",
    "I hated this movie", "a dull and silly film", "bad from start to end", "the worst film of the year",
    "a boring and ugly story", "silly , cold and bad", "a terrible and stupid film",
]
TEMPLATE = "{P} . {sentence} . It was <mask> ."
LABEL_WORDS = ["bad", "great"]
N_PROMPT = 50


@functools.cache
def tiny_tokenizer():
    """A byte-level BPE tokenizer (~300 tokens) with RoBERTa's special tokens, trained here."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    corpus = POSITIVE + NEGATIVE + ["It was great .", "It was bad .", "News : sports world business tech"]
    bpe = ByteLevelBPETokenizer()  # add_prefix_space=False, as RoBERTa's tokenizer
    bpe.train_from_iterator(corpus * 5, vocab_size=320, min_frequency=2, special_tokens=SPECIALS,
                            show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>",
                                  pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    assert ([tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id, tok.mask_token_id]
            == [0, 1, 2, 3, 4])
    return tok


def tiny_config(vocab_size: int, *, initializer_range: float = 0.02):
    from transformers import RobertaConfig

    return RobertaConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                         bos_token_id=0, eos_token_id=2, initializer_range=initializer_range)


def tiny_model(*, seed: int = 0, initializer_range: float = 0.02):
    """A random-weight ``RobertaForMaskedLM`` (hidden 32, 2 layers, 2 heads), fp32, eval mode, CPU."""
    from replication.prompt.model import random_backbone

    tok = tiny_tokenizer()
    return random_backbone(tiny_config(len(tok), initializer_range=initializer_range), "cpu", seed=seed)


def placeholder_ids(n: int = N_PROMPT) -> list[int]:
    """50 ordinary (byte) token ids for the prompt slots; BBT's 1000..1049 do not exist in a tiny vocabulary."""
    return list(range(100, 100 + n))


def sentiment_examples(n_per_class: int = 8, seed: int = 0):
    """(sentences, labels) -- label 1 = positive ("great"), 0 = negative ("bad"), shuffled with ``seed``."""
    sents = POSITIVE[:n_per_class] + NEGATIVE[:n_per_class]
    labels = [1] * n_per_class + [0] * n_per_class
    order = np.random.default_rng(seed).permutation(len(sents))
    return [sents[i] for i in order], np.asarray(labels)[order]

