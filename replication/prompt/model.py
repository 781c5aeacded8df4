"""The backbone: a masked language model (RoBERTa-large in BBT and the SABO paper, Section 5.2).

:func:`load_backbone` loads a tokenizer and an ``AutoModelForMaskedLM`` from a hub name (through
the Hugging Face cache), or from a local directory, and fails with :class:`BackboneUnavailable`
-- naming the model and how to supply it -- when neither is possible (no network and nothing
cached). :func:`random_backbone` builds a model of a given shape with random weights, for
benchmarks and tests that must not depend on downloaded weights.

Works with transformers 4.40+ and 5.x and torch >= 2.2.
"""
from __future__ import annotations

import os

import torch

from replication.errors import ResourceUnavailable, one_line

from .options import MODEL_ATTENTIONS

__all__ = ["BackboneUnavailable", "load_backbone", "random_backbone", "roberta_large_config", "set_attention",
           "compile_encoder", "MODEL_ATTENTIONS"]


class BackboneUnavailable(ResourceUnavailable, RuntimeError):
    """The backbone could not be loaded: not a local directory and not in the Hugging Face cache."""


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _cache_dir_from_env() -> str | None:
    """The hub cache the environment asks for *now*.

    huggingface_hub reads HF_HOME / HF_HUB_CACHE once, at import; reading them again here makes
    a change of environment after import (a test, a notebook) take effect.
    """
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


def _missing_model_errors() -> tuple[type[BaseException], ...]:
    """Exceptions from ``from_pretrained`` that mean "the files are not reachable"."""
    errors: list[type[BaseException]] = [OSError]  # transformers wraps most hub failures in OSError
    try:  # the hub's own errors are not OSError in every huggingface_hub version
        from huggingface_hub import errors as hub_errors

        for name in ("LocalEntryNotFoundError", "RepositoryNotFoundError", "EntryNotFoundError",
                     "HfHubHTTPError", "OfflineModeIsEnabled"):
            if hasattr(hub_errors, name):
                errors.append(getattr(hub_errors, name))
    except ImportError:  # pragma: no cover - very old huggingface_hub
        pass
    return tuple(errors)


def _dtype_kwarg(dtype) -> dict:
    """``dtype=`` for transformers >= 4.56 (5.x deprecates ``torch_dtype``), ``torch_dtype=`` before."""
    if dtype is None:
        return {}
    import transformers

    major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def set_attention(model, implementation: str | None):
    """Switch ``model`` to the attention ``implementation`` (``"sdpa"`` or ``"eager"``); None: leave it."""
    if implementation is None:
        return model
    if implementation not in MODEL_ATTENTIONS:
        raise ValueError(f"attention must be one of {MODEL_ATTENTIONS}, got {implementation!r}")
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(implementation)
    else:  # pragma: no cover - transformers < 4.48
        model.config._attn_implementation = implementation
    if model.config._attn_implementation != implementation:
        raise RuntimeError(f"transformers kept attention {model.config._attn_implementation!r}, "
                           f"{implementation!r} was asked for")
    return model


def compile_encoder(model, *, dynamic: bool | None = True, mode: str | None = None):
    """``torch.compile`` the transformer layers of ``model`` in place (``nn.Module.compile``).

    Only the encoder: the embedding module stays eager, so the prompt hook
    (:class:`~replication.prompt.soft_prompt.PromptInjector`) keeps working, and the module tree
    (parameter names, ``save_pretrained``) is unchanged. Compilation happens at the first forward,
    once per process: ``dynamic=True`` (the default) compiles one graph with symbolic batch size
    and length for every bucket shape (plus one for forwards with an attention mask if masked and
    unmasked forwards mix); static shapes (``dynamic=False``) would compile once per distinct
    bucket shape (tens of shapes, each tens of seconds at RoBERTa-large's size).
    """
    encoder = model.base_model.encoder
    encoder.compile(dynamic=dynamic, mode=mode)
    return model


def load_backbone(name_or_path: str, *, device="cpu", dtype=None, cache_dir: str | None = None,
                  local_files_only: bool | None = None, attn_implementation: str | None = None):
    """Load ``(model, tokenizer)``: ``AutoModelForMaskedLM`` in eval mode on ``device``, and ``AutoTokenizer``.

    Parameters
    ----------
    name_or_path : str
        A hub name (``"roberta-large"``), resolved through the Hugging Face cache, or a local
        directory written by ``save_pretrained``.
    device : str or torch.device
    dtype : torch.dtype, optional
        Weight dtype; default: as stored (fp32 for roberta-large). With fp32 weights the objective
        applies bf16 autocast on CUDA itself; bf16 weights compute in bf16.
    attn_implementation : str, optional
        ``"sdpa"`` or ``"eager"`` (:data:`MODEL_ATTENTIONS`); default: transformers' default (sdpa).
    cache_dir : str, optional
        Default: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else the library default.
    local_files_only : bool, optional
        Default: true when ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set (read at call
        time) or ``name_or_path`` is a directory; then nothing is fetched from the network.

    Raises
    ------
    BackboneUnavailable
        When the files cannot be found (no network and nothing cached, a wrong name or path). The
        message names the model and how to supply it.
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    offline = _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE")
    is_dir = os.path.isdir(name_or_path)
    if not is_dir and _looks_like_a_path(name_or_path):  # not a hub name: the hub's advice would mislead
        what = "is not a directory" if os.path.exists(name_or_path) else "does not exist"
        raise BackboneUnavailable(f"Backbone {name_or_path!r} is unavailable: that path {what}; a local model is a "
                                  "directory written by save_pretrained (a hub name has no leading '/', './', "
                                  "'../' or '~', e.g. 'roberta-large')")
    if local_files_only is None:
        local_files_only = offline or is_dir
    if cache_dir is None and not is_dir:
        cache_dir = _cache_dir_from_env()
    kwargs = {"local_files_only": local_files_only}
    if cache_dir is not None:
        kwargs["cache_dir"] = cache_dir
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, **kwargs)
        model = AutoModelForMaskedLM.from_pretrained(name_or_path, **kwargs, **_dtype_kwarg(dtype))
    except _missing_model_errors() as exc:
        raise BackboneUnavailable(_unavailable_message(name_or_path, is_dir, cache_dir, offline,
                                                       local_files_only, exc)) from exc
    set_attention(model, attn_implementation)
    model.to(device)
    model.eval()  # dropout off: the objective must be a deterministic function of z
    return model, tokenizer


def _looks_like_a_path(name: str) -> bool:
    """Whether ``name`` can only mean a file-system path (a hub id is ``name`` or ``org/name``)."""
    return os.path.isabs(name) or name.startswith(("./", "../", "~", ".\\", "..\\")) or name in (".", "..")


def _unavailable_message(name, is_dir, cache_dir, offline, local_files_only, exc) -> str:
    hf_home = os.environ.get("HF_HOME")
    where = (f"the local directory {name!r} does not hold a loadable model" if is_dir else
             f"{name!r} is not a local directory and is not in the Hugging Face cache "
             f"({cache_dir or 'library default cache'}; HF_HOME={hf_home or '(unset)'})")
    net = ("network access is disabled (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE or local_files_only)"
           if (offline or local_files_only) else "the hub could not be reached")
    return (  # one line: the command line prints it as one error
        f"Backbone {name!r} is unavailable: {where}; {net}. To supply it, either (a) on a machine with network "
        f"access, download it once into a Hugging Face home: HF_HOME=/path/to/hf python -c \"from transformers "
        f"import AutoTokenizer, AutoModelForMaskedLM; AutoTokenizer.from_pretrained('{name}'); "
        f"AutoModelForMaskedLM.from_pretrained('{name}')\", then make /path/to/hf available here and set "
        f"HF_HOME=/path/to/hf (and HF_HUB_OFFLINE=1, which also skips the network's retries); or (b) set "
        f"prompt.backbone (load_backbone's name_or_path) to a local directory holding the model and tokenizer, "
        f"written with save_pretrained. Underlying error: {type(exc).__name__}: {one_line(exc, 300)}"
    )


def roberta_large_config(**overrides):
    """A ``RobertaConfig`` of RoBERTa-large's shape (355M parameters), random weights when built.

    hidden 1024, 24 layers, 16 heads, intermediate 4096, vocab 50265, 514 positions,
    type_vocab_size 1, pad_token_id 1 (as the released ``roberta-large`` config).
    """
    from transformers import RobertaConfig

    kw = dict(vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
              intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
              bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5)
    kw.update(overrides)
    return RobertaConfig(**kw)


def random_backbone(config, device="cpu", dtype=torch.float32, *, seed: int | None = 0,
                    attn_implementation: str | None = None):
    """A ``RobertaForMaskedLM`` built from ``config`` with random weights, in eval mode.

    The weights are created directly on ``device`` (no CPU copy of a large model) and seeded
    with ``torch.manual_seed(seed)`` unless ``seed`` is None (then the global RNG is used as is).
    ``attn_implementation``: see :func:`set_attention` (default: transformers' default, sdpa).
    """
    from transformers import RobertaForMaskedLM

    if seed is not None:
        torch.manual_seed(seed)
    with torch.device(device):
        model = RobertaForMaskedLM(config)
    set_attention(model, attn_implementation)
    model.to(dtype=dtype)
    model.eval()
    return model
