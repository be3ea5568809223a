"""Which of our Keras variables is which original checkpoint variable.

The maps are data: original names (google-research/bert's scopes) on the left,
the attribute path from our layer on the right. Every loader and writer goes
through `original_variable_map`, so there is one place that knows the layout.

The variants keep these names wherever a variable has the same role
(RoBERTa and DistilBERT are entirely in BERT's layout, less the token types
and pooler they lack); ALBERT's own variables take google-research/albert's
TF1 names (`ALBERT_*` below), so its checkpoints load by their names.
"""

# Relative to the `BertModel`.
EMBEDDING_VARIABLES = {
    "bert/embeddings/word_embeddings": "word_embedding.embeddings",
    "bert/embeddings/token_type_embeddings": "embedding_postprocessor.token_type_embeddings",
    "bert/embeddings/position_embeddings": "embedding_postprocessor.position_embeddings",
    "bert/embeddings/LayerNorm/gamma": "embedding_postprocessor.layer_norm.gamma",
    "bert/embeddings/LayerNorm/beta": "embedding_postprocessor.layer_norm.beta",
}

# Relative to one `TransformerLayer`, under `bert/encoder/layer_{N}/`.
TRANSFORMER_LAYER_VARIABLES = {
    "attention/self/query/kernel": "attention.query.kernel",
    "attention/self/query/bias": "attention.query.bias",
    "attention/self/key/kernel": "attention.key.kernel",
    "attention/self/key/bias": "attention.key.bias",
    "attention/self/value/kernel": "attention.value.kernel",
    "attention/self/value/bias": "attention.value.bias",
    "attention/output/dense/kernel": "attention_output.kernel",
    "attention/output/dense/bias": "attention_output.bias",
    "attention/output/LayerNorm/gamma": "attention_layer_norm.gamma",
    "attention/output/LayerNorm/beta": "attention_layer_norm.beta",
    "intermediate/dense/kernel": "intermediate.kernel",
    "intermediate/dense/bias": "intermediate.bias",
    "output/dense/kernel": "output_dense.kernel",
    "output/dense/bias": "output_dense.bias",
    "output/LayerNorm/gamma": "output_layer_norm.gamma",
    "output/LayerNorm/beta": "output_layer_norm.beta",
}

# ALBERT (google-research/albert `modeling.py`): the embeddings are E wide
# and projected to H inside `bert/encoder`; the shared blocks are scoped
# `bert/encoder/transformer/group_{G}/inner_group_{J}/`, with these names
# relative to one `TransformerLayer`.
ALBERT_EMBEDDING_PROJECTION_VARIABLES = {
    "bert/encoder/embedding_hidden_mapping_in/kernel": "embedding_postprocessor.embedding_projection.kernel",
    "bert/encoder/embedding_hidden_mapping_in/bias": "embedding_postprocessor.embedding_projection.bias",
}
ALBERT_TRANSFORMER_LAYER_VARIABLES = {
    "attention_1/self/query/kernel": "attention.query.kernel",
    "attention_1/self/query/bias": "attention.query.bias",
    "attention_1/self/key/kernel": "attention.key.kernel",
    "attention_1/self/key/bias": "attention.key.bias",
    "attention_1/self/value/kernel": "attention.value.kernel",
    "attention_1/self/value/bias": "attention.value.bias",
    "attention_1/output/dense/kernel": "attention_output.kernel",
    "attention_1/output/dense/bias": "attention_output.bias",
    "LayerNorm/gamma": "attention_layer_norm.gamma",
    "LayerNorm/beta": "attention_layer_norm.beta",
    "ffn_1/intermediate/dense/kernel": "intermediate.kernel",
    "ffn_1/intermediate/dense/bias": "intermediate.bias",
    "ffn_1/intermediate/output/dense/kernel": "output_dense.kernel",
    "ffn_1/intermediate/output/dense/bias": "output_dense.bias",
    "LayerNorm_1/gamma": "output_layer_norm.gamma",
    "LayerNorm_1/beta": "output_layer_norm.beta",
}

POOLER_VARIABLES = {
    "bert/pooler/dense/kernel": "pooler.dense.kernel",
    "bert/pooler/dense/bias": "pooler.dense.bias",
}

# Relative to the task model.
MASKED_LM_VARIABLES = {
    "cls/predictions/transform/dense/kernel": "masked_lm_head.transform.kernel",
    "cls/predictions/transform/dense/bias": "masked_lm_head.transform.bias",
    "cls/predictions/transform/LayerNorm/gamma": "masked_lm_head.layer_norm.gamma",
    "cls/predictions/transform/LayerNorm/beta": "masked_lm_head.layer_norm.beta",
    "cls/predictions/output_bias": "masked_lm_head.output_bias",
}
NEXT_SENTENCE_VARIABLES = {
    "cls/seq_relationship/output_weights": "next_sentence_head.output_weights",
    "cls/seq_relationship/output_bias": "next_sentence_head.output_bias",
}
# run_classifier.create_model creates these at the top level, unscoped.
CLASSIFIER_VARIABLES = {
    "output_weights": "head.output_weights",
    "output_bias": "head.output_bias",
}
# run_squad.create_model's span head.
SQUAD_VARIABLES = {
    "cls/squad/output_weights": "span_head.output_weights",
    "cls/squad/output_bias": "span_head.output_bias",
}
# Token tagging has no original script; the TF1 BERT taggers built on
# run_classifier keep its unscoped names, [num_labels, H] and [num_labels].
TOKEN_CLASSIFIER_VARIABLES = {
    "output_weights": "token_head.output_weights",
    "output_bias": "token_head.output_bias",
}

# Heads, keyed by the attribute a task model holds them under.
HEAD_VARIABLES = {
    "masked_lm_head": MASKED_LM_VARIABLES,
    "next_sentence_head": NEXT_SENTENCE_VARIABLES,
    "head": CLASSIFIER_VARIABLES,
    "span_head": SQUAD_VARIABLES,
    "token_head": TOKEN_CLASSIFIER_VARIABLES,
}


def _resolve(obj, path):
    for attribute in path.split("."):
        obj = getattr(obj, attribute)
    return obj


def bert_variable_map(bert_model):
    """Original name -> variable for a `BertModel` (embeddings, encoder, pooler).

    Variables a variant lacks (token types, pooler) are left out; ALBERT's
    projection and layer groups are named as google-research/albert names them.
    """
    names = {}
    for name, path in EMBEDDING_VARIABLES.items():
        variable = _resolve(bert_model, path)
        if variable is not None:  # No token types: DistilBERT.
            names[name] = variable
    if bert_model.embedding_postprocessor.embedding_projection is not None:
        for name, path in ALBERT_EMBEDDING_PROJECTION_VARIABLES.items():
            names[name] = _resolve(bert_model, path)
    encoder = bert_model.encoder
    if encoder.layer_groups is None:
        for index, block in enumerate(encoder.blocks):
            for name, path in TRANSFORMER_LAYER_VARIABLES.items():
                names[f"bert/encoder/layer_{index}/{name}"] = _resolve(block, path)
    else:
        for group, inner_blocks in enumerate(encoder.layer_groups):
            for inner, block in enumerate(inner_blocks):
                scope = f"bert/encoder/transformer/group_{group}/inner_group_{inner}"
                for name, path in ALBERT_TRANSFORMER_LAYER_VARIABLES.items():
                    names[f"{scope}/{name}"] = _resolve(block, path)
    if bert_model.pooler is not None:
        for name, path in POOLER_VARIABLES.items():
            names[name] = _resolve(bert_model, path)
    return names


def original_variable_map(model):
    """Original checkpoint name -> Keras variable, for any of our models.

    Args:
        model: A `BertModel`, or a task model holding one as `.bert` together
            with any of the heads in `HEAD_VARIABLES`. The model must be built.

    Returns:
        Dict from names such as `bert/encoder/layer_0/attention/self/query/kernel`
        to the Keras variables holding them, in the original's order.
    """
    bert_model = getattr(model, "bert", model)
    names = bert_variable_map(bert_model)
    for attribute, variables in HEAD_VARIABLES.items():
        if hasattr(model, attribute):
            for name, path in variables.items():
                names[name] = _resolve(model, path)
    return names
