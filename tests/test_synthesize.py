"""The synthesize stage: behaviour policies against WorldModelEnv, rows validated like real data."""

from __future__ import annotations

import json

import stages.synthesize
from agentworld.data.io import read_jsonl
from tests.helpers import built_and_trained


def test_synthesize_writes_validated_synthetic_rows_with_their_controls(tmp_path, smoke_params, mlflow_store):
    paths = built_and_trained(tmp_path, smoke_params, sft_steps=4)
    params = smoke_params
    settings = params.synthesize.model_copy(update={
        "domains": ["terminal"], "episodes_per_domain": 5, "batch": 4, "max_steps": 3, "stage": "sft",
        "max_new_tokens": 16, "retries": 1,
        "control": params.synthesize.control.model_copy(update={"faults": ["permission denied"], "fault_rate": 0.3}),
    })
    result = stages.synthesize.run(params.model_copy(update={"synthesize": settings}), tmp_path)

    stats = result["domains"]["terminal"]
    assert stats["episodes"] == 5 and 5 <= stats["rows"] <= 15
    assert stats["clean"] + stats["rejected"] == stats["rows"]
    rows = list(read_jsonl(paths.synthetic("terminal")))
    assert len(rows) == stats["rows"] and {r["source"] for r in rows} == {"synthetic"}
    assert all(r["info"]["control"] == {"faults": ["permission denied"], "fault_rate": 0.3, "perturbation": None,
                                        "fiction": None} for r in rows)
    assert {r["info"]["world_model"] for r in rows} == {str(paths.stage_model("sft"))}
    # the same row builder as real collection: how each episode ended is recorded
    assert all(isinstance(r["info"]["terminated"], bool) and isinstance(r["info"]["max_steps_reached"], bool)
               for r in rows)
    assert all(r["done"] for r in rows if r["info"]["terminated"] or r["info"]["max_steps_reached"])
    assert len(list(read_jsonl(paths.synthetic("terminal", "clean")))) == stats["clean"]
    assert json.loads(paths.report("synthesize.json").read_text())["domains"]["terminal"] == stats
