"""The real ``nexagauge`` command (subprocess) on real files.

Judge nodes run with ``NEXAGAUGE_JUDGE_MODE=none`` (they skip with "no judge configured"), so the
outcomes are deterministic. ``refmatch`` (deterministic) is the metric target; the other tests use
the cheap ``chunk`` target where only record handling matters.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from nexagauge.cli import main as cli_main
from nexagauge.cli.run import check_bounds

from .conftest import SAMPLE, SAMPLE_BAD, Runner, SampleRun

REFERENCE_KEYS = ("reference", "ground_truth", "gold_answer", "label")
SAMPLE_RECORDS = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def _cases(out: Path) -> dict[str, dict[str, Any]]:
    return {
        d["case_id"]: d
        for d in (json.loads(p.read_text()) for p in sorted((out / "cases").glob("*.json")))
    }


def _errors(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]


# -- run on the bundled sample (refmatch, real metrics) --------------------------------------------
def test_run_refmatch_on_sample(refmatch_run: SampleRun) -> None:
    r, out = refmatch_run.result, refmatch_run.out
    assert r.rc == 0, r.err
    n = len(SAMPLE_RECORDS)
    with_ref = sum(
        1
        for rec in SAMPLE_RECORDS
        if any(k in rec for k in ("reference", "ground_truth", "gold_answer", "label"))
    )
    assert f"{n} cases, 0 failed records, 0 node errors, 1 metric errors" in r.out
    for metric in ("rouge1", "rouge2", "rougeL", "bleu", "meteor"):
        assert metric in r.out  # the terminal table
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == n and summary["cases"] == n and summary["exit_status"] == 0
    rows = {row["metric"]: row for row in summary["metrics"]}
    assert set(rows) == {"rouge1", "rouge2", "rougeL", "bleu", "meteor"}
    # "144" vs "144": no bigrams, so ROUGE-2 is null with an error (not a fake 0 or 1)
    assert rows["rouge2"]["errors"] == 1 and rows["rouge2"]["count"] == with_ref - 1
    assert "rouge2" in _cases(out)["numeric-answer"]["errors"]
    for row in rows.values():
        assert row["node"] == "refmatch"
        assert row["count"] + row["errors"] == with_ref and row["skipped"] == n - with_ref
        assert 0.0 < row["mean"] < 1.0 and 0.0 <= row["median"] <= 1.0
        assert row["passed"] + row["failed"] == row["count"]
    assert summary["nodes"]["refmatch"]["reasons"] == {"not eligible: no reference": n - with_ref}
    # summary.csv has the same numbers
    with (out / "summary.csv").open() as f:
        csv_rows = {row["metric"]: row for row in csv.DictReader(f)}
    assert float(csv_rows["rougeL"]["mean"]) == pytest.approx(rows["rougeL"]["mean"])
    assert int(csv_rows["bleu"]["skipped"]) == n - with_ref
    # one report per case, files named safely, every outcome has timings and cached flags
    cases = _cases(out)
    assert len(cases) == n == len(list((out / "cases").glob("*.json")))
    eiffel = cases["eiffel-tower-basic"]
    assert eiffel["file"] == "cases/eiffel-tower-basic.json"
    assert eiffel["scores"]["rouge1"] > 0.5 and eiffel["index"] == 0 and eiffel["line"] == 1
    assert eiffel["nodes"]["refmatch"]["output"]["metrics"][0]["name"] == "rouge1"
    assert set(eiffel["outcomes"]) == {"scan", "refmatch", "eval", "report"}
    assert all(o["cached"] is False and o["elapsed_s"] >= 0 for o in eiffel["outcomes"].values())
    # the off-topic/wrong answers score lower than the faithful ones
    assert (
        cases["qa-photosynthesis-wrong"]["scores"]["rougeL"]
        < cases["qa-photosynthesis"]["scores"]["rougeL"]
    )
    assert _errors(out) == []


def test_rerun_uses_cache_and_fail_under(
    cli: Runner, refmatch_run: SampleRun, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(refmatch_run.cache, cache)
    # the first 12 records: all of their refmatch results are cached (numeric-answer, whose output
    # carries a metric error and is therefore never cached, comes later)
    args = (
        "run",
        "refmatch",
        "--input",
        str(SAMPLE),
        "-o",
        "out",
        "--no-progress",
        "--limit",
        "12",
    )
    r = cli(
        *args,
        "--fail-under",
        "rouge1=0.99",
        "--fail-under",
        "refmatch.bleu=0.0",
        "--fail-under",
        "no_such_metric=0.5",
        cache_dir=cache,
    )
    assert r.rc == 3, r.err  # only the bounds failed
    assert "FAIL --fail-under rouge1=0.99" in r.err
    assert "no_such_metric=0.5: metric not in results" in r.err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    checks = {c["metric"]: c for c in summary["fail_under"]}
    assert checks["rouge1"]["ok"] is False and checks["bleu"]["ok"] is True
    eligible = sum(1 for rec in SAMPLE_RECORDS[:12] if any(k in rec for k in REFERENCE_KEYS))
    assert (summary["cache"]["hits"], summary["cache"]["misses"]) == (eligible, 0)
    assert summary["records"] == 12
    eiffel = _cases(tmp_path / "out")["eiffel-tower-basic"]
    assert eiffel["outcomes"]["refmatch"]["cached"] is True
    assert (
        eiffel["scores"]
        == json.loads((refmatch_run.out / "cases" / "eiffel-tower-basic.json").read_text())[
            "scores"
        ]
    )


def test_check_bounds_matching() -> None:
    rows = [
        {"metric": "rouge1", "node": "refmatch", "mean": 0.5},
        {"metric": "refalign.f1", "node": "refalign", "mean": None},
    ]
    got = {
        (c["metric"], c["bound"]): c["ok"]
        for c in check_bounds(rows, {"rouge1": 0.4, "refmatch.rouge1": 0.6, "f1": 0.1, "x": 0.0})
    }
    assert got == {
        ("rouge1", 0.4): True,
        ("rouge1", 0.6): False,
        ("refalign.f1", 0.1): False,
        ("x", 0.0): False,
    }


# -- bad records ----------------------------------------------------------------------------------------
def test_bad_records_are_reported_and_the_rest_run(cli: Runner, tmp_path: Path) -> None:
    r = cli("run", "chunk", "--input", str(SAMPLE_BAD), "-o", "out")
    assert r.rc == 1
    assert "2 cases, 7 failed records" in r.out
    assert "errors.jsonl" in r.err
    errs = _errors(tmp_path / "out")
    assert [e["index"] for e in errs] == [1, 2, 3, 4, 5, 6, 7]
    assert all(e["kind"] == "record" and e["line"] == e["index"] + 1 for e in errs)
    by_index = {e["index"]: e for e in errs}
    assert "invalid JSON" in by_index[1]["reason"]
    assert by_index[2]["field"] == "output" and by_index[2]["case_id"] == "bad-no-output"
    assert (
        by_index[3]["field"] == "relevance.scoring_mode" and "scale_1_10" in by_index[3]["reason"]
    )
    assert by_index[5]["field"] == "output" and "conflicting" in by_index[5]["reason"]
    assert set(_cases(tmp_path / "out")) == {"bad-good-1", "bad-good-2"}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["cases"], summary["failed_records"], summary["exit_status"]) == (2, 7, 1)


# -- formats, --limit, --field ----------------------------------------------------------------------------
def test_json_array_input_with_a_bad_element_and_limit(cli: Runner, tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text(
        "[\n"
        + ",\n".join(json.dumps(rec, indent=2) for rec in SAMPLE_RECORDS[:5])
        + ',\n{"case_id": "broken", "output": }\n]'
    )
    r = cli("run", "chunk", "--input", str(data), "-o", "all")
    assert r.rc == 1 and "5 cases, 1 failed records" in r.out
    [err] = _errors(tmp_path / "all")
    assert err["index"] == 5 and "invalid JSON" in err["reason"]
    assert (
        err["line"] == data.read_text().splitlines().index('{"case_id": "broken", "output": }') + 1
    )
    r = cli("run", "chunk", "--input", str(data), "-o", "lim", "--limit", "3", "--progress")
    assert r.rc == 0 and "3 cases, 0 failed records" in r.out
    assert "3/3 cases" in r.err and "\x1b" not in r.err  # the progress bar: stderr, no escapes
    assert set(_cases(tmp_path / "lim")) == {
        rec.get("case_id") or rec.get("id") for rec in SAMPLE_RECORDS[:3]
    }


def test_csv_input_with_field_mapping(cli: Runner, tmp_path: Path) -> None:
    data = tmp_path / "tickets.csv"
    with data.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ticket", "user_question", "bot_reply", "kb", "relevance"])
        w.writerow(
            [
                "T/1",
                "How do I reset my password?",
                "Use 'Forgot password'.",
                '["Reset via Forgot password.", "Links last 60 minutes."]',
                '{"scoring_mode": "scale_1_5"}',
            ]
        )
        w.writerow(["T-2", "Where is my order?", "It ships tomorrow,\nwith tracking.", "", ""])
        w.writerow(["T-3", "Bad knob", "Answer", "", '{"scoring_mode": "scale_1_10"}'])
    mapping = [
        "--field",
        "case_id=ticket",
        "--field",
        "output=bot_reply",
        "--field",
        "input=user_question",
        "--field",
        "context=kb",
    ]
    forced = tmp_path / "tickets.txt"  # an unknown extension needs --format
    forced.write_text(data.read_text())
    r = cli("run", "chunk", "--input", str(forced), "--format", "csv", "-o", "out", *mapping)
    assert r.rc == 1, r.err
    assert "2 cases, 1 failed records" in r.out
    cases = _cases(tmp_path / "out")
    assert set(cases) == {"T/1", "T-2"}
    assert cases["T/1"]["file"].startswith("cases/T_1-")  # unsafe characters sanitized
    # the mapped column really is the evaluated output (the report holds the target's chunks)
    chunks = cases["T-2"]["nodes"]["chunk"]["output"]["chunks"]
    assert (
        "".join(c["item"]["text"] for c in chunks)
        .replace("\n", " ")
        .startswith("It ships tomorrow")
    )
    [err] = _errors(tmp_path / "out")
    assert err["index"] == 2 and err["line"] == 5 and err["field"] == "relevance.scoring_mode"
    # without the mapping no record has an output column
    r = cli("run", "chunk", "--input", str(data), "-o", "raw")
    assert r.rc == 1 and "0 cases, 3 failed records" in r.out
    assert all(e["field"] == "output" for e in _errors(tmp_path / "raw"))


def test_duplicate_case_ids_get_distinct_files(cli: Runner, tmp_path: Path) -> None:
    data = tmp_path / "dup.jsonl"
    data.write_text(
        '{"id": "same", "output": "a"}\n{"id": "same", "output": "b"}\n{"id": "SAME", "output": "c"}\n'
    )
    r = cli("run", "chunk", "--input", str(data), "-o", "out", "--json")
    assert r.rc == 0, r.err
    assert r.json()["cases"] == 3  # --json prints summary.json
    files = sorted(p.name for p in (tmp_path / "out" / "cases").glob("*.json"))
    assert files == ["SAME-2.json", "same-1.json", "same.json"]


# -- usage errors ------------------------------------------------------------------------------------------
USAGE_ERRORS = [
    (["run", "nope", "--input", "x.jsonl"], "unknown node 'nope'"),
    (["run", "chunk", "--input", "missing.jsonl"], "does not exist"),
    (["run", "chunk", "--input", "data.xml"], "--format"),
    (["run", "chunk", "--input", "d.jsonl", "--field", "outptu=x"], "unknown fields"),
    (["run", "chunk", "--input", "d.jsonl", "--field", "output"], "KEY=VALUE"),
    (["run", "chunk", "--input", "d.jsonl", "--fail-under", "rouge1=high"], "not a number"),
    (["run", "chunk", "--input", "d.jsonl", "--concurrency", "0"], "--concurrency"),
    (["run", "eval", "--input", "d.jsonl", "--only", "chunk"], "--only names unknown"),
    (["run", "chunk", "--input", "d.jsonl", "--config", "missing.toml"], "does not exist"),
    (["cache", "clear", "--older-than", "soon"], "invalid duration"),
    (["cache", "stats", "--older-than", "7d"], "applies to `cache clear`"),
]


@pytest.mark.parametrize("args,message", USAGE_ERRORS)
def test_usage_errors_exit_2(
    args: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "d.jsonl").write_text('{"output": "a"}\n')
    (tmp_path / "data.xml").write_text("<a/>")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEXAGAUGE_CACHE_DIR", str(tmp_path / "cache"))
    assert cli_main.main(args) == 2
    assert message in capsys.readouterr().err


def test_usage_error_from_the_real_command(cli: Runner) -> None:
    r = cli("run", "nope", "--input", "x.jsonl")
    assert r.rc == 2 and "unknown node 'nope'" in r.err and "Traceback" not in r.err


# -- estimate, cache, nodes ----------------------------------------------------------------------------------
def test_estimate_redteam_json_and_table(cli: Runner) -> None:
    r = cli("estimate", "redteam", "--input", str(SAMPLE), "--json")
    assert r.rc == 0, r.err
    doc = r.json()
    [node] = doc["nodes"]
    n = len(SAMPLE_RECORDS)
    assert node["node"] == "redteam" and node["cases"] == n
    assert node["calls"] >= n and node["input_tokens"] > 50 * n and node["output_tokens"] > 0
    assert node["model"] == "gpt-4o-mini" and node["usd"] > 0
    assert doc["total"]["usd"] == pytest.approx(node["usd"])
    r = cli(
        "estimate",
        "redteam",
        "--input",
        str(SAMPLE_BAD),
        "--limit",
        "3",
        NEXAGAUGE_JUDGE_MODEL="my-selfhosted-model",
    )
    assert r.rc == 1, r.err  # a bad record among the first three
    assert "redteam" in r.out and "unknown" in r.out  # no price for that model
    assert "1 cases, 2 failed records" in r.out and "line 2:" in r.out and "line 3:" in r.out


def test_cache_stats_and_clear(cli: Runner, refmatch_run: SampleRun, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    shutil.copytree(refmatch_run.cache, cache)
    entries = len([p for p in (cache / "nodes").rglob("*") if p.is_file()])
    assert entries > 0
    r = cli("cache", "--dir", str(cache))  # stats is the default
    assert r.rc == 0, r.err
    assert "nodes" in r.out and f"{entries}" in r.out
    r = cli("cache", "clear", "--namespace", "judge", "--older-than", "7d", "--dir", str(cache))
    assert r.rc == 0 and "removed 0 entries" in r.out
    # the settings' cache dir is the default (NEXAGAUGE_CACHE_DIR here)
    r = cli("cache", "clear", "--namespace", "nodes", "--json", cache_dir=cache)
    assert r.json() == {"dir": str(cache), "removed": entries}
    assert cli("cache", "stats", "--json", cache_dir=cache).json()["entries"] == 0


def test_nodes_lists_the_topology(cli: Runner, capsys: pytest.CaptureFixture[str]) -> None:
    rows = {n["node"]: n for n in cli("nodes", "--json").json()}
    assert rows["relevance"]["requires"] == ["claims"]
    assert rows["relevance"]["fields"] == ["output", "input"]
    assert cli_main.main(["nodes"]) == 0
    out = capsys.readouterr().out
    for node in (
        "scan",
        "chunk",
        "refiner",
        "claims",
        "relevance",
        "grounding",
        "redteam",
        "geval_steps",
        "geval",
        "refmatch",
        "refalign",
        "eval",
        "report",
    ):
        assert f"\n{node} " in out


def test_module_entry_point_and_version() -> None:
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "nexagauge", "--version"], capture_output=True, text=True
    )
    assert p.returncode == 0 and p.stdout.startswith("nexagauge ")
    assert cli_main.main([]) == 2  # no subcommand: help and usage status


# -- subcommand registration (in process) ------------------------------------------------------------------
def test_a_missing_or_broken_subcommand_does_not_break_the_others(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import sys
    import types

    broken = types.ModuleType("nexagauge.cli.broken_cmd")
    broken.add_parser = lambda sub: (_ for _ in ()).throw(RuntimeError("bad parser"))  # type: ignore[attr-defined]
    broken.run = lambda args: 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nexagauge.cli.broken_cmd", broken)
    monkeypatch.setattr(cli_main, "SUBCOMMANDS", ("nodes", "does_not_exist", "broken_cmd"))
    _parser, unavailable = cli_main.build_parser()
    assert "not installed" in unavailable["does_not_exist"]
    assert "bad parser" in unavailable["broken_cmd"]
    assert cli_main.main(["does_not_exist", "--anything"]) == 2
    assert "not installed" in capsys.readouterr().err
    assert cli_main.main(["broken_cmd"]) == 2
    assert cli_main.main(["nodes"]) == 0
    assert "refmatch" in capsys.readouterr().out


def test_interrupt_keeps_what_was_evaluated(tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    from .conftest import _env, nexagauge_command

    data = tmp_path / "big.jsonl"
    with data.open("w") as f:
        for i in range(4000):
            f.write(json.dumps({"case_id": f"c{i}", "output": "A fox jumps. " * 30}) + "\n")
    p = subprocess.Popen(
        [*nexagauge_command(), "run", "chunk", "-i", str(data), "-o", "out", "--no-cache", "-q"],
        cwd=tmp_path,
        env=_env(tmp_path / "cache"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        cases = tmp_path / "out" / "cases"
        while time.monotonic() < deadline and not (cases.is_dir() and any(cases.iterdir())):
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] is True and 0 < summary["records"] < 4000
    assert len(list(cases.glob("*.json"))) == summary["cases"]


def test_estimate_counts_cached_judge_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A judge result already in the node cache would be reused by a run: no call estimated."""
    import asyncio

    from nexagauge.graph.executor import Executor
    from nexagauge.graph.planner import plan
    from nexagauge.graph.runtime import Runtime
    from nexagauge.nodes import load_node
    from nexagauge.schema.case import parse_record
    from nexagauge.settings import load_settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEXAGAUGE_JUDGE_MODE", "none")
    monkeypatch.setenv("NEXAGAUGE_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in SAMPLE_RECORDS[:3]) + "\n")

    def estimate(*extra: str) -> dict[str, Any]:
        assert cli_main.main(["estimate", "redteam", "--input", str(data), "--json", *extra]) == 0
        doc: dict[str, Any] = json.loads(capsys.readouterr().out)
        return doc["nodes"][0]

    cold = estimate()
    assert (cold["cached"], cold["calls"]) == (0, 3)
    # a real executor run of the first case (redteam forced to "run" without a judge) fills the
    # node cache exactly as `nexagauge run` would
    node = load_node("redteam")

    async def fake_run(self: Any, ctx: Any) -> Any:
        return node.output_model()

    monkeypatch.setattr(type(node), "skip_reason", lambda self, ctx: None)
    monkeypatch.setattr(type(node), "run", fake_run)

    async def run_first() -> None:
        rt = Runtime.create(load_settings())
        ex = Executor(rt, plan("redteam"))
        res = await ex.run_case(parse_record(SAMPLE_RECORDS[0], 0), 0)
        assert res.outcomes["redteam"].status == "ok"
        await rt.aclose()

    asyncio.run(run_first())
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEXAGAUGE_JUDGE_MODE", "none")
    monkeypatch.setenv("NEXAGAUGE_CACHE_DIR", str(tmp_path / "cache"))
    warm = estimate()
    assert (warm["cached"], warm["calls"]) == (1, 2)
    assert warm["input_tokens"] < cold["input_tokens"]
    assert estimate("--no-cache")["calls"] == 3


def test_estimate_counts_only_the_claim_extractions_a_run_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`estimate` applies the executor's demand rule: no claims call where nothing reads claims."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEXAGAUGE_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")  # never called
    monkeypatch.setenv("NEXAGAUGE_JUDGE_API_KEY", "k")
    recs = [
        {"output": "Paris is in France."},  # neither relevance nor grounding is eligible
        {"input": "Where?", "output": "Paris is in France.", "context": "Paris, France."},
        {"input": "Where?", "output": "In France.", "relevance": {"method": "question_generation"}},
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert cli_main.main(["estimate", "eval", "--input", str(data), "--json", "--no-cache"]) == 0
    rows = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert rows["claims"]["calls"] == 1
    assert rows["claims"]["skipped"] == {"not needed for this case": 2}
