"""The one logging setup (perfdash/logs.py): the console script's lines have a timestamp, a level and a logger (INFO
ones included, once dropped), as text or JSON; a pool's worker process logs as its parent, with the request's id."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import re
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from perfdash import logs

NIGHT = Path(__file__).parents[1] / "web" / "data" / "night1"  # two runs of PyTorch-named CSVs with manifests


def _ingest(tmp_path: Path, **env: str) -> list[str]:
    """`perfdash ingest DIR` into a new SQLite database (the post-ingest detection runs): its stderr lines."""
    done = subprocess.run([sys.executable, "-m", "perfdash.cli", "ingest", str(NIGHT)], capture_output=True,
                          text=True, timeout=300, check=False, cwd=tmp_path,
                          env={**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'p.db'}", **env})
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


def test_the_console_script_logs_info_lines_with_time_level_and_logger(tmp_path: Path) -> None:
    (tmp_path / "text").mkdir()
    text = _ingest(tmp_path / "text", PERFDASH_LOG_FORMAT="")  # unset: text, the console script's default
    detected = [line for line in text if "new findings" in line]
    assert len(detected) == 2, text
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO service\.detection\.detector "
                            r"run \d+: \d+ new findings", line) for line in detected), detected
    (tmp_path / "json").mkdir()
    lines = [json.loads(line) for line in _ingest(tmp_path / "json", PERFDASH_LOG_FORMAT="json")
             if line.startswith("{")]
    found = [line for line in lines if line["message"].endswith("new findings")]
    assert len(found) == 2 and all(line["level"] == "INFO" and line["logger"] == "service.detection.detector"
                                   and line["timestamp"].endswith("Z") for line in found)


def test_a_bad_setting_is_refused_before_the_command_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "perfdash.cli", "ingest", str(NIGHT)], capture_output=True,
                          text=True, timeout=120, check=False, cwd=tmp_path,
                          env={**os.environ, "PERFDASH_LOG_FORMAT": "xml"})
    assert done.returncode == 2 and "PERFDASH_LOG_FORMAT" in done.stderr
    with pytest.raises(ValueError, match="PERFDASH_LOG_LEVEL"):
        logs.LogOptions.from_environ({"PERFDASH_LOG_LEVEL": "loud"})


def test_a_pool_worker_logs_as_its_parent_with_the_request_id(capfd: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    logs.configure(logs.LogOptions(format="json", level="INFO"))
    token = logs.REQUEST_ID.set("upload-7")
    try:
        # a fresh process that inherits no logging setup, as service.detection.night's forkserver workers (spawn here:
        # the forkserver is one per process, and its stderr is wherever stderr was when an earlier test started it)
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=logs.configure_child, initargs=logs.for_child()) as pool:
            pool.submit(logging.log, logging.INFO, "run 9: 1 new findings").result()
    finally:
        logs.REQUEST_ID.reset(token)
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = [json.loads(line) for line in capfd.readouterr().err.splitlines() if line.startswith("{")]
    (line,) = [line for line in lines if line["message"] == "run 9: 1 new findings"]
    assert line["level"] == "INFO" and line["request_id"] == "upload-7" and line["logger"] == "root"
