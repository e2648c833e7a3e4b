"""`python -m tuner.cli` is the `servetune` command."""

from tuner.cli import main

raise SystemExit(main())
