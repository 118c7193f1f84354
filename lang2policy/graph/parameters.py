"""Every node parameter, written once: ``PARAMETERS`` maps each node's executable to its
parameters (name, default, kind, one line; ``lang2policy.graph.parameter``).

The nodes declare their parameters from it (``lang2policy.ros.params``), the graph's options
and the CLI flags that set a node parameter take their defaults from it
(``lang2policy.graph.options``, ``lang2policy.cli``), the params files
(``config/nodes/<executable>.yaml``) are checked against it (``params_problems``: they hold
only the graph's deliberate choices, never a restated default), and docs/graph.md's table of
node parameters is made from it (``markdown``). Pure: no ROS import.
"""

from __future__ import annotations

from dataclasses import replace

from lang2policy.control.command_deadline import DEFAULT_DEADLINE, DEFAULT_STREAM_TIMEOUT
from lang2policy.errors import ConfigError
from lang2policy.graph.parameter import Parameter, flag, number, switch, text
from lang2policy.graph.rules import DEFAULT_PORT
from lang2policy.graph.topics import JOINT_STATES, SIM_OBJECTS, TRAJECTORY
from lang2policy.recording.topics import DEFAULT_TOPICS
from lang2policy.vla.policy.ensemble import DEFAULT_M

# Rows several nodes share (one default each).
ROBOT = text("robot", "so101", "robot description (config/robots/<name>.yaml)")
LAYOUT = text("layout", "cap_tabletop", "object layout (config/layouts/<name>.yaml)")
OBJECTS = text("objects", "", 'comma-separated objects; "" = chosen by the seed')
SEED = number("seed", 0, "scene seed: the first layout; reset n uses seed + n", True, True)
REALISM = switch("realism", "off", "off | mild | hard | a realism YAML file (config/realism/)")
OBJECTS_TOPIC = text(
    "objects_topic",
    SIM_OBJECTS.relative,
    "where ground-truth poses are published (relative: in the node's namespace)",
)
CAMERA_RATE = number("camera_rate", 10.0, "Hz of the cameras (sim time); 0: none", zero=True)
CAMERA_WIDTH = number("camera_width", 224, "image width (px)", whole=True)
CAMERA_HEIGHT = number("camera_height", 224, "image height (px)", whole=True)
JOINT_MAP = text("joint_map", "", "arm name (hardware/<arm>.yaml) or joint map path")
CALIBRATION = text("calibration", "", 'calibration YAML, or LeRobot\'s JSON; "" = the packaged one')
BUS_TIMEOUT = number("bus_timeout", 0.02, "s to wait for a servo's reply (per try)")
PORT_WAIT = number("port_wait", 0.0, "s to wait for the serial port to appear", zero=True)
DEADLINE = (
    number("command_deadline", DEFAULT_DEADLINE, "s: older stamped trajectories brake"),
    number("stream_timeout", DEFAULT_STREAM_TIMEOUT,
           "s of silence in a stamped stream while the arm moves before it brakes"),
)  # fmt: skip

PARAMETERS: dict[str, tuple[Parameter, ...]] = {
    "sim_node": (
        ROBOT, LAYOUT, OBJECTS, SEED,
        number("control_rate", 50.0, "Hz of sim time: physics, joint_states, command application"),
        CAMERA_RATE, CAMERA_WIDTH, CAMERA_HEIGHT,
        number("real_time_factor", 1.0, "sim seconds per wall second"),
        OBJECTS_TOPIC,
        replace(REALISM, help="the world's looks: off | mild | hard | a realism YAML file"),
        Parameter("cameras", None, "cameras to publish", "names", computed="every scene camera"),
        text("appearance", "", 'JSON look of a VLA episode (vla.sim.scenes.Appearance); "" = none'),
        *DEADLINE,
    ),
    "so101_emulator_node": (
        text("link", DEFAULT_PORT, "symlink to the emulated port"),
        LAYOUT, OBJECTS, SEED,
        text("calibration", "", 'calibration YAML; "" = the packaged default'),
        OBJECTS_TOPIC,
        number("objects_rate", 20.0, "Hz of the object poses"),
        replace(REALISM, help="servo imperfections: off | mild | hard | a realism YAML file"),
        number("drop_rate", 0.0, "fraction of replies dropped", zero=True),
        number("corrupt_rate", 0.0, "fraction of replies corrupted", zero=True),
        number("latency", 0.0, "s before each reply", zero=True),
        Parameter("silent", "", "servo ids that never answer: 3 or '3,4'", "any"),
        CAMERA_RATE, CAMERA_WIDTH, CAMERA_HEIGHT,
    ),
    "so101_driver_node": (
        text("port", "", "serial port of the servo bus, e.g. /dev/ttyACM0 (required)"),
        CALIBRATION,
        switch("lerobot_calibration_pose", False,
               "with LeRobot's JSON: its calibration pose is the model's zero pose"),
        number("control_rate", 30.0, "Hz: one sync read + one sync write per tick, joint_states"),
        number("max_bus_errors", 5, "consecutive bus errors before torque off", whole=True),
        BUS_TIMEOUT, PORT_WAIT, *DEADLINE,
    ),
    "joint_map_bridge_node": (
        JOINT_MAP,
        text("command_topic", TRAJECTORY.name, "our trajectories (the safety node's output)"),
        text("state_topic", JOINT_STATES.name, "where joint states in our names are published"),
    ),
    "jtc_standin_node": (
        JOINT_MAP,
        number("rate", 100.0, "Hz of joint state publication and interpolation"),
    ),
    "usb_camera_node": (
        Parameter("device", 0, "camera index, /dev/videoN, or a video/image file", "any"),
        text("name", "front", "camera name: /camera/<name>/...; frame camera_<name>_optical_frame"),
        number("width", 0, "requested capture width (px); 0: the camera's default", True, True),
        number("height", 0, "requested capture height (px); 0: the camera's default", True, True),
        number("rate", 30.0, "images published per second (Hz)"),
        text("intrinsics", "", 'ROS camera calibration YAML; "" = a default pinhole of fov_deg'),
        number("fov_deg", 60.0, "without intrinsics: horizontal field of view (deg)"),
        flag("loop", True, "files: rewind at the end"),
        text("fourcc", "", 'pixel format to request, e.g. MJPG; "" = the camera\'s default'),
        number("max_failures", 30, "failed reads in a row before the node exits", whole=True),
        text("frame_id", "", '"" = camera_<name>_optical_frame'),
    ),
    "perception_node": (
        text("source", "ground_truth", "ground_truth (ground_truth_topic) | camera"),
        replace(ROBOT, help="robot description (object sizes, scene, arm model)"),
        text("frame_id", "world", "frame of the published poses"),
        number("publish_rate", 0.0, "Hz; 0 publishes on every input", zero=True),
        text("ground_truth_topic", SIM_OBJECTS.relative,
             "source ground_truth: the sim's object poses (relative: in the node's namespace)"),
        text("camera", "top", "source camera: camera name, /camera/<name>/image_raw"),
        text("camera_pose", "sim", "source camera: 'sim' (the scene's camera) or a pose YAML"),
        text("palette_file", "", 'source camera: measured colours YAML; "" = the scene\'s'),
        flag("robot_mask", True, "source camera: mask the arm's pixels (needs joint_states)"),
        number("mask_dilate_px", 3, "source camera: pixels added around the robot mask",
               True, True),
        number("max_missed", 3, "source camera: images an unseen object is kept", True, True),
        number("confirm_frames", 3, "source camera: images a new object must be seen in, in a "
               "row", whole=True),
        Parameter("table_z", 0.0, "source camera: world z of the table top (m)", "finite"),
        number("image_timeout", 2.0, "source camera: s without an image = blind"),
    ),
    "safety_node": (
        replace(ROBOT, help="robot description and its section of config/safety.yaml"),
        text("config", "", 'safety limits file; "" = the packaged config/safety.yaml'),
        number("watchdog_rate", 50.0, "Hz (steady clock) of the watchdog checks"),
        number("status_rate", 2.0, "Hz of the periodic status message"),
        number("heartbeat_period", 0.1, "s of robot time between re-sends of a running "
               "trajectory"),
        number("state_timeout", 0.0, "s without joint states -> hold; 0 = from the config",
               zero=True),
        number("command_timeout", 0.0, "s of commander silence mid-trajectory -> hold; 0 = "
               "from the config", zero=True),
    ),
    "controller_node": (
        ROBOT,
        text("layout", "cap_tabletop", "object pool the planning model knows"),
        flag("planner_process", True, "plan in a worker process"),
        text("sampler", "sampling", "the MPC sampler: sampling | cem"),
        number("samples", 64, "rollouts per planning iteration"),
        number("horizon", 0.5, "planning horizon (s)"),
        number("threads", 2, "rollout threads"),
        flag("proposals", None, "IK-guided candidates", "on with planner_process"),
        text("backend", "mpc", "low-level controller: mpc | rl (shipped policies for specs of "
             "their family, the MPC for the rest)"),
        text("rl_policies", "", 'backend rl: comma-separated policy directories; "" = the '
             "shipped models/rl-*"),
        number("control_rate", 50.0, "Hz of joint_command messages while a task runs"),
        number("status_rate", 2.0, "Hz of status messages"),
        number("lookahead", 0.1, "s of plan in each command"),
        number("stale_after", 0.5, "wall s without joint states: stop commanding"),
    ),
    "vla_node": (
        text("backend", "local", "local | openpi://H:P | openvla://H:P | lerobot://H:P"),
        text("model", "", 'local: model directory; "" = the shipped models/vla-so101-tiny'),
        number("connect_timeout", 3.0, "s to reach a remote backend"),
        number("request_timeout", 2.0, "s per remote request"),
        number("ensemble_m", DEFAULT_M, "temporal ensembling m (0: plain mean)", zero=True),
        number("query_every", 1, "steps per policy query", whole=True),
        text("lerobot_cameras", "", 'lerobot: comma-separated cameras; "" = the checkpoint\'s'),
        text("lerobot_checkpoint", "", "lerobot: pretrained_model directory of the policy"),
        text("lerobot_policy", "", 'lerobot: act, diffusion ...; "" = its config\'s'),
        text("lerobot_calibration", "", "lerobot: arm calibration if it speaks LeRobot's units"),
        text("lerobot_device", "cpu", "lerobot: the server's torch device"),
        number("lerobot_chunk", 10, "lerobot: actions per chunk", whole=True),
        number("lerobot_load_timeout", 120.0, "lerobot: s for the server to load the policy"),
        switch("lerobot_allow_remote", False, "lerobot: allow a non-loopback server"),
        number("lerobot_fps", 0, "lerobot: its training fps; 0 = its dataset's", True, True),
        number("rate", None, "Hz of policy steps and joint commands", computed="the model's fps"),
        number("state_timeout", 0.5, "s: older joint states hold the arm"),
        number("image_timeout", 0.5, "s: older camera images hold the arm"),
        number("objects_timeout", 2.0, "s: older object poses cannot confirm success"),
        number("startup_grace", 5.0, "s a new skill waits for its first inputs", zero=True),
        number("max_seconds", 0.0, "s per skill; 0 = the task family's budget", zero=True),
        flag("look_to_confirm", True, "a finished pick-and-place or push not seen done: "
               "fold the arm to its look pose and check again (vla.skill.look)"),
        text("layout", "cap_tabletop", "the scene model the success check mirrors"),
        number("max_joint_speed", 0.0, "rad/s cap of skill plans; 0 = config/safety.yaml's",
               zero=True),
    ),
    "planner_node": (
        text("memory", "", 'corrections memory (JSONL + MiniLM); "" = off'),
        text("llm", "local", "local | openai | replay:FILE | record:FILE | cache:FILE"),
        text("reward_llm", "", 'LLM of the reward planner; "" = llm'),
        text("route", "auto", "code | reward | auto (chosen per instruction) | skill (the VLA)"),
        number("memory_threshold", 0.8, "cosine similarity at which a past correction is "
               "re-applied"),
        text("memory_scope", "objects", "objects (same objects named) | run (those made since "
             "start)"),
        switch("vla", False, "true: a VLA node runs skill plans (skill topic)"),
        number("skill_max_joint_speed", 1.0, "rad/s a skill plan asks for"),
        number("skill_time_budget", 0.0, "s a skill plan asks for; 0 = the skill's", zero=True),
        switch("grounding", "on", "on | off: code plans grounded in the scene"),
        ROBOT,
        text("execute", "graph", "graph (the arm in the graph) | local (in-process sim)"),
        replace(OBJECTS, help='execute local: comma-separated objects; "" = chosen by the seed'),
        Parameter("seed", 0, "execute local: scene seed", "integer"),
        number("control_rate", 50.0, "Hz of the commands streamed on joint_command"),
        number("state_timeout", 2.0, "s without joint states = the arm is lost"),
        number("scene_timeout", 10.0, "s to wait for joint states and objects before a plan"),
        number("view_timeout", 0.0, "s to wait, the arm out of view, for a camera to see the "
               "objects again before a goal is judged; 0 = at once", zero=True),
    ),
    "recorder_node": (
        text("output_dir", "recordings", "directory of the MCAP files"),
        text("mode", "episode", "episode (a file per instruction) | session (one file)"),
        Parameter("topics", tuple(DEFAULT_TOPICS), "/topic (the contract's) or "
                  "/topic=pkg/msg/Type", "names"),
        text("cameras", "", "comma-separated cameras whose images to record"),
        number("linger", 3.0, "s recorded after an episode ends", zero=True),
        number("preroll", 1.0, "s recorded before an episode starts", zero=True),
    ),
    "terminal_node": (
        number("service_timeout", 2.0, "s to wait for a stop/resume/reset service to answer"),
        number("discovery_timeout", 2.0, "s to wait for a listener before publishing",
               zero=True),
        number("refresh_interval", 0.5, "s between toolbar redraws"),
        number("wait_timeout", 120.0, "s an instruction may take (non-interactive, waiting)"),
        text("arms", "", "a fleet: comma-separated arms (namespaces) it addresses, 'arm2: "
             "TEXT'; \"\" = the graph of its own namespace"),
    ),
    "teleop_node": (
        text("source", "keyboard", "keyboard | leader:PORT"),
        text("task", "", "the demonstrations' task text"),
        number("rate", 25.0, "Hz of the joint targets"),
        number("stale_timeout", 0.25, "s without a good target -> hold"),
        ROBOT,
        number("step_m", 0.01, "keyboard: m per tool key press"),
        number("step_rad", 0.05, "keyboard: rad per joint key press"),
        text("leader_calibration", "", 'leader: calibration YAML; "" = the default'),
        replace(BUS_TIMEOUT, help="leader: s to wait for a servo's reply"),
        number("margin_ticks", 100, "leader: ticks allowed outside the range", True, True),
        PORT_WAIT,
    ),
}  # fmt: skip
SIM_TIME = "use_sim_time"  # ROS's own parameter: every params file sets it


def parameter(executable: str, name: str) -> Parameter:
    """The row of ``executable``'s parameter ``name``; ConfigError naming the known ones."""
    rows = PARAMETERS.get(executable)
    if rows is None:
        raise ConfigError(f"no parameters for {executable!r}; known: {sorted(PARAMETERS)}")
    for row in rows:
        if row.name == name:
            return row
    raise ConfigError(f"{executable} has no parameter {name!r}; it has {names(executable)}")


def names(executable: str) -> list[str]:
    """The parameter names of ``executable``, in the table's order."""
    return [row.name for row in PARAMETERS[executable]]


def default(executable: str, name: str):
    """The default of ``executable``'s parameter ``name``."""
    return parameter(executable, name).default


def params_problems(executable: str, values: dict, where: str) -> list[str]:
    """What is wrong with a params file's ``values`` for ``executable``: unknown parameters,
    wrong types, and values that only restate the table's default (one source)."""
    problems = []
    for key, value in values.items():
        if key == SIM_TIME:
            continue
        try:
            row = parameter(executable, key)
        except ConfigError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if not row.accepts(value):
            problems.append(f"{where}: {key} must be {row.type_text()}, got {value!r}")
        elif row.default is not None and _same(row, value):
            problems.append(f"{where}: {key}: {value!r} restates the default (graph.parameters)")
    return problems


def override_problems(executable: str, overrides: dict) -> list[str]:
    """What is wrong with the graph's ``overrides`` of ``executable``'s parameters: names the
    node does not have, values of a type it does not take."""
    problems = []
    for key, value in overrides.items():
        if key == SIM_TIME:
            continue
        try:
            row = parameter(executable, key)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        value = list(value) if isinstance(value, tuple) else value
        if not row.accepts(value):
            problems.append(f"{executable}: {key} must be {row.type_text()}, got {value!r}")
    return problems


def _same(row: Parameter, value: object) -> bool:
    wanted = list(row.default) if isinstance(row.default, tuple) else row.default
    return type(value) is type(wanted) and value == wanted


def markdown() -> str:
    """docs/graph.md's table of node parameters."""
    lines = ["| node | parameter | default | type | what it is |", "| --- " * 5 + "|"]
    for executable, rows in PARAMETERS.items():
        for row in rows:
            cells = (executable, f"`{row.name}`", f"`{row.default_text()}`", row.type_text(),
                     row.help)  # fmt: skip
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
