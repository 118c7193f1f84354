"""A camera that goes quiet makes perception blind: said once, repeated, and lifted."""

import pytest

from lang2policy.errors import ConfigError
from lang2policy.perception.image_watch import ImageWatch


def test_a_quiet_camera_is_said_blind_with_since_when_and_seeing_once_images_return():
    watch = ImageWatch("top", timeout=2.0, started=100.0, repeat=10.0)
    assert watch.check(101.0) is None  # still within the timeout after start
    assert watch.check(102.5) == "no image from camera 'top' yet (2.5 s since start)"
    assert watch.check(103.0) is None  # said; not again before the repeat
    assert watch.image(104.0, wall=0.0) == "camera 'top' images again"
    assert not watch.blind and watch.check(105.0) is None
    line = watch.check(106.5)
    assert line is not None and line.startswith("no image from camera 'top' since ")
    assert line.endswith("(2.5 s)") and watch.blind
    assert watch.check(110.0) is None
    assert watch.check(116.6) is not None  # repeated for listeners that started later
    assert watch.image(117.0) is not None and watch.image(117.1) is None


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("inf"), float("nan")])
def test_a_timeout_that_is_no_time_is_refused(timeout):
    with pytest.raises(ConfigError, match="image_timeout"):
        ImageWatch("top", timeout=timeout, started=0.0)
