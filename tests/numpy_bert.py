"""An independent NumPy BERT, written from the formulas of the original
`modeling.py` / `run_pretraining.py`, over weights keyed by original names.

Tests compare our Keras layers against this; it shares no code with the
package (float64 throughout, so it is also the more precise of the two).
"""

import math

import numpy as np


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gelu_erf(x):
    from scipy.special import erf  # scipy ships with scikit-learn's deps

    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


ACTIVATIONS = {
    "gelu": gelu_tanh,
    "gelu_exact": gelu_erf,
    "relu": lambda x: np.maximum(x, 0),
    "tanh": np.tanh,
    "linear": lambda x: x,
}


def layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x, axis=-1):
    x = x - x.max(axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis, keepdims=True)


def log_softmax(x, axis=-1):
    x = x - x.max(axis, keepdims=True)
    return x - np.log(np.exp(x).sum(axis, keepdims=True))


def bert_forward(w, config, input_ids, input_mask, segment_ids):
    """Returns (all_layer_outputs, pooled_output, all_attention_probs)."""
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    act = ACTIVATIONS[config["hidden_act"]]
    n_heads = config["num_attention_heads"]
    batch, seq = input_ids.shape
    hidden = config["hidden_size"]
    d = hidden // n_heads

    x = w["bert/embeddings/word_embeddings"][input_ids]
    x = x + w["bert/embeddings/token_type_embeddings"][segment_ids]
    x = x + w["bert/embeddings/position_embeddings"][:seq][None]
    x = layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])

    adder = (1.0 - input_mask[:, None, None, :].astype(np.float64)) * -10000.0
    outputs, probs_all = [], []
    for i in range(config["num_hidden_layers"]):
        p = f"bert/encoder/layer_{i}/"

        def dense(t, name):
            return t @ w[p + name + "/kernel"] + w[p + name + "/bias"]

        def heads(t):
            return t.reshape(batch, seq, n_heads, d).transpose(0, 2, 1, 3)

        q = heads(dense(x, "attention/self/query"))
        k = heads(dense(x, "attention/self/key"))
        v = heads(dense(x, "attention/self/value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + adder
        probs = softmax(scores)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
        att = layer_norm(
            dense(ctx, "attention/output/dense") + x,
            w[p + "attention/output/LayerNorm/gamma"],
            w[p + "attention/output/LayerNorm/beta"],
        )
        inter = act(dense(att, "intermediate/dense"))
        x = layer_norm(
            dense(inter, "output/dense") + att,
            w[p + "output/LayerNorm/gamma"],
            w[p + "output/LayerNorm/beta"],
        )
        outputs.append(x)
        probs_all.append(probs)
    pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    return outputs, pooled, probs_all


def mlm_logits(w, config, sequence_output, positions):
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    act = ACTIVATIONS[config["hidden_act"]]
    gathered = np.take_along_axis(sequence_output, positions[:, :, None], axis=1)
    h = act(gathered @ w["cls/predictions/transform/dense/kernel"] + w["cls/predictions/transform/dense/bias"])
    h = layer_norm(h, w["cls/predictions/transform/LayerNorm/gamma"], w["cls/predictions/transform/LayerNorm/beta"])
    return h @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]


def nsp_logits(w, pooled):
    return pooled @ np.asarray(w["cls/seq_relationship/output_weights"], np.float64).T + np.asarray(
        w["cls/seq_relationship/output_bias"], np.float64
    )


def pretraining_losses(mlm_logits_, masked_lm_ids, masked_lm_weights, nsp_logits_, nsp_labels):
    """The original get_masked_lm_output / get_next_sentence_output / metric_fn."""
    vocab = mlm_logits_.shape[-1]
    log_probs = log_softmax(mlm_logits_.reshape(-1, vocab))
    ids = masked_lm_ids.reshape(-1)
    weights = masked_lm_weights.reshape(-1).astype(np.float64)
    one_hot = np.eye(vocab)[ids]
    per_example = -(log_probs * one_hot).sum(-1)
    mlm_loss = (weights * per_example).sum() / (weights.sum() + 1e-5)

    nsp_log_probs = log_softmax(nsp_logits_)
    labels = nsp_labels.reshape(-1)
    nsp_per_example = -(nsp_log_probs * np.eye(2)[labels]).sum(-1)
    nsp_loss = nsp_per_example.mean()

    predictions = log_probs.argmax(-1)
    return {
        "loss": mlm_loss + nsp_loss,
        "masked_lm_accuracy": (weights * (predictions == ids)).sum() / weights.sum(),
        "masked_lm_loss": (weights * per_example).sum() / weights.sum(),
        "next_sentence_accuracy": (nsp_log_probs.argmax(-1) == labels).mean(),
        "next_sentence_loss": nsp_loss,
    }
