"""Quality-of-service profiles the graph's contract names (``graph.topics``).

``LATCHED`` is for ``topics.LATCHED_TOPICS``: reliable, transient local, depth 1, so a node that
joins late (a safety node restarted mid-plan) still gets the last message. Publisher and
subscriber both use it: a volatile subscription would not be handed the kept message.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

LATCHED = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
