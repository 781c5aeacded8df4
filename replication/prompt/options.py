"""The prompt study's execution choices as plain data (no torch, no pydantic: the schema, the
study and the model loader all import them from here)."""

SELECTIONS = ("best_dev", "final")   # prompt.selection: which prompt's test score the tables report
WEIGHTS = ("fp32", "bf16")           # prompt.weights: fp32 (+ bf16 autocast on CUDA) or all bf16
# attention implementations of the transformers model: PyTorch scaled_dot_product_attention
# (transformers' default for RoBERTa; flash / memory-efficient kernels on CUDA) or the plain
# matmul-softmax implementation
MODEL_ATTENTIONS = ("sdpa", "eager")
# prompt.attention: one of those, or `varlen`: rows packed without padding through our RoBERTa
# encoder loop (replication/prompt/packed.py), variable-length flash attention on CUDA
ATTENTIONS = (*MODEL_ATTENTIONS, "varlen")
# the optional keys of the prompt section: the schema's defaults (replication/prompt/params.py) and
# what the study, the report and `prepare` use where a section omits them. Not for stored run
# configs: one written before these keys existed runs as it did then (study.make_problem's own
# fallbacks: transformers' default attention, no bucketing, no compile), so its results still hold
DEFAULTS = {"attention": "varlen", "bucketing": True, "compile": True}


def option(section: dict, key: str):
    """``section[key]``, or its default (:data:`DEFAULTS`) where the section omits it."""
    return section.get(key, DEFAULTS[key])
