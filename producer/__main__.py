"""Entry point: ``python -m producer`` (see producer/cli.py)."""

import sys

from producer.cli import main

sys.exit(main())
