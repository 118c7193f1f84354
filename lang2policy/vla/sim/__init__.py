"""The VLA's episodes in simulation and the demonstrations made from them: randomised scenes
(``scenes``), the episode types and their seeded set-up (``episodes``), the scripted expert of
each task family (``oracle``), the success judge (``judge``), the privileged scene state
recorded beside each frame (``environment_state``), frames rendered by a light render twin
(``frames``, ``render_twin``), the scripted demonstrations (``demos``, ``lang2policy record
demos``) and one-frame labelled layouts (``scene_views``). Closed-loop rollouts reuse all of it.
It imports only ``spec``: it makes data and knows nothing of the network that learns from it.
"""
