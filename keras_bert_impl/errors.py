"""One exception type per kind of bad input.

Every error raised for bad user input derives from `BertError`, so the tools can
turn any of them into a single line on stderr and a non-zero exit code, while
library callers can catch the precise kind they care about. Messages always name
the file (and line or key) that is wrong.
"""


class BertError(Exception):
    """Base class of every user-facing error in keras_bert_impl."""


class ConfigError(BertError, ValueError):
    """A `bert_config.json` (or HF `config.json`) is malformed or inconsistent."""


class VocabError(BertError, ValueError):
    """A vocabulary file is missing, unreadable or lacks required tokens."""


class CheckpointError(BertError, ValueError):
    """A checkpoint does not match the model it is loaded into."""


class InputFileError(BertError, ValueError):
    """An input data file is missing, undecodable or malformed."""


class SequenceLengthError(BertError, ValueError):
    """A sequence is longer than the model's `max_position_embeddings`."""


class OutputPathError(BertError, ValueError):
    """An output path that cannot be a directory (it, or a parent, is a file)."""


class TrainingEnvironmentError(BertError, RuntimeError):
    """The process is set up so that training would compute wrong steps (a serving-only setting in its environment)."""


class TrainingDivergedError(BertError, ArithmeticError):
    """Training produced a non-finite loss or weights (a learning rate too large, bad targets)."""
