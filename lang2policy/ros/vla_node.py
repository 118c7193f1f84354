"""The VLA node: language skills run by a vision-language-action policy (issue 18).

Subscribes, always
  * ``/lang2policy/skill`` (std_msgs/String; ``vla.skill.message`` parses and checks it):
    - plain text: a skill instruction in one of the phrasings the VLA was trained on
      (``vla.skill.parse``: "put the red block in the blue bowl", "push the green block to the
      left", "lift the yellow block"), run under the default limits; "" cancels the skill.
    - a JSON start (a skill plan): ``{"skill": TEXT, "plan_id": ID, "limits":
      {"time_budget_s": S, "max_joint_speed": RAD_PER_S, "workspace": {"min": [x, y, z],
      "max": [x, y, z]}}, "motions": [CORRECTION, ...]}``; all but ``skill`` optional. Limits
      only narrow the defaults (``vla.skill.limits``): the budget is the smaller of the
      family's and the plan's; the speed at most ``max_joint_speed`` (default: the safety
      node's, config/safety.yaml); the workspace is the plan's box inside the safety node's.
      Each published target moves no arm joint more than speed / ``rate`` rad from the last
      one (or from the measured joints, for the first one and after a hold); a target whose
      tool point (forward kinematics of the robot model) leaves the box is scaled back along
      its step to the face of the box, or the last target is sent again (a hold) when no part
      of the step stays in. ``motions`` (remembered corrections) act from the first cycle,
      each answered by a ``motion`` line as below.
    - a JSON language motion (RT-H): ``{"motion": CORRECTION, "plan_id": ID}``, for the
      running skill from its next control cycle (``vla.skill.language_motion``): a tool offset
      ("a bit to the left" +2 cm y, "lower" -2 cm z; sizes of ``corrections``; <= 5 cm per
      axis in total), a speed scale ("slower", "faster"; 0.3 .. 1.0 of the cap) or the
      gripper held open or closed. The offset is a residual on the policy's targets, mapped
      to joints by damped least squares on the tool point's Jacobian at the target posture;
      the policy is shown the joints less that residual (``vla.skill.shaping``). Answered by
      a ``motion`` line: applied or refused (no skill runs, another plan runs or a skill of
      no plan when the motion names one, not a motion, at its bound).
    A new skill replaces the running one (``cancelled``). A bad message, or text the VLA
    cannot check, is ``rejected`` with what was wrong (and what the VLA can do).
  * ``/lang2policy/objects`` (visualization_msgs/MarkerArray): the object poses; the skill's
    success check (``vla.skill.judge``) runs on them.
  * ``/lang2policy/safety`` (std_msgs/String): the safety node's state. ``stopped`` ends the
    running skill at once (``stopped``; nothing more is published) and refuses new skills
    until the safety node is resumed. A command of the skill cut at a keep-out zone (its count
    ``detail.cuts.keep_out`` grew since the skill started; ``vla.skill.keep_out_watch``) ends it
    ``stopped`` with the reason ``keep-out: <the safety node's last violation>``, and a hold.

Subscribes while a skill runs (so that an idle node costs nothing, and the sim node, which
renders a camera only while someone listens, renders nothing for it)
  * ``/joint_states`` (joints by name) and ``/camera/<name>/image_raw`` for each camera the
    backend needs (front and wrist for the local model; any size and rgb8/bgr8/rgba8/bgra8: a
    centred square crop, resized with ``cv2.INTER_AREA`` to the model's 96 px); the cameras
    only until a latched network has looked (it reads no more images in that skill).

Publishes
  * ``/lang2policy/joint_command`` (trajectory_msgs/JointTrajectory, the safety node's input):
    at ``rate`` Hz of wall time (steady clock) a one-point trajectory to the policy's next
    target (5 arm joints in rad, ``gripper`` 0..1), reached ``1 / rate`` s after arrival, as
    the arm moves between targets in rollouts. Stale joint states or images
    (``state_timeout``, ``image_timeout``) hold the arm: one trajectory with no points (the
    safety node's "hold at the measured position"), then silence until they are fresh again.
    A skill that ends (but for a stop) sends one hold too.
  * ``/lang2policy/status`` (std_msgs/String, JSON ``StatusEvent`` with node ``vla``) on every
    change: ``ready`` (detail: backend, cameras, rate), ``rejected``, ``running`` (detail: the
    family, budget and limits), ``holding`` (detail: which input is stale), ``motion`` (detail:
    ``text``, ``action`` applied | refused, ``reason``, the resulting ``offset`` m,
    ``speed_scale``, ``gripper``), and the end: ``success`` (the success check held for
    ``rollout.SUCCESS_HOLD`` s), ``timeout`` (the budget), ``failed`` (a policy backend
    error, or the goal not seen from the look pose), ``stopped``, ``cancelled``; with
    ``skill`` (the task), ``backend`` and, at the end, ``stats`` (steps, achieved rate,
    policy time per action, steps the speed cap and the workspace changed, ``tool_shift_m``:
    the shift of the sent targets' tool point over the policy's own, by the motions and the
    limits). Every line of a run with a ``plan_id``
    carries it at the top and in the detail, which is then an object (a text detail becomes
    its ``reason``).

Parameters (read-only): the ``vla_node`` rows of ``graph.parameters`` (docs/graph.md). A
finished pick-and-place or push the check has not seen done folds the arm to its look pose
and checks again (``look_to_confirm``, ``vla.skill.look``: status ``running`` with the
reason "looking: ..."). A remote request blocks this node's callbacks for at most
``connect_timeout + request_timeout``; the stop still holds the arm at once.
"""

from __future__ import annotations

import json
import time

from rclpy.clock import Clock, ClockType
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from lang2policy.control.kinematics import Kinematics
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.graph import topics
from lang2policy.perception import decode_image
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.vla_params import VLAParameters
from lang2policy.scene.mirror import MirrorWorld
from lang2policy.vla.skill.judge import ObjectsJudge
from lang2policy.vla.skill.keep_out_watch import KeepOutWatch
from lang2policy.vla.skill.language_motion import MotionState
from lang2policy.vla.skill.limits import SkillLimits, ToolKinematics, resolve_limits
from lang2policy.vla.skill.message import (
    Cancel,
    MotionMessage,
    SkillMessageError,
    StartSkill,
    parse_skill_message,
)
from lang2policy.vla.skill.parse import Skill, parse_skill
from lang2policy.vla.skill.runner import (
    CANCELLED,
    HOLDING,
    STOPPED,
    SkillRunner,
    Step,
    state_vector,
)
from lang2policy.vla.skill.shaping import TargetShaper
from lang2policy.vla.spec.schema import ACTION_DIM, JOINT_NAMES, ROBOT_TYPE, STATE_NAMES
from lang2policy.wire_json import MessageError, decode_status

_LATEST = QoSProfile(depth=1, reliability=qos_profile_sensor_data.reliability)


def camera_topic(camera: str) -> str:
    return topics.camera_topics(camera)[0]


class VLANode(VLAParameters):
    """``lang2policy_vla``: ``SkillRunner`` behind the topic contract above."""

    executable = "vla_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_vla", **kwargs)
        self.actor = self._actor()
        self.settings = self._settings(getattr(self.actor.backend, "fps", None))
        self.cameras = tuple(self.actor.backend.cameras)
        layout = self._param("layout")
        self.world = MirrorWorld(ROBOT_TYPE, layout)
        kinematics = Kinematics(self.world.model, self.world.description, self.world.arm)
        self.tool = ToolKinematics(kinematics, JOINT_NAMES)
        self.default_limits = self._default_limits()
        self.runner: SkillRunner | None = None
        self.plan_id = ""  # the running skill's plan, echoed in its status lines
        self.safety_state = ""
        self.keep_out = KeepOutWatch()  # the safety node's keep-out cuts during a skill
        self.commands_sent = 0
        self._objects: dict | None = None
        self._last_report: tuple[str, str] | None = None
        self._hold_sent = False
        self._inputs: list = []  # the subscriptions held while a skill runs
        self._camera_inputs: list = []  # the camera subscriptions, until the policy has looked
        self._command = self.create_publisher(JointTrajectory, topics.JOINT_COMMAND.relative, 10)
        self._status = self.create_publisher(String, topics.STATUS.relative, 10)
        self.create_subscription(String, topics.SKILL.relative, self._on_skill, 10)
        self.create_subscription(MarkerArray, topics.OBJECTS.relative, self._on_objects, 10)
        self.create_subscription(String, topics.SAFETY.relative, self._on_safety, 10)
        steady = Clock(clock_type=ClockType.STEADY_TIME)  # not /clock: never wait on the sim
        self._timer = self.create_timer(1.0 / self.settings.rate, self._on_tick, clock=steady)
        self._timer.cancel()  # runs only while a skill runs
        detail = {"backend": self.actor.backend.name, "cameras": list(self.cameras)}
        self._publish("ready", "", detail | {"rate_hz": self.settings.rate})
        self.get_logger().info(
            f"VLA {self.actor.backend.name}: cameras {list(self.cameras)}, "
            f"{self.settings.rate:g} Hz on {topics.JOINT_COMMAND.name}; skills on "
            f"{topics.SKILL.name}"
        )

    # ------------------------------------------------------------------ skills
    def _on_skill(self, msg: String) -> None:
        try:
            message = parse_skill_message(msg.data)
        except SkillMessageError as exc:
            self._refuse(msg.data, str(exc), exc.plan_id)
            return
        if isinstance(message, MotionMessage):
            self._on_motion(message.text, message.plan_id)
        elif isinstance(message, StartSkill):
            self._on_start(message)
        elif isinstance(message, Cancel) and self.runner is not None:
            self._finish(self.runner.end(CANCELLED, "cancelled (an empty skill)"))

    def _on_start(self, message: StartSkill) -> None:
        try:
            skill = parse_skill(message.skill)
            limits = resolve_limits(message.limits, self.default_limits)
            judge = self._judge(skill)
        except Lang2PolicyError as exc:  # UnknownSkillError, or the scene or safety says no
            self._refuse(message.skill, str(exc), message.plan_id)
            return
        if self.runner is not None:
            self._finish(self.runner.end(CANCELLED, f"replaced by {skill.instruction!r}"))
        self._start(skill, judge, limits, message.plan_id)
        for text in message.motions:  # remembered corrections: from the first cycle
            self._on_motion(text, message.plan_id)

    def _refuse(self, text: str, reason: str, plan_id: str) -> None:
        self._publish("rejected", text[:200], reason, plan_id=plan_id)
        self.get_logger().warning(f"skill rejected: {reason}")

    def _on_motion(self, text: str, plan_id: str) -> None:
        """A language motion for the running skill, answered by a ``motion`` status line."""
        if self.runner is None:
            reason = "no skill is running: a language motion corrects a running skill"
        elif plan_id and plan_id != self.plan_id:  # never another plan's, nor a plan-less one
            running = f"plan {self.plan_id!r}" if self.plan_id else "a skill of no plan"
            reason = f"it is for plan {plan_id!r}, but {running} is running"
        else:
            outcome = self.runner.motion(text)
            self._publish("motion", self.runner.skill.instruction, outcome.detail())
            self.get_logger().info(f"motion {text!r}: {outcome.detail()}")
            return
        detail = MotionState().outcome(text, False, reason).detail()
        self._publish("motion", "", detail, plan_id=plan_id)

    def _judge(self, skill: Skill) -> ObjectsJudge:
        if self.safety_state == "stopped":
            raise Lang2PolicyError(
                "the safety node is stopped: call "
                f"{self.resolve_service_name(topics.RESUME.relative)} before a skill"
            )
        if self._objects is None:
            raise Lang2PolicyError(f"no objects seen on {topics.OBJECTS.name} yet")
        return ObjectsJudge(skill.task, self.world, self._objects)

    def _start(self, skill: Skill, judge: ObjectsJudge, limits: SkillLimits, plan_id: str) -> None:
        now, rate = time.monotonic(), self.settings.rate
        shaper = TargetShaper(self.tool, limits, rate)
        self.runner = SkillRunner(
            skill, self.actor, judge, self.cameras, self.settings, now, shaper
        )
        self.plan_id = plan_id
        self.keep_out.arm()
        self._last_report, self._hold_sent = None, False
        self._subscribe_inputs()
        self._timer.reset()
        box = limits.workspace.to_dict()
        detail = (
            f"{skill.task.family}, budget {self.runner.budget:g} s, joint speed <= "
            f"{limits.max_joint_speed:g} rad/s, tool in min {box['min']} max {box['max']}"
        )
        self._report(Step("running", None, detail))

    def _subscribe_inputs(self) -> None:
        self._inputs = [
            self.create_subscription(JointState, topics.JOINT_STATES.relative, self._on_state, 10)
        ]
        self._camera_inputs = [
            self.create_subscription(
                Image, camera_topic(camera), lambda m, c=camera: self._on_image(c, m), _LATEST
            )
            for camera in self.cameras
        ]

    def _release_cameras(self) -> None:
        """Unsubscribe from the cameras once the policy reads no more images (a latched
        network that has looked): the node stops decoding frames, and a simulator, which
        renders a camera only while someone listens, stops rendering them."""
        for subscription in self._camera_inputs:
            self.destroy_subscription(subscription)
        self._camera_inputs = []

    def _finish(self, step: Step, hold: bool | None = None) -> None:
        """The skill ended: stop the timer and the input subscriptions, hold (by default but
        after a stop: the safety node holds), report with the statistics."""
        runner, self.runner = self.runner, None
        self.keep_out.disarm()
        self._timer.cancel()
        for subscription in self._inputs:
            self.destroy_subscription(subscription)
        self._inputs = []
        self._release_cameras()
        if (step.state != STOPPED) if hold is None else hold:
            self._send_hold()
        if runner is not None:
            self._report(step, runner)
        self.plan_id = ""

    # ------------------------------------------------------------------ inputs
    def _on_state(self, msg: JointState) -> None:
        if self.runner is None:
            return
        try:
            position = state_vector(list(msg.name), list(msg.position), STATE_NAMES)
            self.runner.joint_state(position, time.monotonic())
        except ValueError as exc:
            self.get_logger().warning(
                f"ignored {topics.JOINT_STATES.name}: {exc}", throttle_duration_sec=2.0
            )

    def _on_image(self, camera: str, msg: Image) -> None:
        if self.runner is None:
            return
        try:
            rgb = decode_image(msg.data, msg.width, msg.height, msg.step, msg.encoding)
        except ConfigError as exc:
            self.get_logger().warning(
                f"ignored {camera_topic(camera)}: {exc}", throttle_duration_sec=2.0
            )
            return
        self.runner.image(camera, rgb, time.monotonic())

    def _on_objects(self, msg: MarkerArray) -> None:
        objects = self._decoded(convert.objects_from_markers, msg, topics.OBJECTS.name)
        if objects is None:
            return
        self._objects = {name: (o.position, o.quat) for name, o in objects.items()}
        if self.runner is not None:
            self.runner.objects(self._objects, time.monotonic())

    def _on_safety(self, msg: String) -> None:
        try:
            line = decode_status(msg.data, what=topics.SAFETY.name)
        except MessageError as exc:
            self.get_logger().warning(f"ignored a message: {exc}", throttle_duration_sec=5.0)
            return
        self.safety_state = line["state"]
        keep_out = self.keep_out.heard(line)
        if self.runner is None:
            return
        if self.safety_state == "stopped":
            reason = str(line.get("reason") or "stop requested")[:200]
            self._finish(self.runner.end(STOPPED, f"stopped by the safety node: {reason}"))
        elif keep_out:  # no latch there: the arm rests where the cut left it, held from here
            self._finish(self.runner.end(STOPPED, keep_out), hold=True)

    # ------------------------------------------------------------------ outputs
    def _on_tick(self) -> None:
        if self.runner is None:
            self._timer.cancel()
            return
        step = self.runner.step(time.monotonic())
        if step.final:
            self._finish(step)
            return
        if step.target is not None:
            self._send_target(step.target.tolist())
            if self._camera_inputs and not self.actor.reads_images:
                self._release_cameras()
        elif step.state == HOLDING and not self._hold_sent:
            self._send_hold()
        self._report(step)

    def _send_target(self, target: list[float]) -> None:
        if len(target) != ACTION_DIM:
            return
        period = 1.0 / self.settings.rate
        self._command.publish(convert.trajectory(STATE_NAMES, [(period, target)]))
        self.commands_sent += 1
        self._hold_sent = False

    def _send_hold(self) -> None:
        """A trajectory with no points: the safety node holds at the measured position."""
        self._command.publish(JointTrajectory(joint_names=list(STATE_NAMES)))
        self._hold_sent = True

    def _report(self, step: Step, runner: SkillRunner | None = None) -> None:
        """A status line when the state changed, or a hold's reason or the look (and always at
        the end): a running skill that waits for its first inputs or acts says nothing new."""
        said = step.state == HOLDING or step.reason.startswith("looking:")
        key = (step.state, step.reason if said else "")
        if key == self._last_report and runner is None:
            return
        self._last_report = key
        current = runner or self.runner
        extra: dict = {"backend": self.actor.backend.name}
        if current is not None:
            task = current.skill.task
            extra["skill"] = {k: v for k, v in vars(task).items() if v}
            if runner is not None:
                extra["stats"] = runner.stats(time.monotonic())
        instruction = current.skill.instruction if current is not None else ""
        self._publish(step.state, instruction, step.reason, extra)
        line = f"{step.state}: {instruction} {step.reason}".rstrip()
        self.get_logger().info(line)

    def _publish(
        self, state: str, instruction: str, detail: object, extra=None, plan_id=None
    ) -> None:
        """A status line; with a plan id (the running skill's unless ``plan_id`` is given) it
        is a top-level ``plan_id`` and a key of the detail (text becomes ``reason``)."""
        plan_id = self.plan_id if plan_id is None else plan_id
        extra = dict(extra or {})
        if plan_id:
            extra["plan_id"] = plan_id
            detail = {**detail} if isinstance(detail, dict) else {"reason": detail}
            detail["plan_id"] = plan_id
        event = topics.StatusEvent(topics.VLA_NODE, state, instruction, detail, extra)
        self._status.publish(String(data=json.dumps(event.to_dict())))

    def destroy_node(self) -> None:
        if self.runner is not None:
            self._finish(self.runner.end(CANCELLED, "the VLA node is shutting down"))
        self.actor.backend.close()
        super().destroy_node()


main = entry_point(VLANode, "vla_node", "run the VLA node until Ctrl-C or ROS shutdown")


if __name__ == "__main__":
    raise SystemExit(main())
