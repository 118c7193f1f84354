"""Sessions: an arm ready for skills, in simulation (``sim``) or in the ROS graph (``remote``).

Both implement ``protocol.Session``; ``readout.scene_readout`` reads what a session's world says
the scene is.
"""

from lang2policy.session.protocol import Session

__all__ = ["Session"]
