"""The demo RAG app now lives in the package (``nexagauge.demo.app``) so ``nexagauge demo`` can run
it from an installed wheel; this path stays for ``docker-compose.yml`` and older instructions.

    python examples/demo_app/app.py --endpoint http://localhost:4317 --rate 2
"""

from __future__ import annotations

import sys

from nexagauge.demo.app import DOCS, QUESTIONS, DemoApp, DemoLLM, main, search

__all__ = ["DOCS", "QUESTIONS", "DemoApp", "DemoLLM", "main", "search"]

if __name__ == "__main__":
    sys.exit(main())
