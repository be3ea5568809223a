"""Multiple choice (SWAG): the task spec and what `jobs.run_fine_tuning` needs to fine-tune it.

Each question's (context, choice) pairs are encoded as the original encodes
a sentence pair (`[CLS] context [SEP] choice [SEP]`, the longer side cut
first) into features [num_questions, num_choices, max_seq_length];
`models.multiple_choice.BertMultipleChoice` scores them. With `do_eval` the
run writes `eval_results.txt` (`eval_accuracy`, `eval_loss`,
`global_step`), with `do_predict` `test_results.tsv` (each question's choice
probabilities, tab-separated). `MultipleChoiceDistillation` makes a
shallower student of a fine-tuned release (`bert-distill
--task=multiple_choice`).

Example:
>>> MULTIPLE_CHOICE.head_variables
('output_weights', 'output_bias')
>>> choice_evaluation([0, 1], [[2.0, 0.0], [1.0, 0.0]], global_step=3)["eval_accuracy"]
0.5
"""

import dataclasses

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.name_map import CLASSIFIER_VARIABLES
from keras_bert_impl.io import write_text_atomically
from keras_bert_impl.tasks.classifier import (
    SEQUENCE_INPUTS,
    ClassifierFineTuning,
    classifier_config,
    compile_options,
    format_eval_results,
)
from keras_bert_impl.tasks.distillation import DistillationSpec, distillation_compile_options
from keras_bert_impl.tasks.spec import CHOICE_REQUESTS, EXPORTED_TASKS, FineTuningSpec, TaskInputs, TaskSpec
from keras_bert_impl.training.fine_tuning import TrainingData


def _build_multiple_choice(config, num_labels=None, dtype=None):
    from keras_bert_impl.models.multiple_choice import BertMultipleChoice

    return BertMultipleChoice(classifier_config(config), dtype=dtype)


def multiple_choice_serving_outputs(serving, inputs, padded_length):
    """`probabilities` [batch, num_choices] (a softmax over each context's choices) and `choice` [batch]: the
    index of the most probable choice."""
    import tensorflow as tf

    probabilities = tf.nn.softmax(tf.cast(serving.forward(inputs), tf.float32), axis=-1)
    return {"probabilities": probabilities, "choice": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}


MULTIPLE_CHOICE = TaskSpec(
    name="multiple_choice",
    description=EXPORTED_TASKS["multiple_choice"],
    build_model=_build_multiple_choice,
    head_variables=tuple(CLASSIFIER_VARIABLES),
    serving_outputs=multiple_choice_serving_outputs,
    requests=CHOICE_REQUESTS,
)


def encode_choices(examples, tokenizer, max_seq_length):
    """`{input_ids, input_mask, segment_ids}` int32 arrays [num_examples, num_choices, max_seq_length].

    Args:
        examples: `MultipleChoiceExample`s, all with the same number of choices.
        tokenizer: The release's `FullTokenizer` (or a variant's).
        max_seq_length: Padded length of each pair.
    """
    import numpy as np

    from keras_bert_impl.data.text_pairs import TextPairExample, convert_example_to_features

    num_choices = len(examples[0].choices)
    features = [
        convert_example_to_features(TextPairExample(0, example.context, choice), tokenizer, max_seq_length)
        for example in examples for choice in example.choices
    ]
    return {
        key: np.array([getattr(f, key) for f in features], np.int32).reshape(len(examples), num_choices,
                                                                              max_seq_length)
        for key in SEQUENCE_INPUTS
    }


def choice_evaluation(labels, logits, global_step):
    """`eval_accuracy`, `eval_loss` (mean cross-entropy over the choices) and `global_step` (pure NumPy).

    Args:
        labels: The right choices' indices [n].
        logits: The model's logits [n, num_choices].
        global_step: Training steps of the evaluated weights.
    """
    import numpy as np

    from keras_bert_impl.data.classification_metrics import accuracy
    from keras_bert_impl.probabilities import per_example_cross_entropy

    logits = np.asarray(logits, np.float64)
    labels = np.asarray(labels)
    return {
        "eval_accuracy": float(accuracy(labels, logits.argmax(axis=-1))),
        "eval_loss": float(per_example_cross_entropy(logits, labels).mean()),
        "global_step": int(global_step),
    }


def format_choice_probabilities(logits):
    """One line per question: its choices' probabilities, tab-separated (float32)."""
    import numpy as np

    from keras_bert_impl.probabilities import softmax

    probabilities = softmax(logits).astype(np.float32)
    return "".join("\t".join(str(p) for p in row) + "\n" for row in probabilities)


@dataclasses.dataclass(frozen=True)
class MultipleChoiceFineTuning(FineTuningSpec):
    """Fine-tuning a multiple-choice model on SWAG-format files, as `tools/run_multiple_choice.py`.

    Args:
        data_dir: Where a split's file is looked for when `files` names
            none (`data.multiple_choice.split_file`: SWAG's `train.csv`,
            `val.csv`, `test.csv`, or `dev`, `.tsv`, `.jsonl`); may be None.
        files: `{split: path}` ("train", "dev", "test") that override `data_dir`.
        columns: `data.multiple_choice.ChoiceColumns` of the files (SWAG's by default).

    Example:
    >>> MultipleChoiceFineTuning("swag").head_description
    'multiple choice'
    """

    data_dir: str = None
    files: dict = dataclasses.field(default_factory=dict)
    columns: object = None
    name = "multiple_choice"
    head_description = "multiple choice"
    # The features are [questions, choices, seq]: the job's cutting of padding reads [rows, seq].
    computes_on_real_tokens = False
    variant_tokenizers = True

    def read_inputs(self, release, run, log):
        from keras_bert_impl.data.multiple_choice import SWAG, read_multiple_choice_file, split_file
        from keras_bert_impl.errors import InputFileError

        wanted = {"train": run.do_train, "dev": run.do_eval, "test": run.do_predict}
        splits, paths = {}, {}
        for split, needed in wanted.items():
            if needed:
                if not self.files.get(split) and not self.data_dir:
                    raise InputFileError(f"no {split} file for multiple choice: give its file or a data directory")
                paths[split] = self.files.get(split) or split_file(self.data_dir, split)
                splits[split] = read_multiple_choice_file(paths[split], self.columns or SWAG,
                                                          labelled=split != "test")
        counts = {len(examples[0].choices) for examples in splits.values()}
        if len(counts) > 1:
            raise InputFileError("the files have different numbers of choices: "
                                 + ", ".join(f"{paths[s]}: {len(e[0].choices)}" for s, e in splits.items()))
        return TaskInputs(MULTIPLE_CHOICE, splits, extra=paths)

    # The release's encoder, a fresh head (and a fresh pooler for a variant without one), as the classifier's.
    initialise = ClassifierFineTuning.initialise

    def training_data(self, inputs, release, run, log):
        import numpy as np

        examples = inputs.splits["train"]
        return TrainingData(
            inputs=encode_choices(examples, release.tokenizer, run.max_seq_length),
            targets=np.array([e.label for e in examples], np.int32),
            num_examples=len(examples), unit="training questions",
            description=f"{len(examples)} questions of {len(examples[0].choices)} choices",
            source=inputs.extra["train"],
        )

    def compile_options(self, inputs):
        return compile_options(is_regression=False)

    def _logits(self, model, examples, release, batch_size, run, log):
        from keras_bert_impl.inference.array_prediction import predict_on_real_tokens

        features = encode_choices(examples, release.tokenizer, run.max_seq_length)
        return predict_on_real_tokens(model, features, batch_size, cut=False, log=log, description="questions")

    def evaluate(self, model, inputs, release, global_step, run, log):
        examples = inputs.splits["dev"]
        logits = self._logits(model, examples, release, run.eval_batch_size, run, log)
        result = choice_evaluation([e.label for e in examples], logits, global_step)
        text = format_eval_results(result)
        write_text_atomically(filesystem.join(run.output_dir, "eval_results.txt"), text)
        log(f"eval on {len(examples)} questions:\n{text.rstrip()}")
        return result

    def predict(self, model, inputs, release, global_step, run, log):
        examples = inputs.splits["test"]
        logits = self._logits(model, examples, release, run.predict_batch_size, run, log)
        path = filesystem.join(run.output_dir, "test_results.tsv")
        write_text_atomically(path, format_choice_probabilities(logits))
        log(f"wrote choice probabilities for {len(examples)} questions to {path}")
        return {}


@dataclasses.dataclass(frozen=True)
class MultipleChoiceDistillation(DistillationSpec, MultipleChoiceFineTuning):
    """A shallower multiple-choice student of a `bert-run-multiple-choice` release (`bert-distill
    --task=multiple_choice`), as `tasks.distillation.ClassifierDistillation` makes a classifier's.

    The teacher's targets are computed once, before training: its logits
    over each question's choices and each (context, choice) pair's
    last-layer [CLS] state. The student (the teacher's configuration with
    fewer layers, started from its embeddings, every (n/k)-th layer, pooler
    and head) trains on the teacher's choice distribution at the
    temperature, the right choices, and the cosine distance of its [CLS]
    states to the teacher's. `evaluate` writes the student's
    `eval_results.txt` and the teacher's in `teacher/`; `predict` the
    student's `test_results.tsv`.

    Args:
        data_dir, files, columns: As `MultipleChoiceFineTuning`'s.
        options: `tasks.distillation.DistillationOptions`.

    Example:
    >>> MultipleChoiceDistillation("swag").task
    'multiple_choice'
    """

    task = "multiple_choice"
    teacher_head = tuple(CLASSIFIER_VARIABLES)

    def check_before_reading(self, release, run):
        """As every distillation's, and the teacher's head one choice score: not a classifier's.

        Raises:
            CheckpointError: a teacher whose `output_weights` has more than one row.
        """
        from keras_bert_impl.checkpoints.original import open_checkpoint
        from keras_bert_impl.errors import CheckpointError

        super().check_before_reading(release, run)
        rows = open_checkpoint(run.init_checkpoint)[1].get_variable_to_shape_map()[self.teacher_head[0]][0]
        if rows != 1:
            raise CheckpointError(f"{run.init_checkpoint}: output_weights has {rows} rows, a classifier's head; a "
                                  "multiple-choice teacher scores each choice with one (--task=classifier "
                                  "distills a classifier)")

    def training_data(self, inputs, release, run, log):
        import numpy as np

        from keras_bert_impl.inference.array_prediction import predict_on_real_tokens
        from keras_bert_impl.models.multiple_choice import choice_distillation_outputs

        data = super().training_data(inputs, release, run, log)
        teacher = choice_distillation_outputs(self.teacher_cache["model"])
        outputs = predict_on_real_tokens(teacher, data.inputs, run.training.train_batch_size, cut=False, log=log,
                                         description="questions")
        # [n, num_choices] logits, [n] right choices, [n, num_choices, H] states: every question is labelled.
        targets = {"soft": outputs["logits"].astype(np.float32), "hard": data.targets,
                   "hidden": outputs["cls_state"].astype(np.float32)}
        return dataclasses.replace(data, targets={name: targets[name] for name in self.loss_weights(inputs)})

    def training_model(self, model, inputs):
        import keras

        from keras_bert_impl.models.multiple_choice import choice_distillation_outputs

        outputs = choice_distillation_outputs(model)
        logits, cls_state = outputs.output["logits"], outputs.output["cls_state"]
        every = {"soft": logits, "hard": keras.layers.Identity(name="hard")(logits), "hidden": cls_state}
        trainer = keras.Model(outputs.input, {name: every[name] for name in self.loss_weights(inputs)})
        trainer.bert, trainer.head = model.bert, model.head  # The student's weights, by their original names.
        return trainer

    def compile_options(self, inputs):
        weights = self.loss_weights(inputs)
        # Softmax over the choices: any count above one is the classifier's loss.
        return distillation_compile_options(list(weights), weights, num_classes=2,
                                            temperature=self.options.temperature)
