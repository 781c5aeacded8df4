"""The six few-shot tasks of the prompt-tuning study, as data (BBT setup; the SABO paper, Section 5.2).

Black-Box Tuning (BBT; Sun et al., ICML 2022), whose setup the SABO paper's prompt experiments
adopt, evaluates RoBERTa-large with 50 soft-prompt tokens on SST-2, Yelp Polarity, AG News, MRPC,
RTE and SNLI. Each task is a cloze template with one ``<mask>``; the model's masked-LM logits at
``<mask>``, restricted to the task's label words (one per class, in label-index order), give the
prediction. Templates, label words, splits and metrics are BBT's (``dataloader.py`` / ``bbt.py``
of the BBT code), as summarised in ``shared/notes/references.md``:

    | task    | HF dataset    | test split  | template                                 | label words                  |
    | SST-2   | glue / sst2   | validation  | {P} . {sentence} . It was <mask> .       | bad, great                   |
    | Yelp P. | yelp_polarity | test        | {P} . {text} . It was <mask> .           | bad, great                   |
    | AG News | ag_news       | test        | {P} . <mask> News: {text}                | World, Sports, Business, Tech|
    | MRPC    | glue / mrpc   | validation  | {P} . {sentence1} ? <mask> , {sentence2} | No, Yes                      |
    | RTE     | glue / rte    | validation  | {P} . {sentence1} ? <mask> , {sentence2} | Yes, No                      |
    | SNLI    | snli          | test        | {P} . {premise} ? <mask> , {hypothesis}  | Yes, Maybe, No               |

``{P}`` marks the 50 prompt placeholder slots and ``<mask>`` the mask token, exactly as
:func:`replication.prompt.objective.encode_template` expects; every other ``{field}`` is a text
column of the Hugging Face dataset. The label column is ``label`` everywhere. GLUE's test splits
carry no labels (-1), hence SST-2, MRPC and RTE are tested on ``validation``. SNLI marks examples
without a gold label with -1; only labels 0, 1, 2 are kept (:attr:`Task.valid_labels`; the same
rule, labels in ``range(n_classes)``, is applied to every task). The metric is accuracy, and F1
with label 1 (``equivalent``) as the positive class for MRPC.

Label-index order, from the datasets' ``ClassLabel`` names (:attr:`Task.label_names`):
SST-2 negative/positive, Yelp "1"/"2" (1 and 2 stars after HF's relabelling: negative/positive),
AG News World/Sports/Business/Sci-Tech, MRPC not_equivalent/equivalent, RTE
entailment/not_entailment, SNLI entailment/neutral/contradiction.
"""
from __future__ import annotations

import string
from dataclasses import dataclass

__all__ = ["Task", "TASKS", "TASK_NAMES", "get_task", "PROMPT_MARKER", "MASK_TOKEN", "ZERO_SHOT"]

PROMPT_MARKER = "{P}"  # same marker as replication.prompt.objective.PROMPT_MARKER
MASK_TOKEN = "<mask>"  # RoBERTa's mask token, written literally in the templates
ZERO_SHOT = "zero_shot"  # the setting and method of the zero-shot runs (one per task, no prompt)


@dataclass(frozen=True)
class Task:
    """One few-shot classification task: where its data lives and how it is turned into a cloze.

    - ``name``: short identifier, also the directory name of prepared data (``sst2``, ...).
    - ``path`` / ``config``: ``datasets.load_dataset(path, config)`` arguments (config may be None).
    - ``train_split`` / ``test_split``: Hugging Face split names; the few-shot train and dev sets
      are both drawn from ``train_split`` (BBT), the test set is the whole ``test_split``.
    - ``fields``: the text columns the template uses, in template order.
    - ``template``: the cloze, ``{P}`` first, exactly one ``<mask>``, ``{field}`` for each field.
    - ``label_words``: one word per class, in label-index order (label i <-> label_words[i]).
    - ``label_names``: the dataset's own ``ClassLabel`` names, in the same order (documentation
      and a cross-check that the label words are in the right order).
    - ``metric``: ``"accuracy"`` or ``"f1"`` (label 1 positive), keys of ``objective.METRICS``.
    - ``label_field``: the label column (``label`` for all six tasks).
    """

    name: str
    display_name: str
    path: str
    config: str | None
    train_split: str
    test_split: str
    fields: tuple[str, ...]
    template: str
    label_words: tuple[str, ...]
    label_names: tuple[str, ...]
    metric: str = "accuracy"
    label_field: str = "label"

    def __post_init__(self):
        if self.metric not in ("accuracy", "f1"):
            raise ValueError(f"task {self.name}: metric must be 'accuracy' or 'f1', got {self.metric!r}")
        if len(self.label_words) < 2 or len(set(self.label_words)) != len(self.label_words):
            raise ValueError(f"task {self.name}: need >= 2 distinct label words, got {self.label_words}")
        if len(self.label_names) != len(self.label_words):
            raise ValueError(f"task {self.name}: {len(self.label_words)} label words but "
                             f"{len(self.label_names)} label names")
        if not self.template.startswith(PROMPT_MARKER) or self.template.count(PROMPT_MARKER) != 1:
            raise ValueError(f"task {self.name}: the template must start with {PROMPT_MARKER} and hold it once")
        if self.template.count(MASK_TOKEN) != 1:
            raise ValueError(f"task {self.name}: the template must hold {MASK_TOKEN} exactly once")
        if tuple(self.template_fields) != tuple(self.fields):
            raise ValueError(f"task {self.name}: template fields {self.template_fields} != fields {self.fields}")

    @property
    def hf_id(self) -> str:
        """``path/config`` (or ``path``), as the data set is usually named (``glue/sst2``)."""
        return f"{self.path}/{self.config}" if self.config else self.path

    @property
    def n_classes(self) -> int:
        return len(self.label_words)

    @property
    def valid_labels(self) -> tuple[int, ...]:
        """Labels kept when loading: 0..n_classes-1 (drops SNLI's -1 "no gold label" rows)."""
        return tuple(range(self.n_classes))

    @property
    def template_fields(self) -> list[str]:
        """The ``{field}`` names of the template other than ``P``, in order."""
        return [f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None and f != "P"]

    def fill(self, example) -> str:
        """The template with the example's fields filled in verbatim; ``{P}`` and ``<mask>`` stay.

        The result is what :func:`replication.prompt.objective.encode_texts` takes. Field values
        are inserted as they are (braces in the data are not format fields).
        """
        missing = [f for f in self.fields if f not in example]
        if missing:
            raise KeyError(f"task {self.name}: example lacks field(s) {missing}; it has {sorted(example)}")
        out = []
        for literal, fname, _, _ in string.Formatter().parse(self.template):
            out.append(literal)
            if fname == "P":
                out.append(PROMPT_MARKER)
            elif fname is not None:
                out.append(str(example[fname]))
        return "".join(out)


_PAIR = "{P} . {%s} ? <mask> , {%s}"

TASKS: dict[str, Task] = {t.name: t for t in (
    Task("sst2", "SST-2", "glue", "sst2", "train", "validation", ("sentence",),
         "{P} . {sentence} . It was <mask> .", ("bad", "great"), ("negative", "positive")),
    Task("yelp_polarity", "Yelp P.", "yelp_polarity", None, "train", "test", ("text",),
         "{P} . {text} . It was <mask> .", ("bad", "great"), ("1", "2")),
    Task("ag_news", "AG News", "ag_news", None, "train", "test", ("text",),
         "{P} . <mask> News: {text}", ("World", "Sports", "Business", "Tech"),
         ("World", "Sports", "Business", "Sci/Tech")),
    Task("mrpc", "MRPC", "glue", "mrpc", "train", "validation", ("sentence1", "sentence2"),
         _PAIR % ("sentence1", "sentence2"), ("No", "Yes"), ("not_equivalent", "equivalent"), metric="f1"),
    Task("rte", "RTE", "glue", "rte", "train", "validation", ("sentence1", "sentence2"),
         _PAIR % ("sentence1", "sentence2"), ("Yes", "No"), ("entailment", "not_entailment")),
    Task("snli", "SNLI", "snli", None, "train", "test", ("premise", "hypothesis"),
         _PAIR % ("premise", "hypothesis"), ("Yes", "Maybe", "No"), ("entailment", "neutral", "contradiction")),
)}

TASK_NAMES = tuple(TASKS)


def get_task(task) -> Task:
    """A :class:`Task` from itself or its name (``"sst2"``, ``"yelp_polarity"``, ...)."""
    if isinstance(task, Task):
        return task
    try:
        return TASKS[task]
    except (KeyError, TypeError):
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASK_NAMES)}") from None
