"""Plain documents into the original pretraining input format: one sentence
per line, a blank line after each document.

The original's next-sentence task uses the lines as sentences, so running text
is split at sentence ends first. The splitter is a simple rule (a ".", "!" or
"?", optional closing quotes or brackets, whitespace, then an upper-case
letter, digit or opening quote), enough for news-like English.
"""

import re

from keras_bert_impl import filesystem
from keras_bert_impl.io import atomic_output

_SENTENCE_END = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text):
    """Sentences of `text`, stripped, empty ones dropped.

    Example:
    >>> split_sentences('He left. "Why?" she asked. It was 5 p.m. on Friday.')
    ['He left.', '"Why?" she asked.', 'It was 5 p.m. on Friday.']
    """
    sentences = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        sentences.append(text[start : match.start() + len(match.group(1))])
        start = match.end()
    sentences.append(text[start:])
    return [sentence.strip() for sentence in sentences if sentence.strip()]


def write_pretraining_text(documents, path, max_bytes=None):
    """Writes documents (strings) as the original's input file.

    Args:
        documents: Iterable of document texts; empty ones are skipped.
        path: Output file (written under a temporary name, then renamed).
        max_bytes: Stop after the document that reaches this many bytes.

    Returns:
        `(documents written, bytes written)`.
    """
    count = size = 0
    with atomic_output(path) as temporary, filesystem.open_file(temporary, "w", newline="\n") as f:
        for document in documents:
            sentences = split_sentences(" ".join(document.split("\n")))
            if not sentences:
                continue
            text = "\n".join(sentences) + "\n\n"
            f.write(text)
            count += 1
            size += len(text.encode("utf-8"))
            if max_bytes is not None and size >= max_bytes:
                break
    return count, size
