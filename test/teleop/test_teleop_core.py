"""Teleoperation's pure core: the read-only bus check, leader ticks -> joint targets, keyboard
keys -> targets (through the real IK), the stream's holds, episodes and their recording cuts."""

import math

import numpy as np
import pytest

from lang2policy.errors import ConfigError
from lang2policy.graph.topics import TELEOP_NODE
from lang2policy.recording.episodes import EpisodeTracker, Start, Stop
from lang2policy.robots.feetech.protocol import (
    Address,
    Instruction,
    encode_instruction,
    ping_packet,
    read_packet,
    sync_read_packet,
    sync_write_packet,
    write_packet,
)
from lang2policy.robots.so101.calibration import RAD_PER_TICK, Calibration, with_joint
from lang2policy.teleop import (
    Episode,
    IkToolStepper,
    KeyboardTeleop,
    KeyDecoder,
    LeaderFault,
    TargetStream,
    WriteRefused,
    check_read_only,
    check_task,
    leader_target,
    parse_source,
)

IDS = [1, 2, 3, 4, 5, 6]


# ------------------------------------------------------------------ read-only bus
def test_read_requests_pass():
    check_read_only(ping_packet(1))
    check_read_only(read_packet(3, Address.PRESENT_POSITION, 2))
    check_read_only(sync_read_packet(Address.PRESENT_POSITION, 2, IDS))
    check_read_only(ping_packet(1) + read_packet(2, Address.TORQUE_ENABLE, 1))


@pytest.mark.parametrize(
    "packet",
    [
        write_packet(1, Address.GOAL_POSITION, b"\x00\x08"),
        write_packet(1, Address.TORQUE_ENABLE, b"\x01"),
        write_packet(1, Address.ID, b"\x07"),
        sync_write_packet(Address.GOAL_POSITION, {i: b"\x00\x08" for i in IDS}),
        encode_instruction(1, Instruction.REG_WRITE, bytes((Address.GOAL_POSITION, 0, 8))),
        encode_instruction(0xFE, Instruction.ACTION),
        encode_instruction(1, 0x06),  # RESET (factory defaults) on Feetech servos
    ],
    ids=["write-goal", "write-torque", "write-id", "sync-write", "reg-write", "action", "reset"],
)
def test_every_other_instruction_is_refused(packet):
    with pytest.raises(WriteRefused, match="allowed: PING, READ, SYNC_READ"):
        check_read_only(packet)


def test_a_write_hidden_behind_a_read_is_refused():
    with pytest.raises(WriteRefused, match="WRITE packet to servo 2"):
        check_read_only(ping_packet(1) + write_packet(2, Address.GOAL_POSITION, b"\x00\x08"))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00" + ping_packet(1),  # garbage before a packet
        ping_packet(1)[:-1],  # a partial packet
        ping_packet(1)[:-1] + bytes(((ping_packet(1)[-1] + 1) % 256,)),  # bad checksum
        b"\x03\x2a\x00\x08",  # raw register bytes, no framing
    ],
    ids=["empty", "garbage", "partial", "checksum", "unframed"],
)
def test_bytes_that_are_not_whole_valid_packets_are_refused(data):
    with pytest.raises(WriteRefused, match="not a sequence of whole, valid instruction packets"):
        check_read_only(data)


# ------------------------------------------------------------------ leader ticks
@pytest.fixture(scope="module")
def calibration():
    return Calibration.load()


def test_leader_ticks_map_with_the_drivers_calibration(calibration):
    ticks = {1: 2048, 2: 2048 + 512, 3: 2048 - 256, 4: 2048, 5: 3000, 6: 2830}
    target = leader_target(calibration, ticks)
    assert target.shape == (6,)
    assert target[0] == 0.0
    assert target[1] == pytest.approx(math.pi / 4)
    assert target[2] == pytest.approx(-math.pi / 8)
    assert target[4] == pytest.approx((3000 - 2048) * RAD_PER_TICK)
    assert target[5] == pytest.approx(1.0)  # the gripper's open tick
    # The same numbers the follower's driver reports for the same ticks.
    assert target.tolist() == pytest.approx(calibration.ticks_to_action(ticks))


def test_leader_sign_and_zero_come_from_the_leaders_file(calibration):
    leader = with_joint(calibration, "shoulder_pan", sign=-1, zero=2148)
    ticks = {1: 2148 + 100, 2: 2048, 3: 2048, 4: 2048, 5: 2048, 6: 1937}
    target = leader_target(leader, ticks)
    assert target[0] == pytest.approx(-100 * RAD_PER_TICK)
    assert target[5] == pytest.approx(0.0)


def test_leader_ticks_slightly_outside_the_range_are_clamped(calibration):
    pan = calibration["shoulder_pan"]
    ticks = {1: pan.range_max + 40, 2: 2048, 3: 2048, 4: 2048, 5: 2048, 6: 2000}
    target = leader_target(calibration, ticks, margin_ticks=100)
    assert target[0] == pytest.approx(pan.ticks_to_rad(pan.range_max))


@pytest.mark.parametrize(
    ("servo", "tick", "message"),
    [
        (1, 3299 + 101, r"shoulder_pan \(servo 1\) reads tick 3400, outside its calibrated"),
        (3, -5, r"elbow_flex \(servo 3\) reads -5; valid: integer ticks 0..4095"),
        (5, 5000, r"wrist_roll \(servo 5\) reads 5000"),
        (6, 2.5, r"gripper \(servo 6\) reads 2.5"),
    ],
)
def test_impossible_leader_ticks_are_faults(calibration, servo, tick, message):
    ticks = {1: 2048, 2: 2048, 3: 2048, 4: 2048, 5: 2048, 6: 2000, servo: tick}
    with pytest.raises(LeaderFault, match=message):
        leader_target(calibration, ticks)


def test_a_missing_leader_servo_is_a_fault(calibration):
    with pytest.raises(LeaderFault, match=r"servo 4 \(wrist_flex\) sent no position"):
        leader_target(calibration, {1: 2048, 2: 2048, 3: 2048, 5: 2048, 6: 2000})


# ------------------------------------------------------------------ keyboard
def test_key_decoder_reads_letters_arrows_and_split_escapes():
    decoder = KeyDecoder()
    assert decoder.feed(b"wA \t\x1b[A\x1b[D") == ["w", "a", "space", "tab", "up", "left"]
    assert decoder.feed(b"\x1b") == []  # maybe an arrow key: wait for the rest
    assert decoder.feed(b"[B\n") == ["down"]
    assert decoder.feed(b"\x1b") == []
    assert decoder.flush() == ["esc"]
    assert decoder.feed(b"\x03") == ["ctrl-c"]


@pytest.fixture(scope="module")
def stepper():
    return IkToolStepper("so101")


@pytest.fixture
def keyboard(stepper):
    teleop = KeyboardTeleop(stepper, step_m=0.01, step_rad=0.05)
    teleop.start(np.array([0.0, -0.5, 0.8, 0.6, 0.0, 0.5]))
    return teleop


def test_tool_keys_move_the_tool_one_step_along_their_axis(keyboard, stepper):
    for key, axis, sign in (("w", 0, 1), ("s", 0, -1), ("a", 1, 1), ("right", 1, -1),
                            ("r", 2, 1), ("f", 2, -1)):  # fmt: skip
        before = stepper.tool_position(keyboard.target[:5])
        result = keyboard.press(key)
        assert result.moved, (key, result.message)
        moved = stepper.tool_position(keyboard.target[:5]) - before
        assert moved[axis] == pytest.approx(sign * 0.01, abs=2e-3), key
        others = np.delete(moved, axis)
        assert np.all(np.abs(others) < 2e-3), (key, moved)


def test_an_unreachable_step_is_refused_and_the_target_stays(keyboard, stepper):
    far = stepper.step(keyboard.target[:5], np.array([1.0, 0.0, 0.0]))
    assert far.q is None and "out of reach" in far.reason
    keyboard.step_m = 0.05
    for _ in range(40):  # far beyond the arm's reach: refused at its edge
        result = keyboard.press("w")
        if not result.moved:
            break
    assert not result.moved
    assert "out of reach" in result.message or "swing a joint" in result.message
    before = keyboard.target.copy()
    assert not keyboard.press("w").moved
    assert np.array_equal(keyboard.target, before)


def test_joint_mode_turns_the_chosen_joint_within_its_limits(keyboard, stepper):
    assert keyboard.press("tab").message == "joint mode"
    keyboard.press("3")
    before = keyboard.target.copy()
    assert keyboard.press("up").moved
    assert keyboard.target[2] == pytest.approx(before[2] + 0.05)
    assert np.array_equal(np.delete(keyboard.target, 2), np.delete(before, 2))
    for _ in range(100):
        keyboard.press("w")
    assert keyboard.target[2] == pytest.approx(stepper.upper[2])
    assert "at its limit" in keyboard.press("w").message


def test_gripper_step_size_episode_and_quit_keys(keyboard):
    assert keyboard.press("c").moved and keyboard.target[5] == 0.0
    assert keyboard.press("o").moved and keyboard.target[5] == 1.0
    keyboard.press("]")
    assert keyboard.step_m == pytest.approx(0.02)
    keyboard.press("[")
    keyboard.press("[")
    assert keyboard.step_m == pytest.approx(0.005)
    assert keyboard.press("space").episode == "toggle"
    assert keyboard.press("x").episode == "discard"
    assert keyboard.press("q").quit and keyboard.press("esc").quit
    assert "does nothing" in keyboard.press("z").message


def test_motion_keys_wait_for_the_first_joint_state(stepper):
    teleop = KeyboardTeleop(stepper)
    result = teleop.press("w")
    assert not result.moved and "no joint state yet" in result.message
    with pytest.raises(ValueError, match="6 finite values"):
        teleop.start(np.array([0.0, math.nan, 0.0, 0.0, 0.0, 0.0]))


# ------------------------------------------------------------------ stream, episodes
def test_the_stream_holds_when_the_source_goes_stale_and_resumes():
    stream = TargetStream(stale_after=0.25)
    assert stream.step(0.0).state == "waiting" and stream.step(0.0).target is None
    stream.update(np.ones(6), 1.0)
    step = stream.step(1.2)
    assert step.state == "streaming" and step.target.tolist() == [1.0] * 6
    stale = stream.step(1.3)
    assert stale.target is None and stale.state == "holding" and "source stale" in stale.reason
    stream.update(np.zeros(6), 1.4)
    assert stream.step(1.45).state == "streaming"


def test_a_fault_holds_at_once_until_a_good_target():
    stream = TargetStream(stale_after=10.0)
    stream.update(np.ones(6), 0.0)
    stream.fault("leader: servo 3 timed out", 0.1)
    step = stream.step(0.1)
    assert step.target is None and step.reason == "leader: servo 3 timed out"
    stream.update(np.full(6, math.inf), 0.2)  # a non-finite target is a fault too
    assert "non-finite" in stream.step(0.2).reason
    stream.update(np.zeros(6), 0.3)
    assert stream.step(0.3).state == "streaming"


def test_sources_tasks_and_episodes_are_validated():
    assert str(parse_source("leader:/dev/ttyUSB1")) == "leader:/dev/ttyUSB1"
    assert parse_source(" keyboard ").kind == "keyboard"
    for bad in ("leader", "leader:", "mouse", "keyboard:x"):
        with pytest.raises(ConfigError, match=r"'keyboard' .* 'leader:<serial port>'"):
            parse_source(bad)
    assert check_task("  pick up the red block ") == "pick up the red block"
    for bad in ("", "two\nlines", "x" * 201):
        with pytest.raises(ConfigError, match="give the demonstration's task"):
            check_task(bad)
    with pytest.raises(ConfigError, match="no task text"):
        Episode().start()
    episode = Episode("push the cube")
    assert episode.start() == "push the cube" and episode.active
    with pytest.raises(ConfigError, match="already running"):
        episode.start()
    assert episode.stop() == "push the cube" and not episode.active and episode.count == 1


def test_teleop_marks_cut_recorded_episodes():
    tracker = EpisodeTracker(linger=0.5)

    def line(state, instruction=""):
        return {"node": TELEOP_NODE, "state": state, "instruction": instruction}

    assert tracker.on_status(line("streaming"), 0.0) == []
    assert tracker.on_status(line("received", "stack the blocks"), 1.0) == [
        Start("stack the blocks")
    ]
    assert tracker.on_status(line("holding"), 2.0) == [] and tracker.active
    assert tracker.on_status(line("done"), 3.0) == []
    assert tracker.poll(3.4) == [] and tracker.poll(3.5) == [Stop("teleop done")]
    tracker.on_status(line("received", "a"), 4.0)
    assert tracker.on_status(line("received", "b"), 5.0) == [Stop("next demonstration"), Start("b")]
    tracker.on_status(line("discarded"), 6.0)
    assert tracker.poll(6.5) == [Stop("teleop discarded")]


# ------------------------------------------------------------------ lang2policy teleop
def teleop_args(*words):
    from lang2policy.cli import build_parser

    return build_parser().parse_args(["teleop", *words])


def test_the_teleop_command_starts_follower_safety_recorder_and_teleop(tmp_path):
    from lang2policy.commands import teleop

    args = teleop_args("--source", "leader:/dev/ttyUSB1", "--task", "lift the red block",
                       "--record", str(tmp_path), "--rate", "30")  # fmt: skip
    specs = {s.executable: s for s in teleop.specs(args)}
    assert list(specs) == ["sim_node", "safety_node", "recorder_node", "teleop_node"]
    assert specs["teleop_node"].overrides == {
        "source": "leader:/dev/ttyUSB1", "task": "lift the red block", "rate": 30.0,
    }  # fmt: skip
    recorder = specs["recorder_node"].overrides
    assert recorder["output_dir"] == str(tmp_path.resolve() / "recordings")
    assert "/lang2policy/instruction" not in recorder["topics"]  # the task is the file's label
    assert recorder["cameras"] == "front,wrist" and recorder["preroll"] == 0.0
    assert specs["sim_node"].overrides["cameras"] == ["front", "wrist"]
    keyboard = {s.executable for s in teleop.specs(teleop_args())}
    assert keyboard == {"sim_node", "safety_node", "teleop_node"}  # no --record: no recorder


def test_the_teleop_command_refuses_bad_arguments(tmp_path, capsys):
    from lang2policy.commands import teleop

    with pytest.raises(ConfigError, match="give the demonstration's task"):
        teleop.specs(teleop_args("--record", str(tmp_path)))  # recording needs a task
    with pytest.raises(ConfigError, match=r"--rate must be 1\.\.100 Hz"):
        teleop.specs(teleop_args("--rate", "500"))
    with pytest.raises(SystemExit):
        teleop_args("--source", "joystick")
    assert "'leader:<serial port>'" in capsys.readouterr().err
