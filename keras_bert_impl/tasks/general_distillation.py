"""General distillation: a shallower encoder of any release, learnt from raw text.

DistilBERT itself was made this way, before any task: the student reads the
pretraining text (here as `create_pretraining_data` reads it: one sentence
per line, a blank line between documents, masked as the original masks it)
and learns, with the teacher running beside it on each batch,

* the teacher's hidden states, by cosine distance, at every student layer
  (student layer i against `distillation.matched_teacher_layers(...)[i]`,
  the top layer against the teacher's top layer);
* where the teacher release has the masked-LM head (`cls/predictions`):
  the teacher's masked-LM distribution at each masked position, at the
  temperature, and the masked words themselves (the original MLM loss).

TinyBERT's name for it is "general distillation", as against the
task-specific kind of `bert-distill --task=classifier|squad|ner`. The
result is a release (with `cls/predictions` where the teacher had them)
that every fine-tuning tool starts from, as from Google's.

A RoBERTa, ALBERT or DistilBERT teacher gives a student of its variant
(`distillation.student_config`) on text its own tokenizer reads, masked with
its own `[MASK]`/`<mask>`; a model with one token type or none (RoBERTa,
DistilBERT) reads RoBERTa's full sentences rather than pairs, and a
teacher release without a pooler (RoBERTa's `*ForMaskedLM`) a student
without one.

Example:
>>> from keras_bert_impl.data.pretraining_instances import TrainingInstance
>>> arrays = instance_arrays([TrainingInstance([2, 4, 3, 7, 3], 3, [1], [9], False)], 6, 2)
>>> arrays["input_ids"].tolist(), arrays["segment_ids"].tolist(), arrays["masked_lm_weights"].tolist()
([[2, 4, 3, 7, 3, 0]], [[0, 0, 0, 1, 1, 0]], [[1.0, 0.0]])
"""

import dataclasses

import numpy as np

from keras_bert_impl.checkpoints.name_map import MASKED_LM_VARIABLES
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.tasks.distillation import DistillationError, StepwiseDistillation
from keras_bert_impl.tasks.embeddings import EMBEDDINGS
from keras_bert_impl.tasks.pretraining import PRETRAINING
from keras_bert_impl.tasks.spec import FineTuningSpec, TaskInputs

_SEQUENCE = ("input_ids", "input_mask", "segment_ids")
_MASKED_LM = ("masked_lm_positions", "masked_lm_ids")


def instance_arrays(instances, max_seq_length, max_predictions_per_seq, pad_id=0):
    """The instances as arrays, padded as the original's writer pads them.

    Args:
        instances: `data.pretraining_instances.TrainingInstance`s.
        max_seq_length, max_predictions_per_seq: The padded lengths.
        pad_id: What `input_ids` are padded with (`<pad>`; WordPiece's 0).

    Returns:
        int32 `input_ids`, `input_mask`, `segment_ids` [n, max_seq_length];
        int32 `masked_lm_positions`, `masked_lm_ids` and float32
        `masked_lm_weights` [n, max_predictions_per_seq].
    """
    count = len(instances)
    arrays = {name: np.zeros((count, max_seq_length), np.int32) for name in _SEQUENCE}
    arrays["input_ids"][:] = pad_id
    arrays.update({name: np.zeros((count, max_predictions_per_seq), np.int32) for name in _MASKED_LM})
    arrays["masked_lm_weights"] = np.zeros((count, max_predictions_per_seq), np.float32)
    for row, instance in enumerate(instances):
        length, masked = len(instance.input_ids), len(instance.masked_lm_positions)
        arrays["input_ids"][row, :length] = instance.input_ids
        arrays["input_mask"][row, :length] = 1
        arrays["segment_ids"][row, instance.segment_a_length : length] = 1
        arrays["masked_lm_positions"][row, :masked] = instance.masked_lm_positions
        arrays["masked_lm_ids"][row, :masked] = instance.masked_lm_ids
        arrays["masked_lm_weights"][row, :masked] = 1.0
    return arrays


@dataclasses.dataclass(frozen=True)
class GeneralDistillation(StepwiseDistillation, FineTuningSpec):
    """A shallower encoder of a release, from raw text (`bert-distill --task=general`).

    The teacher is any release (pretrained, or fine-tuned: its head is not
    read); the student is its configuration at `options.num_hidden_layers`,
    a `BertPretrainingModel` where the teacher has `cls/predictions` (its
    `cls/seq_relationship`, where the teacher has one, is copied and not
    trained), else a `BertModel`. Training only: the run writes the
    student's release.

    Args:
        input_file: Text, one sentence per line, a blank line between documents.
        max_predictions_per_seq, masked_lm_prob, short_seq_prob, dupe_factor,
            do_whole_word_mask: As `create_pretraining_data`'s (the
            instances are made with the run's seed).
        options: `DistillationOptions`.

    Example:
    >>> GeneralDistillation(input_file="corpus.txt").every_layer
    True
    """

    input_file: str = None
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 1
    do_whole_word_mask: bool = False
    name = "general"
    task = "general"
    head_description = "general distillation"
    every_layer = True
    model_inputs = (*_SEQUENCE, "masked_lm_positions")
    variant_tokenizers = True  # Instances are made of ids, from any tokenizer (`read_instances`).

    def read_inputs(self, release, run, log):
        from keras_bert_impl.checkpoints.original import list_original_variables

        self.check_before_reading(release, run)
        arrays = self.read_instances(release, run, log)
        masked_lm = all(name in list_original_variables(run.init_checkpoint) for name in MASKED_LM_VARIABLES)
        log(f"{run.init_checkpoint}: " + ("masked-LM soft targets and hidden states" if masked_lm else
                                          "no cls/predictions: hidden states only"))
        return TaskInputs(PRETRAINING if masked_lm else EMBEDDINGS, {"train": arrays}, extra=masked_lm)

    def teacher_config(self, release):
        """The release's config, without the pooler where a variant's release has none (RoBERTa's
        `*ForMaskedLM`): neither teacher nor student then has one, nor a sentence head."""
        from keras_bert_impl.checkpoints.original import list_original_variables

        config = release.config
        if (config.model_type != "bert" and config.use_pooler
                and "bert/pooler/dense/kernel" not in list_original_variables(release.init_checkpoint)):
            config = dataclasses.replace(config, use_pooler=False)
        return config

    def read_instances(self, release, run, log):
        """The masked instances of `input_file`, shuffled with the run's seed (`instance_arrays`).

        Raises:
            InputFileError: a missing or undecodable file, or one without text.
            DistillationError: masking options out of range.
        """
        import random

        from keras_bert_impl.data.pretraining_instances import (
            InstanceOptions,
            InstanceVocab,
            VariantLineTokenizer,
            add_documents,
            create_training_instances,
            read_lines,
            shuffle,
        )
        from keras_bert_impl.tokenization.from_files import read_vocab_file

        if self.max_predictions_per_seq >= run.max_seq_length:
            raise DistillationError(f"max_predictions_per_seq ({self.max_predictions_per_seq}) must be below "
                                    f"max_seq_length ({run.max_seq_length})")
        special_tokens = getattr(release.tokenizer, "special_tokens", None)  # RoBERTa's, ALBERT's
        try:
            # A pair needs a second token type to be told apart: RoBERTa's full sentences where there is none.
            options = InstanceOptions(run.max_seq_length, self.max_predictions_per_seq, self.masked_lm_prob,
                                      self.short_seq_prob, self.dupe_factor, self.do_whole_word_mask,
                                      full_sentences=release.config.type_vocab_size < 2)
        except ValueError as error:
            raise DistillationError(str(error)) from None
        if special_tokens is None:
            documents = add_documents([[]], read_lines(self.input_file), release.tokenizer)
            vocab = InstanceVocab.from_vocab(release.tokenizer.vocab, release.vocab_file)
        else:
            # The variant's own layout, mask token and words (a "▁" or "Ġ" piece starts one), as the generator's.
            documents = add_documents([[]], read_lines(self.input_file), VariantLineTokenizer(release.tokenizer))
            vocab = InstanceVocab.from_tokenizer_files(read_vocab_file(release.vocab_file), release.vocab_file)
        rng = random.Random(run.training.seed)
        instances = list(create_training_instances(documents, options, vocab, rng))
        shuffle(rng, instances)
        if not instances:
            raise InputFileError(f"{self.input_file}: no text in it (one sentence per line, a blank line between "
                                 "documents)")
        log(f"{self.input_file}: {sum(1 for d in documents if d)} documents, {len(instances)} instances")
        return instance_arrays(instances, run.max_seq_length, self.max_predictions_per_seq, vocab.pad_id)

    def trains_logits(self, inputs):
        return inputs.extra

    def soft_logits(self, task_model, sequence_output, inputs):
        # [batch, max_predictions_per_seq, vocab_size]
        return task_model.masked_lm_head(sequence_output, inputs["masked_lm_positions"])

    def training_data(self, inputs, release, run, log):
        from keras_bert_impl.training.fine_tuning import TrainingData

        arrays = inputs.splits["train"]
        count, weights = len(arrays["input_ids"]), arrays["masked_lm_weights"]
        return TrainingData(
            inputs={name: arrays[name] for name in self.model_inputs}, targets={"hard": arrays["masked_lm_ids"]},
            sample_weights={"hard": weights, "soft": weights}, num_examples=count, unit="instances",
            description=f"{count} instances", source=self.input_file,
        )
