"""The report of ``lang2policy bench cap`` as text: every track per family and split, then the LLM
tracks side by side by phrasing split (grounding on and off), with planning latency."""

from __future__ import annotations

from lang2policy.bench.cap_llm import LLM_TRACKS, seconds_text
from lang2policy.bench.cap_splits import PHRASING_NAMES, SPLIT_NAMES

_CELL = 7  # characters per track in a table cell


def _cell(block: dict, tracks: list[str]) -> str:
    return " ".join(f"{block[t]['successes']}/{block[t]['episodes']}".rjust(_CELL) for t in tracks)


def _pct(block: dict) -> str:
    rate = block["success_rate"]
    return "  -" if rate is None else f"{100 * rate:.0f}%"


def _rate(block: dict) -> str:
    """``7/8  88%``: successes, episodes and rate of one track's counts."""
    return f"{block['successes']}/{block['episodes']} {_pct(block):>4}"


def _table(report: dict) -> list[str]:
    """Every track per family and split (attributes x phrasings), then per category."""
    tracks = report["tracks"]
    width = (_CELL + 1) * len(tracks)
    splits = [s for s in SPLIT_NAMES if s in report["splits"]]
    header = f"{'family':<16}{'category':<14}" + "".join(
        f"{s:>{width + 2}}" for s in [*splits, "all"]
    )
    sub = " " * 30 + "".join(
        f"{' '.join(t.rjust(_CELL) for t in tracks):>{width + 2}}" for _ in [*splits, "all"]
    )
    lines = [header, sub]
    for fam in report["families"]:
        row = f"{fam['family']:<16}{fam['category']:<14}"
        for split in splits:
            cell = fam["splits"].get(split)
            row += f"{_cell(cell, tracks) if cell else '-':>{width + 2}}"
        lines.append(row + f"{_cell(fam, tracks):>{width + 2}}")
    lines.append("")
    for name, block in [*report["categories"].items(), ("all", report)]:
        rates = "  ".join(f"{t} {_rate(block[t])}" for t in tracks)
        lines.append(f"{name:<16}{rates}")
    split_rates = "  ".join(
        f"{s} " + "/".join(_pct(report["splits"][s][t]) for t in tracks) for s in splits
    )
    lines.append(f"{'by split':<16}{split_rates}  ({'/'.join(tracks)})")
    return lines


def _grounding_table(report: dict, llm: list[str]) -> list[str]:
    """The LLM tracks side by side: per family, success on seen (SI) and unseen (UI)
    phrasings and in all, one column group per grounding setting."""
    phrasings = [p for p in PHRASING_NAMES if p in report["phrasings"]]
    columns = [*phrasings, "all"]
    group = 10 * len(columns) + 3
    lines = [
        "",
        "LLM tracks by phrasing split (llm: grounding on, llm-off: grounding off; "
        "SI/UI = seen/unseen phrasings)",
        f"{'':<16}" + "".join(f"{t:>{group}}" for t in llm),
        f"{'family':<16}" + "".join(f"{'':3}" + "".join(f"{c:>10}" for c in columns) for _ in llm),
    ]
    rows = [(f["family"], f["phrasings"], f) for f in report["families"]]
    rows.append(("all", report["phrasings"], report))
    for name, by_phrasing, total in rows:
        row = f"{name:<16}"
        for track in llm:
            blocks = [by_phrasing.get(p, {}).get(track) for p in phrasings] + [total[track]]
            row += f"{'':3}" + "".join(f"{(_rate(b) if b else '-'):>10}" for b in blocks)
        lines.append(row)
    return lines


def _summary_lines(report: dict, track: str) -> list[str]:
    summary = report["llm_summary"][track]
    outcomes = ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
    verdicts = ", ".join(f"{k} {v}" for k, v in summary["verdicts"].items())
    latency = summary["latency"]
    lines = [
        f"{track}: planning per instruction: LLM {seconds_text(latency['llm_seconds'])}; "
        f"all but the arm's run {seconds_text(latency['planning_seconds'])}",
        f"{'':<{len(track) + 2}}{summary['mean_llm_calls']:.1f} LLM calls, "
        f"{summary['repaired']} re-planned; outcomes: {outcomes}; verdicts: {verdicts}",
    ]
    if "failed_where_oracle_succeeded" in summary:
        lines.append(
            f"{'':<{len(track) + 2}}failures: {summary['failed_where_oracle_succeeded']} "
            f"where the oracle succeeded (planning), {summary['failed_with_oracle']} where it "
            "failed too"
        )
    return lines


def _route_lines(report: dict) -> list[str]:
    """With camera perception: the route, and the truth track's meaning and share."""
    if report.get("perception") != "camera":
        return []
    from lang2policy.bench.camera_route import route_text

    line = (
        f"tracks from {route_text(report)}; truth = the reference programs on the "
        "simulator's poses, same episodes"
    )
    if "oracle" in report["tracks"]:
        camera, truth = report["oracle"]["successes"], report["truth"]["successes"]
        line += f": the oracle from the camera reached {camera / truth:.0%}" if truth else ""
        line += " of the truth track's successes" if truth else ""
    return [line]


def format_text(report: dict) -> str:
    """The report as text (see the module docstring)."""
    llm = f", LLM {report['llm_spec']}" if report["llm_spec"] else ""
    lines = [
        f"Code-as-Policies tabletop benchmark on {report['robot']}: "
        f"{report['episodes_per_family']} episodes per family, seed {report['seed']}{llm}",
        "splits: SA/UA = seen/unseen attributes (colours, corners, directions, lines), "
        "SI/UI = seen/unseen instruction phrasings",
        *_route_lines(report),
        "",
        *_table(report),
    ]
    llm_tracks = [t for t in report["tracks"] if t in LLM_TRACKS]
    if llm_tracks:
        lines += _grounding_table(report, llm_tracks)
        for track in llm_tracks:
            lines += _summary_lines(report, track)
    lines.append(f"wall time {report['wall_seconds']:.0f} s")
    failures = [r for r in report["episodes"] if "oracle" in r and not r["oracle"]["success"]]
    for r in failures:
        o = r["oracle"]
        lines.append(
            f"  oracle failed: {r['family']} #{r['index']} ({r['split']}) "
            f"'{r['instruction']}': {o['reason']}; {o['outcome']}: "
            f"{(o['message'].splitlines() or [''])[0][:120]}"
        )
    return "\n".join(lines)
