"""``python -m nexagauge``: the same as the ``nexagauge`` command."""

import sys

from nexagauge.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
