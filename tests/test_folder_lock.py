import os
import subprocess
import sys

import pytest

from mt.errors import MtError
from mt.folder_lock import LOCK_NAME, folder_lock
from tests.conftest import ROOT, TINY, run_mt

HOLD = """
import sys, time
from mt.folder_lock import folder_lock
with folder_lock(sys.argv[1], "mt train"):
    print("holding", flush=True)
    time.sleep(60)
"""


def test_a_second_command_on_a_folder_in_use_stops_at_once_naming_the_holder(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(MtError, match=rf"in use by process {holder.pid} on .* \(mt train: "):
            with folder_lock(tmp_path, "mt prepare"):
                pass
    finally:
        holder.kill()  # like kill -9: no clean-up runs
        holder.wait()
    with folder_lock(tmp_path, "mt train"):  # the dead process's lock does not block
        with folder_lock(tmp_path, "mt prepare"):  # re-entrant within a process (train prepares its data)
            assert "mt train" in (tmp_path / LOCK_NAME).read_text()
    assert (tmp_path / LOCK_NAME).read_text() == ""  # released: no one named


def test_the_mt_command_refuses_a_folder_in_use(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "holding"
        proc = run_mt("train", TINY, "--set", f"output_dir={tmp_path / 'run'}", check=False)
        assert proc.returncode != 0
        assert f"is in use by process {holder.pid}" in proc.stderr.strip().splitlines()[-1]
        assert not (tmp_path / "run" / "metrics.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
