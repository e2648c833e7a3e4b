import sys

from tuner.bench.args import parser

parser().parse_known_args()  # --help and usage errors answer here, before the load code's imports

from tuner.bench.cli import main  # noqa: E402

sys.exit(main())
