"""Tokenization: the original BERT WordPiece tokenizer, exact and fast."""

from keras_bert_impl.tokenization.full_tokenizer import (
    SPECIAL_TOKENS,
    BasicTokenizer,
    FullTokenizer,
    WordpieceTokenizer,
    check_special_tokens,
    check_vocab_fits,
    convert_to_unicode,
    load_vocab,
    validate_case_matches_checkpoint,
    whitespace_tokenize,
)

__all__ = [
    "SPECIAL_TOKENS",
    "BasicTokenizer",
    "FullTokenizer",
    "WordpieceTokenizer",
    "check_special_tokens",
    "check_vocab_fits",
    "convert_to_unicode",
    "load_vocab",
    "validate_case_matches_checkpoint",
    "whitespace_tokenize",
]
