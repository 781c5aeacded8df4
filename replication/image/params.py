"""The schema of ``params.yaml``'s ``image`` section (see :mod:`replication.params`).

One field per key; a new key of the section needs a field here (unknown keys are refused).
"""
from __future__ import annotations

from replication.params import (
    Fraction,
    Name,
    NameList,
    NonNegInt,
    Popsize,
    PosInt,
    PositiveFloat,
    Rates,
    Section,
    Seeds,
    Sha256,
    StudySection,
    Text,
    methods_field,
    one_of,
    references,
)

DATASETS = ("digits_stand_in", "fashion_mnist")   # replication.image.data.DATASETS (not imported: it is heavy)
Dataset = one_of(*DATASETS)
Precision = one_of("float64", "float32")  # replication.image.objective.DTYPES


class ImageProfile(Section):
    seeds: Seeds
    iterations: PosInt
    dataset: Dataset = None                   # the profile's data set, where not image.dataset
    # optional narrowings of the section's lists (absent: all of them; null is refused)
    noise_rates: Rates = None
    dims: NameList = None


class Umap(Section):
    n_components: PosInt
    seed: NonNegInt
    # data set -> the checksum of its embedding (replication.image.features.embedding_sha256); part of
    # every run's config, so another embedding is another configuration; absent: computed, not checked
    sha256: dict[Dataset, Sha256] = None


class ImageParams(StudySection):
    profile: Name
    profiles: dict[Name, ImageProfile]
    dataset: Dataset
    fashion_mnist_dir: Text
    dims: dict[Name, PosInt]                  # setting -> d~ (d = 10 d~)
    noise_rates: Rates
    popsize: Popsize
    batch_size: dict[Dataset, PosInt]         # data set -> mini-batch size M
    dtype: dict[Dataset, Precision] = None    # data set -> the objective's precision (absent: float64)
    validation_fraction: Fraction
    sigma0: PositiveFloat
    umap: Umap
    methods: methods_field(lists=True)

    def checks(self):
        for dataset in {self.dataset, self.active.dataset} - {None}:
            if dataset not in self.batch_size:
                yield ("batch_size",), self.batch_size, f"must give the batch size of the data set {dataset!r}"
        if self.active.dims is not None:
            yield from references(("profiles", self.profile, "dims"), self.active.dims, list(self.dims),
                                  "a setting under image.dims")

    def names(self) -> dict[str, set[str]]:
        return {"setting": set(self.dims), "method": set(self.methods), "function": set(DATASETS)}
