"""``nexagauge serve`` argument handling: flags override config, bad node names are usage errors."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from nexagauge.cli import serve as serve_cli
from nexagauge.cli.main import CliError, build_parser


def parse(*argv: str) -> argparse.Namespace:
    parser, _ = build_parser()
    return parser.parse_args(["serve", *argv])


def test_flags_override_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "n.toml"
    cfg.write_text(
        '[kafka]\nbootstrap_servers = "file:9092"\ngroup_id = "g-file"\n[sampling]\ndefault_rate = 0.5\n'
    )
    args = parse(
        "--config",
        str(cfg),
        "--bootstrap-servers",
        "flag:9092",
        "--only",
        "relevance, grounding",
        "--rate",
        "0.02",
        "--no-rekey",
        "--max-in-flight",
        "4",
        "--metrics-port",
        "0",
    )
    s = serve_cli.settings_from_args(args)
    assert s.kafka.bootstrap_servers == "flag:9092" and s.kafka.group_id == "g-file"
    assert s.online.nodes == ["relevance", "grounding"] and s.online.rekey is False
    assert (
        s.online.max_in_flight == 4 and s.sampling.default_rate == 0.02 and s.emit.metrics_port == 0
    )


def test_unknown_node_and_bad_rate_are_usage_errors() -> None:
    with pytest.raises(CliError, match="unknown metric nodes"):
        serve_cli.settings_from_args(parse("--only", "relevance,nope"))
    with pytest.raises(CliError, match="sampling"):
        serve_cli.settings_from_args(parse("--rate", "1.5"))


def test_main_reports_usage_error_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from nexagauge.cli.main import main

    assert main(["serve", "--only", "bogus"]) == 2
    assert "unknown metric nodes" in capsys.readouterr().err


def test_unreachable_broker_is_a_clear_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from support.broker import free_port

    from nexagauge.cli.main import main

    port = free_port()  # nothing listens there
    assert main(["serve", "--bootstrap-servers", f"127.0.0.1:{port}", "--metrics-port", "0"]) == 2
    assert "cannot reach Kafka" in capsys.readouterr().err
