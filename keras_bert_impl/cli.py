"""What every command-line tool shares: flags in the original's style, and bad
input reported as one line on stderr with a non-zero exit code."""

import argparse
import os
import sys

from keras_bert_impl.errors import BertError

# Exit codes: 2 for a bad flag (as argparse), 1 for bad input data or files.
EXIT_BAD_FLAG = 2
EXIT_BAD_INPUT = 1


def quiet_tensorflow():
    """Silences TensorFlow's C++ start-up logs unless the user set the level."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def str_to_bool(value):
    """Parses absl-style booleans: true/false, 1/0, yes/no (any case)."""
    lowered = str(value).strip().lower()
    if lowered in ("true", "1", "yes", "t", "y"):
        return True
    if lowered in ("false", "0", "no", "f", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


class FlagParser(argparse.ArgumentParser):
    """`argparse` with one-line errors and the original's boolean flags.

    `add_bool(name, default)` accepts `--name`, `--name=false` and absl's
    `--noname`, so command lines written for the original scripts work.
    """

    def error(self, message):
        self.exit(EXIT_BAD_FLAG, f"{self.prog}: error: {message} (see --help)\n")

    def add_bool(self, name, default, help):
        self.add_argument(
            f"--{name}", nargs="?", const=True, default=default, type=str_to_bool,
            help=f"{help} (default: {default})",
        )
        self.add_argument(f"--no{name}", dest=name, action="store_false", help=argparse.SUPPRESS)

    def add_fine_tuning_flags(self):
        """The original fine-tuning scripts' release and training flags, plus
        `--strategy` and `--seed`, shared by run_classifier, run_squad and
        run_ner."""
        add = self.add_argument
        add("--bert_config_file", help="The original bert_config.json.")
        add("--vocab_file", help="vocab.txt the model was trained on.")
        add("--init_checkpoint", help="Original-format checkpoint to start from (e.g. bert_model.ckpt).")
        self.add_bool("do_lower_case", True, "Lower-case the input; must match the checkpoint.")
        add("--train_batch_size", type=int, default=32, help="Total batch size for training (default: %(default)s).")
        add("--learning_rate", type=float, default=5e-5, help="Initial learning rate for Adam (default: %(default)s).")
        add("--num_train_epochs", type=float, default=3.0, help="Training epochs (default: %(default)s).")
        add("--warmup_proportion", type=float, default=0.1, help="Fraction of steps of linear warmup (default: %(default)s).")
        add("--save_checkpoints_steps", type=int, default=1000, help="Steps between training checkpoints (default: %(default)s).")
        add("--strategy", default="default", help="default, one_device, mirrored, multi_worker_mirrored or tpu (default: %(default)s).")
        add("--tpu_name", help="TPU name or grpc:// address for --strategy=tpu.")
        add("--seed", type=int, default=12345, help="Seed of initialisation, dropout and shuffling (default: %(default)s).")

    def require(self, args, *names):
        """Errors (one line) for each required flag left unset."""
        missing = [f"--{n}" for n in names if getattr(args, n) in (None, "")]
        if missing:
            self.error(f"missing required flag(s): {', '.join(missing)}")


def run_tool(main, argv=None):
    """Runs `main(argv)`; any `BertError` or OS error becomes one stderr line.

    Returns:
        The process exit code.
    """
    prog = os.path.basename(sys.argv[0]) if argv is None else "tool"
    try:
        main(argv)
    except BertError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"{prog}: error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0
