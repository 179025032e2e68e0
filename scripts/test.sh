#!/usr/bin/env bash
# Install everything the test suite needs and run it. This is the README's test command and what
# CI runs (.ci/run). Works on a fresh Debian machine with Python 3.11 and the package registries.
#   bash scripts/test.sh            # whole suite
#   bash scripts/test.sh -k sdk     # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3

[ -x .venv/bin/python ] || "$PY" -m venv .venv
VPY=.venv/bin/python
"$VPY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
# CPU build of torch first: an unpinned torch would resolve to a multi-GB CUDA build.
"$VPY" -m pip install -q --disable-pip-version-check torch==2.13.0
"$VPY" -m pip install -q --disable-pip-version-check -e '.[embeddings,dev]'

# Real components the integration tests run (Debian packages): Prometheus + promtool,
# WordNet (METEOR synonyms), docker-compose (offline validation of docker-compose.yml), headless
# Chromium (the HTML report's browser tests drive it with playwright; playwright's own browser
# download cannot work offline).
need=()
command -v promtool >/dev/null || need+=(prometheus)
command -v chromium-headless-shell >/dev/null || need+=(chromium-headless-shell)
[ -d /usr/share/wordnet ] || need+=(wordnet-base)
command -v docker-compose >/dev/null || need+=(docker-compose)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The openai-agents SDK clashes with traceloop-sdk (same Python module): the agent end-to-end
# tests run its app as a subprocess of its own venv (tests/agents/requirements-sdk.txt).
if [ ! -x .venv-agents/bin/python ]; then
  "$PY" -m venv .venv-agents
  .venv-agents/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  .venv-agents/bin/python -m pip install -q --disable-pip-version-check -r tests/agents/requirements-sdk.txt
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# 4 workers (pytest-xdist) even on 2 cores: most integration tests wait on real parts more than
# they compute. tests/conftest.py schedules by module (or xdist_group, or area), slowest
# first; NEXAGAUGE_TEST_WORKERS=0 runs serially (docs/CONTRIBUTING.md, "Test suite time").
WORKERS="${NEXAGAUGE_TEST_WORKERS:-4}"
# pytest exits 5 when no test ran: with `set -e` that fails this script, never passes silently.
exec "$VPY" -m pytest -p no:cacheprovider -n "$WORKERS" --dist loadgroup "$@"
