"""Hostile and broken privilege-policy files (issue 13, finding 2), judged by effect.

A policy file must never make the host fetch or read anything (a JSON-Schema ``$ref`` to
``http://`` or ``file://``), a repeated key must never silently drop a condition, and no file
(alias bomb, binary, huge integer, deep or cyclic YAML) may cost more than a bounded parse or end
in anything but a one-line PolicyError that names the file.
"""

from __future__ import annotations

import http.server
import os
import threading
import time
from pathlib import Path

import pytest

from lang2policy.errors import PolicyError
from lang2policy.sandbox.policy import Box, PolicyRequest, PrivilegePolicy

WS = Box((0.0, -0.3, 0.0), (0.5, 0.3, 0.4))
HEAD = "version: 1\nzones:\n  near: {min: [0.0, -0.3, 0.0], max: [0.35, 0.3, 0.4]}\nrules:\n"


def move(x: float, y: float = 0.0, z: float = 0.10, speed: float = 0.1) -> PolicyRequest:
    return PolicyRequest(
        skill="move_to",
        category="motion",
        args={"position": [x, y, z], "speed": speed},
        targets=((x, y, z),),
    )


def rule_with_speed_schema(schema: str) -> str:
    """A policy whose one allow rule constrains move_to's speed by ``schema`` (YAML flow)."""
    return (
        HEAD + "  - id: move\n    skill: move_to\n    effect: allow\n"
        f"    when:\n      targets_in: near\n      args:\n        speed: {schema}\n"
    )


def write(tmp_path: Path, text: str | bytes, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def load_then_decide(path: Path) -> PolicyError | None:
    """Load ``path`` as the host does; if it loads, decide one call as the host would."""
    try:
        policy = PrivilegePolicy.load(path, WS)
    except PolicyError as exc:
        return exc
    policy.decide(move(0.2))
    return None


def assert_one_line_naming(error: BaseException | None, path: Path, *words: str) -> str:
    assert isinstance(error, PolicyError), f"expected a PolicyError, got {error!r}"
    text = str(error)
    assert len(text.splitlines()) == 1, f"not one line: {text!r}"
    assert str(path) in text, f"does not name the file: {text}"
    for word in words:
        assert word in text, f"{word!r} missing from: {text}"
    return text


# ---------------------------------------------------------------- $ref: nothing fetched or read
class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = b'{"type": "number"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server():
    """A real HTTP server on 127.0.0.1 that records every request path."""
    hits: list[str] = []
    handler = type("Handler", (_Recorder,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()
    server.server_close()


def test_http_ref_is_refused_at_load_and_nothing_is_fetched(tmp_path, http_server):
    url, hits = http_server
    path = write(tmp_path, rule_with_speed_schema(f'{{"$ref": "{url}/speed.json"}}'))
    start = time.monotonic()
    error = load_then_decide(path)
    elapsed = time.monotonic() - start
    time.sleep(0.2)  # a fetch in flight would have arrived by now
    assert hits == [], f"the policy made the host fetch {hits}"
    assert_one_line_naming(error, path, "rules[0]", "when.args.speed", "$ref", "allowed")
    assert elapsed < 1.0


def test_file_ref_is_refused_and_never_opened(tmp_path):
    """A FIFO as the $ref target: opening it for reading is seen by a writer that polls."""
    fifo = tmp_path / "schema.json"
    os.mkfifo(fifo)
    opened = threading.Event()
    stop = threading.Event()

    def watch() -> None:  # opening the write end without blocking works only with a reader
        while not stop.is_set():
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.002)
                continue
            opened.set()
            os.write(fd, b'{"type": "number"}')
            os.close(fd)
            return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    path = write(tmp_path, rule_with_speed_schema(f'{{"$ref": "file://{fifo}"}}'))
    try:
        error = load_then_decide(path)
        time.sleep(0.1)
    finally:
        stop.set()
        watcher.join(2)
    assert not opened.is_set(), "the policy made the host open the file its $ref names"
    assert_one_line_naming(error, path, "$ref", "allowed")


@pytest.mark.parametrize(
    "schema",
    [
        '{"$ref": "#/$defs/fast", "$defs": {"fast": {"maximum": 1}}}',
        '{"$ref": "#"}',  # would recurse without end on every decision
        '{"$dynamicRef": "#meta"}',
        '{"$id": "http://127.0.0.1:9/", "maximum": 1}',
        '{"allOf": [{"$ref": "http://127.0.0.1:9/x"}]}',
    ],
)
def test_every_reference_keyword_is_refused(tmp_path, schema):
    path = write(tmp_path, rule_with_speed_schema(schema))
    assert_one_line_naming(load_then_decide(path), path, "is not allowed; allowed:")


def test_plan_dict_with_ref_is_refused_before_narrowing():
    base = PrivilegePolicy.from_dict(
        {"version": 1, "rules": [{"id": "m", "skill": "move_to", "effect": "allow"}]}, WS, "base"
    )
    plan = {
        "version": 1,
        "rules": [
            {
                "id": "m",
                "skill": "move_to",
                "effect": "allow",
                "when": {"args": {"speed": {"$ref": "http://127.0.0.1:9/x"}}},
            }
        ],
    }
    with pytest.raises(PolicyError, match=r"plan\.yaml: .*\$ref"):
        base.narrowed(PrivilegePolicy.from_dict(plan, WS, "plan.yaml"))


def test_validators_never_retrieve_even_without_the_load_check(http_server):
    """Belt and braces: the registry the validators get refuses every retrieval."""
    from lang2policy.sandbox.policy_conditions import new_validator

    url, hits = http_server
    validator = new_validator({"$ref": f"{url}/x"})
    with pytest.raises(Exception, match="Unresolvable"):
        validator.is_valid(0.1)
    time.sleep(0.1)
    assert hits == []


# ---------------------------------------------------------------- duplicate keys
DUPLICATE_WHEN = (
    HEAD + "  - id: move\n    skill: move_to\n    effect: allow\n"
    "    when: {targets_in: near}\n"
    "    when: {args: {speed: {maximum: 0.25}}}\n"
)


def test_duplicate_when_is_refused_and_the_arm_never_moves(tmp_path, session):
    """The second ``when`` would drop ``targets_in: near`` (x <= 0.35) and let x = 0.40 run."""
    from lang2policy.commands.exec_policy import load_policy
    from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
    from lang2policy.skills.backend import SimSkillBackend

    session.reset(0)
    path = write(tmp_path, DUPLICATE_WHEN)
    tool_x: list[float] = []
    session.robot.observers.append(lambda: tool_x.append(float(session.primitives.tool_point()[0])))
    start_x = float(session.primitives.tool_point()[0])
    try:
        try:
            policy = load_policy(path, session)  # what `lang2policy exec-policy --policy` does
        except PolicyError as exc:
            error: PolicyError | None = exc
        else:
            error = None
            runner = SandboxRunner(
                SimSkillBackend(session), policy, limits=SandboxLimits(wall_seconds=20)
            )
            runner.run("move_to([0.40, 0.0, 0.10])\n")
    finally:
        session.robot.observers.pop()
    reached = max(tool_x, default=start_x)
    assert reached < 0.35, f"the tool went to x = {reached:.3f} (the policy's zone ends at 0.35)"
    assert_one_line_naming(error, path, "rules[0]", "duplicate key 'when'", "each key once")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (HEAD.replace("zones:", "zones: {}\nzones:"), ("top level", "duplicate key 'zones'")),
        (
            HEAD + "  - {id: a, skill: pick, effect: allow, effect: forbid}\n",
            ("rules[0]", "duplicate key 'effect'"),
        ),
        (
            "version: 1\nzones:\n  near: {min: [0, 0, 0], max: [1, 1, 1]}\n"
            "  near: {min: [0, 0, 0], max: [9, 9, 9]}\nrules: []\n",
            ("zones", "duplicate key 'near'"),
        ),
    ],
)
def test_every_duplicate_key_is_refused(tmp_path, text, words):
    path = write(tmp_path, text)
    assert_one_line_naming(load_then_decide(path), path, *words)


# ---------------------------------------------------------------- bounded parse cost
def billion_laughs(levels: int = 9) -> str:
    """Nine levels of nine aliases: 9**9 leaves once expanded, 1 KiB as text."""
    defs = ["&x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    defs += [f"&x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return (
        HEAD + "  - id: r\n    skill: pick\n    effect: allow\n    when:\n      args:\n"
        f"        obj:\n          examples: [{', '.join(defs)}]\n          enum: *x{levels - 1}\n"
    )


@pytest.mark.timeout(15)
def test_alias_bomb_is_refused_within_a_second(tmp_path):
    path = write(tmp_path, billion_laughs())
    start = time.monotonic()
    error = load_then_decide(path)
    elapsed = time.monotonic() - start
    assert_one_line_naming(error, path, "anchors and aliases", "not allowed")
    assert elapsed < 2.0, f"took {elapsed:.1f} s"


@pytest.mark.timeout(15)
@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("binary", bytes(range(256)) * 64, ("not UTF-8",)),
        ("control-chars", b"version: 1\n\x00\x01\x02\x7f" * 100, ("not valid YAML",)),
        ("huge-int", "version: 1\nbudgets: {max_skill_calls: " + "9" * 100_000 + "}\n", ()),
        ("long-int", "version: 1\nbudgets: {max_skill_calls: " + "9" * 5_000 + "}\n", ()),
        ("deep-flow", "version: 1\nrules: " + "[" * 10_000 + "]" * 10_000 + "\n", ("deeper",)),
        (
            "deep-block",
            "version: 1\nzones:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(500)),
            ("deeper",),
        ),
        ("self-anchor", "version: 1\nrules: &r [*r]\n", ("anchors and aliases",)),
        ("self-anchor-map", "version: 1\nzones: &z {a: *z}\nrules: []\n", ("anchors",)),
        ("huge-file", "version: 1\nrules: []\n" + "# padding\n" * 200_000, ("bytes",)),
        ("python-tag", "version: 1\nrules: !!python/object/apply:os.system [true]\n", ("tag",)),
        ("merge-key", "version: 1\nrules: []\nzones: {<<: {a: 1}}\n", ("merge keys",)),
        ("two-documents", "version: 1\nrules: []\n---\nversion: 1\n", ("single document",)),
        ("empty", "", ("expected a mapping",)),
    ],
)
def test_bad_files_give_one_line_policy_errors(tmp_path, name, content, words):
    path = write(tmp_path, content, f"{name}.yaml")
    start = time.monotonic()
    error = load_then_decide(path)
    assert_one_line_naming(error, path, *words)
    assert time.monotonic() - start < 2.0


def test_fifo_policy_path_does_not_block(tmp_path):
    fifo = tmp_path / "policy.yaml"
    os.mkfifo(fifo)
    result: list[BaseException | None] = []
    thread = threading.Thread(target=lambda: result.append(load_then_decide(fifo)), daemon=True)
    thread.start()
    thread.join(3)
    if thread.is_alive():  # unblock the reader so the thread can end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("loading a FIFO as a policy blocked")
    assert_one_line_naming(result[0], fifo, "not a regular file")


def test_names_with_line_breaks_cannot_forge_lines(tmp_path):
    text = HEAD + '  - {id: "ok\\nrules[1]: fine\\u2028x", skill: pick, effect: maybe}\n'
    path = write(tmp_path, text)
    assert_one_line_naming(load_then_decide(path), path, "effect", "allowed")


def test_good_files_still_load(tmp_path):
    path = write(tmp_path, rule_with_speed_schema('{"type": "number", "maximum": 0.25}'))
    policy = PrivilegePolicy.load(path, WS)
    assert policy.decide(move(0.30)).allowed
    assert not policy.decide(move(0.40)).allowed
    assert not policy.decide(move(0.30, speed=0.3)).allowed
