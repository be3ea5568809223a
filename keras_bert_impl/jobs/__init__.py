"""What each command-line tool in `tools/` does, as one function call.

A tool parses its absl flags, checks them, and calls one function here with
the flag values as keyword arguments of the same names:

| tool | function |
| --- | --- |
| `create_pretraining_data.py` | `create_pretraining_data.create_pretraining_data` |
| `run_pretraining.py` | `run_pretraining.run_pretraining` |
| `extract_features.py` | `extract_features.extract_features` |
| `convert_hf_checkpoint.py` | `convert_hf_checkpoint.convert_hf_checkpoint` |
| `convert_keras_hub.py` | `convert_keras_hub.convert_keras_hub` |
| `prepare_data.py` | `prepare_data.prepare_data` |
| `tfidf_baseline.py` | `tfidf_baseline.tfidf_baseline` |
| `make_figures.py` | `make_figures.make_figures` |
| `demo.py` | `demo.run_demo` |

The functions import TensorFlow only when called, so a tool's `--help` is quick.
"""
