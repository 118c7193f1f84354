"""The model card of a trained RL policy: what it serves, how it was made, how well it does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from lang2policy.rl.actions import TOOL_STEP, TURN_STEP
from lang2policy.rl.env import CONTROL_PERIOD, SIM_TIMESTEP
from lang2policy.rl.families import family as family_named
from lang2policy.rl.policy_file import MLPPolicy


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _action(fam, scale: float) -> str:
    """What an action of the family is: joint offsets or a tool move, and its extras."""
    if fam.action == "tool":
        text = (f"a move of the tool centre (up to {TOOL_STEP * 100:g} cm per axis) and a turn "
                f"of the jaws about the vertical (up to {TURN_STEP} rad), from where the tool "
                "is measured, kept pointing down; one damped least-squares step through the "
                f"tool's Jacobian makes them joint targets within +-{scale} rad of the measured "
                "joints (`lang2policy.rl.actions`)")
    else:
        text = f"joint position targets within +-{scale} rad of the measured joints"
    if fam.speed_goal is not None:
        text += ("; shrunk so that the tool speed they ask for stays under the goal's speed "
                 "limit (`lang2policy.rl.actions`)")
    if fam.gripper:
        text += "; plus the gripper opening"
    return text


def _objects(fam) -> str:
    """The objects part of the observation, for families with objects on the table."""
    if not fam.objects:
        return ""
    return (f"; the pose, yaw (mod 90 deg), velocity and lift of the {', '.join(fam.objects)} "
            "(blocks differ only in colour: any block of a spec is served)")


def _training(summary: dict) -> str:
    """How the policy was trained, in a sentence: PPO, or DAgger from the family's expert."""
    config, minutes = summary["config"], summary["train_seconds"] / 60
    if summary.get("method") == "dagger":
        expert = ("the MPC (one iteration per step)" if summary["expert"] == "MPCExpert"
                  else f"the scripted expert `{summary['expert']}`")
        return (f"DAgger from {expert} "
                f"(`lang2policy.rl.experts`): {config['iterations']} iterations of "
                f"{config['episodes']} episodes (the first driven by the expert, the others by "
                f"the learner, every state labelled by the expert; the reward only judges success "
                f"here), {summary['timesteps']:,} labelled states, {minutes:.1f} min wall "
                "(torch on 1 thread)")
    start = (f"fine-tuning of `{config['init']}` (its weights and observation statistics; "
             f"learning rate {config['learning_rate']:g}), "
             if config.get("init") else "")
    return (f"PPO (stable-baselines3), {start}{config['envs']} environments, "
            f"{summary['timesteps']:,} steps in {minutes:.1f} min wall "
            f"({summary['steps_per_second']} steps/s, torch on 1 thread)")


def _start_row(config: dict) -> str:
    """For a fine-tuned policy, the table row of its start on the same goals (its card's
    evaluation), so the card shows what fine-tuning changed."""
    start = Path(config.get("init") or "")
    try:
        before = json.loads((start / "eval.json").read_text())
    except (OSError, ValueError):
        return ""
    if not config.get("init") or not isinstance(before, dict) or "successes" not in before:
        return ""
    when = (f"{before['seconds_to_success']} s" if before.get("seconds_to_success") is not None
            else "n/a")
    return (f"| {before['episodes']} (the start, `{start}`) | {before['successes']}/"
            f"{before['episodes']} ({before['success_rate']:.0%}) | {when} | "
            f"{before['smoothness']} | {before['control_cost']} |\n")


def write_card(out: Path, policy: MLPPolicy, summary: dict, result: dict, command: str,
               commit: str | None = None) -> Path:
    """``README.md`` and ``eval.json`` in the model directory ``out``; ``commit``: the code
    the policy was trained with (default: the checkout's HEAD, for a card written right after
    training)."""
    out = Path(out)
    (out / "eval.json").write_text(json.dumps(result, indent=1) + "\n")
    fam = family_named(policy.family)
    config = summary["config"]
    sizes = " -> ".join(str(w.shape[1]) for w in policy.weights) + f" -> {policy.action_size}"
    rate = f"{result['successes']}/{result['episodes']} ({result['success_rate']:.0%})"
    time_text = (f"{result['seconds_to_success']} s" if result["seconds_to_success"] is not None
                 else "n/a")
    doc = fam.doc[0].upper() + fam.doc[1:]
    kind = ("Distilled" if summary.get("method") == "dagger"
            else "Fine-tuned RL" if config.get("init") else "RL")
    text = f"""# {kind} policy: {fam.name} ({policy.robot})

{doc}. One goal-conditioned policy serves every reward spec of the family: the goal
({', '.join(fam.goal_names)}) is an input, read from the spec's parameters, so an edit such as
"higher" changes what the policy does at the next control cycle.

- **Environment** (no recorded data): `lang2policy.rl.env.RewardEnv` on the {policy.robot}
  arm in MuJoCo ({SIM_TIMESTEP} s physics, {CONTROL_PERIOD} s per action). Each episode draws
  a goal from the workspace and a start pose near home. The reward is minus the spec's
  weighted reward terms (the MPC's cost code, `lang2policy.mpc.cost`), plus a bonus on
  success; the spec's success and failure conditions end an episode.
- **Observation**: joints, gripper, joint velocities, tool centre and velocity, goal, goal
  minus tool{_objects(fam)} (`lang2policy.rl.observation`), normalised by the training
  statistics.
- **Action**: {_action(fam, policy.action_scale)}.
- **Network**: tanh MLP {sizes}, numpy at run time (`policy.npz`, no torch needed).
- **Training**: {_training(summary)}, seed {config['seed']}, commit {commit or _commit()}.
- **Command**: `{command}`

## Results on goals not seen in training

Evaluation seeds start at 1,000,000; training goals come from seeds below that.

| held-out goals | success | time to success | smoothness (rad/step) | control cost |
| --- | --- | --- | --- | --- |
| {result['episodes']} | {rate} | {time_text} | {result['smoothness']} | {result['control_cost']} |
{_start_row(config)}
Learning curve: `learning_curve.png` (`curve.json`); evaluation video: `eval.mp4` (the goal
is the green sphere). `lang2policy bench rl` runs the same held-out goals with the MPC beside it.

## Licence and limitations

Apache-2.0, as the project. Trained and evaluated in simulation only, with the arm and the
family's objects alone on the table (no obstacles, no other objects); goals are drawn inside
the robot's workspace, and a spec outside it is served but was never trained on. Not tried on
a physical arm. The observation is exact simulator state: with a real arm, object poses come
from perception and carry its errors.
"""
    path = out / "README.md"
    path.write_text(text)
    return path
