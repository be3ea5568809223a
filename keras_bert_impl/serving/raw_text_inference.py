"""An export's raw-text signature run over batches of texts, in this process or on Beam workers.

What runs the model is two functions (`raw_text_functions`: load a
SavedModel, answer a batch), made inside a function so that Beam's pickler
(cloudpickle) sends them by value: a worker unpickles them, and the model
handler of `beam_model_handler` around them, with TensorFlow, TF Text's ops
(which the SavedModel's tokenizer needs) and Beam, importing nothing of
keras_bert_impl (test_predict_corpus checks it in a process where our
package cannot be imported). The one-process mode calls the same two
functions, so both modes answer alike.

The signatures are the export's (`serving/signatures.py`): `serving_default`
takes `text`, `serve_text_pair` takes `text` and `text_b`, both DT_STRING
[batch]; their outputs are the task's (a classifier's `probabilities`,
`label_ids`, `labels`; an embedder's `pooled_output`, ...).

Example:
>>> load, predict = raw_text_functions()  # doctest: +SKIP
>>> model = load("saved_models/sentiment/1")  # doctest: +SKIP
>>> predict(model, "serving_default", ["a fine film"], None, ["labels"])  # doctest: +SKIP
[{'labels': 'positive'}]
"""

from keras_bert_impl import extras, filesystem
from keras_bert_impl.errors import BertError
from keras_bert_impl.serving.versions import existing_versions

TEXT_SIGNATURE = "serving_default"
PAIR_SIGNATURE = "serve_text_pair"
_INPUTS = {TEXT_SIGNATURE: ("text",), PAIR_SIGNATURE: ("text", "text_b")}


class RawTextSignatureError(BertError, ValueError):
    """A directory that holds no export, or an export without the raw-text signature asked for."""


def resolve_saved_model_dir(path):
    """`path` if it holds `saved_model.pb`; for a model's base directory, its highest version (as TF Serving serves).

    Raises:
        RawTextSignatureError: neither.
    """
    path = path.rstrip("/")
    if filesystem.exists(filesystem.join(path, "saved_model.pb")):
        return path
    versions = existing_versions(path)
    if versions and filesystem.exists(filesystem.join(path, str(versions[-1]), "saved_model.pb")):
        return filesystem.join(path, str(versions[-1]))
    raise RawTextSignatureError(f"{path}: no saved_model.pb here nor in a version directory below (an export of bert-export)")


def raw_text_outputs(saved_model_dir, signature_name):
    """`{output name: (dtype name, rank)}` of the export's raw-text signature, from `saved_model.pb`.

    Args:
        saved_model_dir: One version's directory.
        signature_name: `TEXT_SIGNATURE` or `PAIR_SIGNATURE`.

    Raises:
        RawTextSignatureError: no such signature, or one that does not take
            exactly the raw texts (DT_STRING `text`, and `text_b` for pairs).
    """
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    path = filesystem.join(saved_model_dir, "saved_model.pb")
    with filesystem.open_file(path, "rb") as f:
        signatures = saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs[0].signature_def
    wanted = _INPUTS[signature_name]
    found = signatures.get(signature_name)
    inputs = {} if found is None else {name: tensor.dtype for name, tensor in found.inputs.items()}
    if sorted(inputs) != sorted(wanted) or any(dtype != tf.string.as_datatype_enum for dtype in inputs.values()):
        has = f"its {signature_name} takes {', '.join(sorted(inputs))}" if found is not None else f"it has no {signature_name}"
        raise RawTextSignatureError(
            f"{saved_model_dir}: not an export that takes raw text ({' and '.join(wanted)}, DT_STRING): {has} "
            f"(signatures: {', '.join(sorted(signatures))}); export the model with bert-export"
        )
    return {name: (tf.dtypes.as_dtype(tensor.dtype).name, len(tensor.tensor_shape.dim))
            for name, tensor in sorted(found.outputs.items())}


def raw_text_functions():
    """`(load, predict)`: what a worker runs, needing TensorFlow and TF Text only.

    `load(saved_model_dir)` returns the loaded export (TF Text's ops
    registered first). `predict(model, signature_name, texts, texts_b,
    output_names)` runs one batch and returns one dict per text,
    `{output name: value}`: numbers and nested lists of numbers as
    Python's, strings decoded from UTF-8.

    Both are defined in here, importing inside, so that a pickler sends them
    by value and the process that runs them imports nothing of this package.
    """

    def load(saved_model_dir):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the tokenizer's ops before the graph is loaded)

        return tf.saved_model.load(saved_model_dir)

    def predict(model, signature_name, texts, texts_b, output_names):
        import numpy as np
        import tensorflow as tf

        inputs = {"text": tf.constant(texts, tf.string)}
        if texts_b is not None:
            inputs["text_b"] = tf.constant(texts_b, tf.string)
        outputs = model.signatures[signature_name](**inputs)
        rows = [{} for _ in texts]
        for name in output_names:
            values = outputs[name].numpy()  # [batch, ...]
            if values.dtype.kind in "SO":
                values = np.char.decode(values.astype(bytes), "utf-8")
            for row, value in zip(rows, values.tolist()):
                row[name] = value
        return rows

    return load, predict


def beam_model_handler(saved_model_dir, signature_name, output_names, batch_size):
    """A `KeyedModelHandler` of Beam's TensorFlow handler that runs the export's raw-text signature.

    Elements are `(key, (text, text_b))` (`text_b` None for single texts);
    results `(key, PredictionResult((text, text_b), {output name: value}))`.
    Beam batches them `batch_size` at a time (its min and max batch size).
    Beam's own `load_model` reads Keras files (`tf.keras.models.load_model`),
    which an export is not: this handler loads it with `tf.saved_model.load`.

    Args:
        saved_model_dir: One version's directory (any TensorFlow file system).
        signature_name: `TEXT_SIGNATURE` or `PAIR_SIGNATURE`.
        output_names: The signature's outputs to keep.
        batch_size: Texts per call of the signature.
    """
    extras.import_extra("apache_beam", "beam", "--beam")
    from apache_beam.ml.inference.base import KeyedModelHandler, PredictionResult
    from apache_beam.ml.inference.tensorflow_inference import TFModelHandlerTensor

    load, predict = raw_text_functions()
    output_names = list(output_names)

    class RawTextModelHandler(TFModelHandlerTensor):
        def load_model(self):
            return load(self._model_uri)

    def inference_fn(model, batch, inference_args, model_id=None):
        texts = [text for text, _ in batch]
        texts_b = None if batch[0][1] is None else [text_b for _, text_b in batch]
        rows = predict(model, signature_name, texts, texts_b, output_names)
        return [PredictionResult(example, row, model_id) for example, row in zip(batch, rows)]

    handler = RawTextModelHandler(
        saved_model_dir, inference_fn=inference_fn, min_batch_size=batch_size, max_batch_size=batch_size
    )
    return KeyedModelHandler(handler)
