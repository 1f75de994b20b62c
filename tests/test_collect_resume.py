"""Collection resumes after a SIGKILL from the finished shards: nothing lost, nothing duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agentworld.config import CollectParams, SandboxParams
from agentworld.data.collect import SHARD_EPISODES, collect_parallel, shard_ranges
from agentworld.data.io import read_transitions, write_jsonl

PARAMS = CollectParams(episodes_per_domain=3 * SHARD_EPISODES, max_steps=3, workers=1, seed=5)
SANDBOX = SandboxParams(command_timeout_s=3)

_CHILD = """
import sys
from agentworld.config import CollectParams, SandboxParams
from agentworld.data.collect import collect_parallel
from pathlib import Path
params = CollectParams.model_validate_json(sys.argv[1])
collect_parallel("terminal", params, SandboxParams(command_timeout_s=3), parts_dir=Path(sys.argv[2]), progress=False)
"""


def _key(rows):
    return [(r.id, r.task_id, r.policy, r.action, r.observation) for r in rows]


def test_shards_are_fixed_ranges_independent_of_workers():
    assert shard_ranges(20, 8) == [range(0, 8), range(8, 16), range(16, 20)]


def test_sigkill_mid_collection_then_resume(tmp_path: Path):
    parts = tmp_path / "parts"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, PARAMS.model_dump_json(), str(parts)],
                             env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    first_shard = parts / "terminal" / "shard-00000.jsonl"
    deadline = time.monotonic() + 120
    while not first_shard.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert first_shard.exists(), "the child never finished a shard"
    finished = sorted(p.name for p in (parts / "terminal").glob("shard-*.jsonl"))
    assert len(finished) < 3, "the kill came too late to test a resume"

    # Mark the finished shard: a resume must load it, not play it again.
    saved = read_transitions(first_shard)
    write_jsonl(first_shard, [r.model_copy(update={"info": {**r.info, "from_part": True}}) for r in saved])
    resumed = collect_parallel("terminal", PARAMS, SANDBOX, parts_dir=parts, progress=False)
    fresh = collect_parallel("terminal", PARAMS, SANDBOX, progress=False)

    assert _key(resumed) == _key(fresh)  # same episodes, none lost, none twice
    assert len({r.id for r in resumed}) == len(resumed)
    assert {r.info["episode_index"] for r in resumed if r.info.get("from_part")} == set(range(SHARD_EPISODES))


def test_changed_settings_discard_old_parts(tmp_path: Path):
    parts = tmp_path / "parts"
    small = PARAMS.model_copy(update={"episodes_per_domain": SHARD_EPISODES})
    collect_parallel("terminal", small, SANDBOX, parts_dir=parts, progress=False)
    meta = json.loads((parts / "terminal" / "fingerprint.json").read_text())
    assert meta["seed"] == 5
    other = small.model_copy(update={"seed": 6})
    rows = collect_parallel("terminal", other, SANDBOX, parts_dir=parts, progress=False)
    assert {r.seed for r in rows} == {r.seed for r in collect_parallel("terminal", other, SANDBOX, progress=False)}
    assert json.loads((parts / "terminal" / "fingerprint.json").read_text())["seed"] == 6
