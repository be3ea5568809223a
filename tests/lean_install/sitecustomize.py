"""Child Pythons the tests start import only what a lean install has.

`tests/conftest.py` puts this directory on `PYTHONPATH` for the processes
the tests start (the tools, exports loaded the way TF Serving loads them,
multi-process training), so Python runs this module at start-up. It hides
the packages named in `KERAS_BERT_IMPL_TESTS_HIDE` (comma-separated): the
test and demo extras' packages that `import keras` would otherwise load
(scikit-learn for its wrappers, matplotlib and OpenCV for its image
utilities, pandas for its data adapters), about 1.5 s of CPU per
TensorFlow start-up. A tool run by a test then starts as it does after
`pip install keras_bert_impl`, where none of them is installed: Keras'
optional imports fail as they would there, and a tool that imported one
outside `keras_bert_impl.extras.import_extra` fails its test with
`ModuleNotFoundError` naming this file. Tests of the tools that need one
(`bert-figures`, `bert-tfidf-baseline`, `bert-demo`) clear the variable.
"""

import os
import sys


class _LeanInstall:
    """A meta path finder that refuses the hidden top-level packages."""

    def __init__(self, hidden):
        self.hidden = frozenset(hidden)

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in self.hidden:
            raise ModuleNotFoundError(
                f"No module named {top!r} (hidden by tests/lean_install: not a runtime requirement)", name=top)
        return None


_HIDDEN = [name for name in os.environ.get("KERAS_BERT_IMPL_TESTS_HIDE", "").split(",") if name]
if _HIDDEN:
    sys.meta_path.insert(0, _LeanInstall(_HIDDEN))

# The processes the tests start collect garbage as the test processes do (`collector.py`, beside this file): a
# start-up (`import tensorflow` and a task module) made ~1,150 collections, 16 at these thresholds.
from collector import collect_less_often  # noqa: E402

collect_less_often()
