"""The nine GLUE tasks: where their files live, which columns hold text and labels, how scored.

One registry drives the loaders, the pandera schemas, the metrics, the summary table and the
leaderboard submission, so adding or fixing a task is a change in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HOLDOUT = "train_holdout"  # the validation split held out of train to choose on


class UnknownTaskError(KeyError):
    """Raised for a task name that is not one of the nine GLUE tasks."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


@dataclass(frozen=True)
class TsvLayout:
    """Columns of one glue_data TSV file.

    `text_a`, `text_b`, `label` and `index` are header names, or column positions when the
    file has no header (CoLA train/dev). `label` is None for unlabeled (test) files; `index`
    is None where the file has no id column and the row number is used instead.
    """

    text_a: str | int
    text_b: str | int | None = None
    label: str | int | None = None
    index: str | int | None = None
    header: bool = True
    num_columns: int | None = None  # checked for header-less files


@dataclass(frozen=True)
class GlueTask:
    """Static description of one GLUE task.

    `labels` are the label strings as written in glue_data TSV files and in leaderboard
    submissions, in class-id order (the order the Hugging Face `nyu-mll/glue` ClassLabels use);
    None for the regression task (STS-B, scores in [0, 5]). `class_names` are the hub's
    ClassLabel names where the files write bare ids ("0"/"1"): what an export calls its classes.
    `train_has_phrases`: train holds every phrase of each sentence's parse tree as its own row
    (SST-2), while dev holds whole sentences; a hold-out of train must then hold out sentences.
    """

    name: str
    glue_dir: str
    hf_config: str
    hf_text_columns: tuple[str, ...]
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    files: dict[str, TsvLayout]
    dev_splits: tuple[str, ...] = ("dev",)
    test_splits: tuple[str, ...] = ("test",)
    submission_files: dict[str, str] = field(default_factory=dict)
    hf_splits: dict[str, str] = field(default_factory=dict)
    class_names: tuple[str, ...] | None = None
    train_has_phrases: bool = False

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def label_names(self) -> tuple[str, ...] | None:
        """The names of the classes in id order (an export's id2label); None for regression."""
        return self.class_names or self.labels

    @property
    def is_pair(self) -> bool:
        return len(self.hf_text_columns) == 2

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def splits(self) -> tuple[str, ...]:
        return ("train", *self.dev_splits, *self.test_splits)


def _single(
    text: str | int, label: str | int, *, header: bool = True, ncols: int | None = None
) -> dict[str, TsvLayout]:
    return {
        "train": TsvLayout(text, label=label, header=header, num_columns=ncols),
        "dev": TsvLayout(text, label=label, header=header, num_columns=ncols),
        "test": TsvLayout("sentence", index="index"),
    }


def _pair(a: str, b: str, label: str, index: str | None = "index", test_index: str = "index"):
    return {
        "train": TsvLayout(a, b, label=label, index=index),
        "dev": TsvLayout(a, b, label=label, index=index),
        "test": TsvLayout(a, b, index=test_index),
    }


_BINARY = ("0", "1")
_ENTAIL2 = ("entailment", "not_entailment")

TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in [
        GlueTask(
            "cola",
            "CoLA",
            "cola",
            ("sentence",),
            _BINARY,
            ("matthews_corr",),
            # train/dev: source, label, original judgement mark, sentence; no header
            _single(3, 1, header=False, ncols=4),
            submission_files={"test": "CoLA"},
            class_names=("unacceptable", "acceptable"),
        ),
        GlueTask(
            "sst2",
            "SST-2",
            "sst2",
            ("sentence",),
            _BINARY,
            ("accuracy",),
            _single("sentence", "label"),
            submission_files={"test": "SST-2"},
            class_names=("negative", "positive"),
            train_has_phrases=True,  # 67,349 rows: 6,885 sentences and their phrases
        ),
        GlueTask(
            "mrpc",
            "MRPC",
            "mrpc",
            ("sentence1", "sentence2"),
            _BINARY,
            ("f1", "accuracy"),
            # the header starts with a UTF-8 BOM ("\ufeffQuality"); read with utf-8-sig
            _pair("#1 String", "#2 String", "Quality", index=None),
            submission_files={"test": "MRPC"},
            class_names=("not_equivalent", "equivalent"),
        ),
        GlueTask(
            "qqp",
            "QQP",
            "qqp",
            ("question1", "question2"),
            _BINARY,
            ("f1", "accuracy"),
            _pair("question1", "question2", "is_duplicate", index="id", test_index="id"),
            submission_files={"test": "QQP"},
            class_names=("not_duplicate", "duplicate"),
        ),
        GlueTask(
            "stsb",
            "STS-B",
            "stsb",
            ("sentence1", "sentence2"),
            None,
            ("pearson", "spearman"),
            _pair("sentence1", "sentence2", "score"),
            submission_files={"test": "STS-B"},
        ),
        GlueTask(
            "mnli",
            "MNLI",
            "mnli",
            ("premise", "hypothesis"),
            ("entailment", "neutral", "contradiction"),
            ("accuracy",),
            {
                # train has label1 + gold_label, dev has label1..label5 + gold_label: use gold_label
                "train": TsvLayout("sentence1", "sentence2", label="gold_label", index="index"),
                "dev_matched": TsvLayout(
                    "sentence1", "sentence2", label="gold_label", index="index"
                ),
                "dev_mismatched": TsvLayout(
                    "sentence1", "sentence2", label="gold_label", index="index"
                ),
                "test_matched": TsvLayout("sentence1", "sentence2", index="index"),
                "test_mismatched": TsvLayout("sentence1", "sentence2", index="index"),
            },
            dev_splits=("dev_matched", "dev_mismatched"),
            test_splits=("test_matched", "test_mismatched"),
            submission_files={"test_matched": "MNLI-m", "test_mismatched": "MNLI-mm"},
            hf_splits={
                "dev_matched": "validation_matched",
                "dev_mismatched": "validation_mismatched",
                "test_matched": "test_matched",
                "test_mismatched": "test_mismatched",
            },
        ),
        GlueTask(
            "qnli",
            "QNLI",
            "qnli",
            ("question", "sentence"),
            _ENTAIL2,
            ("accuracy",),
            _pair("question", "sentence", "label"),
            submission_files={"test": "QNLI"},
        ),
        GlueTask(
            "rte",
            "RTE",
            "rte",
            ("sentence1", "sentence2"),
            _ENTAIL2,
            ("accuracy",),
            _pair("sentence1", "sentence2", "label"),
            submission_files={"test": "RTE"},
        ),
        GlueTask(
            "wnli",
            "WNLI",
            "wnli",
            ("sentence1", "sentence2"),
            # glue_data writes 0/1 where 1 = entailment, as the HF ClassLabel order
            _BINARY,
            ("accuracy",),
            _pair("sentence1", "sentence2", "label"),
            submission_files={"test": "WNLI"},
            class_names=("not_entailment", "entailment"),
        ),
    ]
}

# Tasks in the GLUE score; WNLI is reported separately (BERT's paper leaves it out).
GLUE_SCORE_TASKS = ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte")


def get_task(name: str) -> GlueTask:
    """Looks a task up by name (case-insensitive, also accepts the glue_data folder name)."""
    key = name.lower().replace("-", "")
    if key not in TASKS:
        raise UnknownTaskError(
            f"unknown GLUE task {name!r}; choose one of {', '.join(sorted(TASKS))}"
        )
    return TASKS[key]


def hf_split(task: GlueTask, split: str) -> str:
    """The Hugging Face split name for one of our split names (dev -> validation)."""
    return task.hf_splits.get(split, "validation" if split == "dev" else split)
