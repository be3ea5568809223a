"""`TaskSpec`: everything the tools, export and serving need to know of a task.

A task is described once: how to build its model from a `BertConfig`, which
original checkpoint variables make its head (from `checkpoints/name_map.py`),
which variables an export may leave untrained, and what its SavedModel
returns. Tools, `serving/` and the Python API look a task up in
`tasks.registry`; none of them switch on task names.

Example:
>>> from keras_bert_impl.tasks.registry import get_task
>>> spec = get_task("classifier")
>>> spec.head_variables
('output_weights', 'output_bias')
"""

import dataclasses
from typing import Callable, Optional

# The tasks a SavedModel can be exported for, each with its `TaskSpec.description` (one line for --help). Here,
# where TensorFlow is not imported, so that `bert-export --help` lists them without starting it; the registry's
# `exported_task_names()` is these (tested).
EXPORTED_TASKS = {
    "classifier": "Sentence (pair) classification: class probabilities from the pooled output.",
    "regression": "Sentence (pair) regression (STS-B): one score from the pooled output.",
    "span_qa": "Extractive question answering (SQuAD): start/end logits and the best answer span.",
    "token_tagging": "Token tagging (NER): a label for every word piece.",
    "embeddings": "Text embeddings: the pooled output and the mean over real tokens.",
    "fill_mask": "Fill-mask: the top-k word pieces for each [MASK], from cls/predictions.",
    "multi_label": "Multi-label classification: a sigmoid probability per label, and the labels over threshold.",
    "multiple_choice": "Multiple choice (SWAG): a probability for each of a context's choices, and the chosen one.",
}

# What a raw-text request of a task holds (`TaskSpec.requests`): a text (or a pair of texts) per example, or a
# context and its choices (`serving.signatures.BertServingModule.signatures` makes each form's signatures).
TEXT_REQUESTS = "text"
CHOICE_REQUESTS = "choices"


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task.

    Attributes:
        name: The name tools and `bert-export --task` use.
        description: One line for `--help`.
        build_model: `build_model(config, num_labels, dtype=None) ->
            keras.Model`; `dtype` is a Keras dtype policy.
        head_variables: Original names of the head's variables; a
            fine-tuned checkpoint for this task holds them.
        export_optional: Variable-name patterns an export may leave
            untrained (e.g. the NSP head of a fill-mask model).
        serving_outputs: `serving_outputs(serving, inputs, padded_length)`
            -> dict of output tensors, where `serving` is the
            `BertServingModule` (model, tokenizer ids, label table) and
            `inputs` the batch cut to its longest request; None when the
            task is not exported.
        uses_labels: The model has a class per label (`num_labels`, label
            names in the export's `assets/labels.txt`).
        masks_in_text: "[MASK]" written in a request is the mask token.
        warmup_pairs: Warm TF Serving up through the text-pair signature too.
        requests: What an export's requests hold: `TEXT_REQUESTS` (a text
            [batch], or a pair, ids [batch, seq_length]) or `CHOICE_REQUESTS`
            (a context [batch] and its choices [batch, num_choices], each
            (context, choice) pair packed as a text pair; ids [batch,
            num_choices, seq_length]).
        long_texts: Its serving outputs come from one row of `forward`'s
            logits per text, so a long text may be read as head + tail or
            as windows whose logits are pooled (`tokenization.long_text`).
    """

    name: str
    description: str
    build_model: Callable
    head_variables: tuple = ()
    export_optional: tuple = ()
    serving_outputs: Optional[Callable] = None
    uses_labels: bool = False
    masks_in_text: bool = False
    warmup_pairs: bool = False
    requests: str = TEXT_REQUESTS
    long_texts: bool = False

    @property
    def required_tokens(self):
        """Vocabulary tokens the task's preprocessing and outputs rely on."""
        return ("[UNK]", "[CLS]", "[SEP]") + (("[MASK]",) if self.masks_in_text else ())


@dataclasses.dataclass(frozen=True)
class TaskInputs:
    """What a fine-tuning spec read before TensorFlow starts.

    Attributes:
        model_spec: The `TaskSpec` whose model the run builds.
        splits: `{split: data}` in the spec's own form (examples,
            sentences, encoded windows...), for the splits the run needs.
        num_labels: Classes of the head (None: the spec's model has none).
        labels: The label list in class-id order, written beside the
            fine-tuned release as `label_list.txt` (None: none is written).
        extra: Anything else the spec's later steps need (its own form).
    """

    model_spec: TaskSpec
    splits: dict
    num_labels: Optional[int] = None
    labels: Optional[tuple] = None
    extra: object = None


class FineTuningSpec:
    """What one fine-tuning task does differently; `jobs.run_fine_tuning` does the rest.

    The job is the original scripts' skeleton, once: read and check the
    release and the data (before TensorFlow starts), build the model in its
    strategy, train (resumably) or load fine-tuned weights, evaluate,
    predict. A task fills in the five steps below that raise
    `NotImplementedError` (and may change the three with defaults:
    `model_config`, `initialise`, `training_model`); an instance holds the
    task's own options (its data files, `doc_stride`, ...), the job's
    `FineTuningRun` the shared ones.

    Attributes:
        name: The task's name (`tasks.registry.FINE_TUNING`).
        head_description: What the head is for, in "not fine-tuned for ..."
            errors ("classification").
        computes_on_real_tokens: Whether the loss and outputs allow skipping
            the padding (`training.fine_tuning.compute_on_real_tokens`):
            not for SQuAD, whose loss and n-best search read every position.
        variant_tokenizers: Whether the task's features can be made with a
            variant's byte-level BPE or SentencePiece tokenizer (the
            tokenizer's `special_tokens` lay them out; SQuAD and NER
            tokenize word by word as in running text, `tokenize_word`);
            False: WordPiece releases only (BERT, DistilBERT).
    """

    name = None
    head_description = None
    computes_on_real_tokens = True
    variant_tokenizers = False

    def read_inputs(self, release, run, log):
        """Reads and checks every input the run needs: a `TaskInputs`.

        Called before any model is built or output written, so that bad
        input is one error naming its file, before TensorFlow starts.
        """
        raise NotImplementedError

    def model_config(self, release):
        """The `BertConfig` of the model the job builds (default: the release's)."""
        return release.config

    def initialise(self, model, inputs, release, run, log):
        """Sets `model`'s weights before training (default: the release, the head may be fresh)."""
        from keras_bert_impl.training.fine_tuning import load_initial_weights

        load_initial_weights(model, run.init_checkpoint, inputs.model_spec.head_variables, log)

    def training_data(self, inputs, release, run, log):
        """The encoded training set: a `training.fine_tuning.TrainingData`."""
        raise NotImplementedError

    def run_settings(self, release):
        """`{name: JSON value}` of the task's own options that decide the training's
        course, recorded with the run's settings: a rerun with other ones is
        refused by name (`training.run_settings`). Default: none."""
        return {}

    def release_files(self, output_dir, inputs, run):
        """Writes (or removes) the task's own files beside the fine-tuned release in
        `output_dir`, before its config is written (a classifier's `long_text.json`).
        Default: none."""

    def training_model(self, model, inputs):
        """The Keras model `fit` trains (default: `model`; another must share its
        weights and expose them as `model` does, `bert` and the head)."""
        return model

    def compile_options(self, inputs):
        """`model.compile` arguments besides the optimizer (loss, metrics...)."""
        raise NotImplementedError

    def evaluate(self, model, inputs, release, global_step, run, log):
        """Evaluates the eval split, writes the task's result files; returns `{name: value}`."""
        raise NotImplementedError

    def predict(self, model, inputs, release, global_step, run, log):
        """Predicts the predict split and writes the task's prediction files.

        Returns:
            An evaluation of the predictions where the task scores them
            (SQuAD's official metrics), else `{}`.
        """
        raise NotImplementedError
