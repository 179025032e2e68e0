"""Fixtures of the HTML report tests: a real headless Chromium, and real ``nexagauge run`` results.

The browser is Debian's ``chromium-headless-shell`` driven by playwright (``executable_path``;
playwright's own browser download cannot work offline): ``scripts/test.sh`` installs it. Every
page is opened with every request routed: the report file itself is served, anything else is
aborted and recorded, as is every console error and page error.

The results come from the real command (``nexagauge run`` in a subprocess) against the loopback
OpenAI-compatible judge of ``tests/support/openai_server.py``, on a dataset with a hostile
payload and secrets in every field, bad records and a warning; a second run changes three
answers, so the comparison has known regressions and a known improvement. A third run
(``agent_run``, :mod:`tests.report.agent_data`) evaluates agent records with tool calls against a
loopback judge that grounds honestly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:  # makes tests/support importable as `support`
    sys.path.insert(0, _TESTS)

from support.browser import BROWSER_ARGS, INSTALL_HINT, chromium_path, only  # noqa: E402
from support.openai_server import OpenAIServer, Reply, Request, smart_chat_content  # noqa: E402

#: a payload that runs script if any field is ever parsed as markup (or breaks out of a script)
XSS = (
    '<img src=x onerror="window.__xss=(window.__xss||0)+1">'
    "</script><script>window.__xss=1</script>"
    '<svg onload="window.__xss=1"></svg>'
    "\"><iframe srcdoc='<script>parent.__xss=1</script>'></iframe>"
    "{{7*7}} ${7*7} javascript:window.__xss=1"
)
#: secrets the SDK's rules know (an OpenAI project key, an AWS access key id)
OPENAI_KEY = "sk-proj-Q8vTzR3mXw2LkP9sN4bY7cJ1hF6dG0aE5uI2oW8qZ3xV7nM4"
AWS_KEY = "AKIAQ7XW3RZ5MPLT2JKN"
SECRETS = (OPENAI_KEY, AWS_KEY)
#: what a scrubbed value becomes (``[scrubbed:api_key]``; the evaluator numbers the values of a
#: case: ``[scrubbed:api_key#2]``)
PLACEHOLDER = r"\[scrubbed:[a-z_]+(?:#\d+)?\]"
#: the configured judge API key: a shape no rule knows, replaced because it is configured
JUDGE_KEY = "judge-canary-7f3e9d21"


def hostile(field: str) -> str:
    """The text put in ``field``: the payload and both secrets."""
    return f"{field}: {XSS} key={OPENAI_KEY} aws {AWS_KEY}"


HOSTILE_ID = f"id-{XSS}-{OPENAI_KEY}"
#: ids of the cases the second run makes worse / better (refmatch against the reference)
REGRESSED = ("deg-1", "deg-2")
IMPROVED = ("imp-1",)


def _records(second: bool) -> list[str]:
    good = "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."
    bad = "Bananas are yellow and rich in potassium."
    rows: list[dict[str, Any]] = [
        {
            "case_id": "eiffel",
            "question": "What is the Eiffel Tower and where is it?",
            "answer": good + " It was completed in 1889.",
            "contexts": [
                "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris.",
                "It was completed in 1889 for the World's Fair.",
            ],
            "reference": good,
            "metadata": {"team": "travel"},
        },
        {
            "case_id": "deg-1",
            "question": "What is the Eiffel Tower?",
            "answer": bad if second else good,
            "reference": good,
        },
        {
            "case_id": "deg-2",
            "question": "Where is the Eiffel Tower?",
            "answer": bad if second else good,
            "reference": good,
        },
        {
            "case_id": "imp-1",
            "question": "Describe the Eiffel Tower.",
            "answer": good if second else bad,
            "reference": good,
        },
        {
            "case_id": HOSTILE_ID,
            "question": hostile("question"),
            "answer": hostile("answer") + ". " + hostile("second claim"),
            "contexts": [hostile("context"), "Plain passage about Paris."],
            "reference": hostile("reference"),
            "metadata": {hostile("metakey"): hostile("metadata"), "pasted": JUDGE_KEY},
            "relevance": {"include_reasoning": True},
            "grounding": {"include_reasoning": True},
        },
    ]
    lines = [json.dumps(r) for r in rows]
    # bad records: invalid JSON holding the payload, a record without an answer, a warning
    lines.append('{"case_id": "broken", "answer": ' + json.dumps(hostile("badjson"))[:-1])
    lines.append(json.dumps({"case_id": hostile("noanswer"), "question": "q"}))
    lines.append(json.dumps({"case_id": "number", "question": "How many?", "answer": 144}))
    return lines


def reasoning_handler(req: Request) -> Reply | None:
    """The smart judge's answer, with the payload and secrets as the judge's reasoning."""
    schema = req.schema or {}
    if "verdicts" not in (schema.get("properties") or {}):
        return None
    ans = json.loads(smart_chat_content(req))
    if "reasoning" in ans:
        ans["reasoning"] = hostile("reasoning")
    return Reply(content=json.dumps(ans))


def nexagauge_command() -> list[str]:
    script = Path(sys.executable).with_name("nexagauge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "nexagauge"]


def run_env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEXAGAUGE_", "OPENAI_"))}
    env.update(
        NEXAGAUGE_CACHE_DIR=str(cache),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@dataclass
class Runs:
    """Two real runs of the same dataset (the second with three answers changed)."""

    base: Path
    new: Path
    dataset: Path
    base_rc: int
    new_rc: int
    new_stderr: str


def run_eval(
    srv: OpenAIServer, root: Path, data: Path, out: Path, only: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``nexagauge run eval --only ONLY -i DATA -o OUT`` in a subprocess, judged by ``srv``."""
    env = run_env(
        root / "cache",
        NEXAGAUGE_JUDGE_BASE_URL=srv.base_url,
        NEXAGAUGE_JUDGE_API_KEY=JUDGE_KEY,
        NEXAGAUGE_JUDGE_MODE="llm",
    )
    cmd = [*nexagauge_command(), "run", "eval", "--only", only, "-i", str(data), "-o", str(out)]
    cmd += ["--no-progress", "-q", *extra]
    p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=180)
    assert (out / "summary.json").is_file(), p.stderr
    return p


@pytest.fixture(scope="package")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    root = tmp_path_factory.mktemp("runs")
    with OpenAIServer(handler=reasoning_handler) as srv:
        rcs, err = [], ""
        for name, second in (("base", False), ("new", True)):
            data = root / f"{name}.jsonl"
            data.write_text("\n".join(_records(second)) + "\n", encoding="utf-8")
            extra = ["--baseline", str(root / "base")] if second else []
            p = run_eval(srv, root, data, root / name, "relevance,grounding,refmatch", *extra)
            rcs.append(p.returncode)
            err = p.stderr
    yield Runs(root / "base", root / "new", root / "new.jsonl", rcs[0], rcs[1], err)


@pytest.fixture(scope="package")
def agent_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The results directory of a real ``nexagauge run`` on the agent dataset."""
    from tests.report.agent_data import agent_judge, agent_records

    root = tmp_path_factory.mktemp("agent")
    data = root / "agent.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in agent_records()) + "\n", encoding="utf-8")
    with OpenAIServer(handler=agent_judge) as srv:
        run_eval(srv, root, data, root / "out", "grounding,agent_signals,task_completion")
    yield root / "out"


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        exe = chromium_path()
        if exe is None:
            pytest.fail(INSTALL_HINT)
        b = pw.chromium.launch(executable_path=exe, args=BROWSER_ARGS)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Opened:
    """A report open in a page, with what it asked the network for and what it logged."""

    page: Any
    url: str
    requests: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def foreign_requests(self) -> list[str]:
        return [u for u in self.requests if u != self.url]


Opener = Callable[..., Opened]


@pytest.fixture
def open_report(browser: Any) -> Iterator[Opener]:
    """``open_report(path_or_url)``: a new page on the report; closed after the test."""
    contexts: list[Any] = []

    def open_(target: Path | str, viewport: tuple[int, int] = (1280, 900)) -> Opened:
        url = target.resolve().as_uri() if isinstance(target, Path) else target
        ctx = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        contexts.append(ctx)
        page = ctx.new_page()
        opened = Opened(page, url)

        page.route("**/*", only(url, opened.blocked))
        page.on("request", lambda r: opened.requests.append(r.url))
        page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: opened.errors.append(f"pageerror: {e}"))
        page.goto(url, wait_until="load")
        return opened

    yield open_
    for ctx in contexts:
        ctx.close()
