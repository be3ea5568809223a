#!/usr/bin/env python
"""Lists or removes the releases that named sources (hf://ORG/NAME[@REVISION], google:NAME, archive URLs,
kaggle://OWNER/MODEL/keras/VARIATION[/VERSION], keras-hub preset names) were fetched into.

The cache is $KERAS_BERT_IMPL_CACHE/releases (default ~/.cache/keras_bert_impl/releases);
docs/SOURCES.md describes it.

Example:
    bert-cache list
    bert-cache rm hf://google-bert/bert-base-uncased
    bert-cache rm hf://google-bert/bert-base-uncased@86b5e0934494bd15c9632b12f734a8a67f723594
    bert-cache rm kaggle://keras/bert/keras/bert_base_en_uncased
"""

import sys

from absl import flags

from keras_bert_impl.cli import FlagError, parse_flags, run_tool
from keras_bert_impl.jobs.release_cache import COMMANDS, release_cache


def define_flags(fv):
    flags.DEFINE_string("cache_dir", None, "Root of the releases' cache (default: $KERAS_BERT_IMPL_CACHE/releases or "
                        "~/.cache/keras_bert_impl/releases).", flag_values=fv)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    positional = [arg for arg in argv if not arg.startswith("-")]
    fv = parse_flags(define_flags, [arg for arg in argv if arg.startswith("-")], prog="bert-cache",
                     description=__doc__)
    if not positional or positional[0] not in COMMANDS:
        raise FlagError(f"give a command: {' or '.join(COMMANDS)}")
    if positional[0] == "rm" and len(positional) < 2:
        raise FlagError("rm: name the sources to remove (hf://ORG/NAME[@REVISION], kaggle://..., ...)")
    release_cache(positional[0], positional[1:], fv.cache_dir)


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
