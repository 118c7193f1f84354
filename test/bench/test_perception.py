"""bench perception: camera perception judged against the simulator, per realism level."""

from __future__ import annotations

import argparse

import numpy as np

from lang2policy.bench import perception, perception_report
from lang2policy.perception.records import PerceivedObject, yaw_quat


def test_a_frame_counts_finds_misses_hidden_objects_and_phantoms():
    truth = {
        "red block": (np.array([0.2, 0.0, 0.0125]), 0.3, "block"),
        "blue bowl": (np.array([0.1, 0.1, 0.0]), 0.0, "bowl"),
        "green block": (np.array([0.3, 0.1, 0.0125]), 0.0, "block"),
    }
    seen = [
        PerceivedObject("red block", (0.205, 0.0, 0.0125), yaw_quat(0.3 + np.pi / 2 + 0.05)),
        PerceivedObject("pink block", (0.25, -0.1, 0.0125)),
    ]
    visible = {"red block": 200, "blue bowl": 500, "green block": 3}
    record = perception_report.frame_record(seen, truth, visible, min_px=20)
    rows = {row["name"]: row for row in record["objects"]}
    assert rows["red block"]["found"] and abs(rows["red block"]["error_cm"] - 0.5) < 1e-6
    assert abs(rows["red block"]["yaw_deg"] - np.degrees(0.05)) < 1e-6  # modulo 90 degrees
    assert rows["blue bowl"]["visible"] and not rows["blue bowl"]["found"]
    assert not rows["green block"]["visible"]  # hidden by the arm: not expected
    assert record["phantoms"] == ["pink block"]
    record.update(wall_s=0.05, cpu_s=0.04, changed=False)
    summary = perception_report.summarise([record])
    assert summary["expected"] == 2 and summary["detected"] == 1 and summary["detection"] == 0.5
    assert summary["phantoms"] == 1 and abs(summary["fps_one_core"] - 25.0) < 1e-9


def test_the_bench_renders_each_level_and_judges_it_from_the_ground_truth(tmp_path):
    args = argparse.Namespace(
        robot="so101", realism="off,mild", layouts=2, seed=0, moving=0, camera="top",
        size=160, out=tmp_path,
    )  # fmt: skip
    result = perception.run_args(args)
    levels = {level["level"]: level for level in result["levels"]}
    off = levels["off"]["rest"]
    assert off["frames"] == 2 and off["expected"] >= 6
    assert off["phantoms"] == 0 and off["error_p90_cm"] < 0.5  # as the perception tests find
    assert levels["mild"]["profile"]["camera"]["noise"] == 2.0  # the report names its profile
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "mild_layout_0.png", "mild_layout_1.png", "off_layout_0.png", "off_layout_1.png",
    ]  # fmt: skip
    text = perception.format_text(result)
    assert "mild: detected at rest" in text and "[>= 98.0 %]" in text
    assert ("overall: PASS" in text) == (perception.exit_code(result) == 0)
