"""Training the VLA (``lang2policy train vla``): the run (``run``), its settings and recipes
(``settings``), everything decided before the first step (``prepare``, ``scene_latch``), the
batches read from a dataset (``batches``), the optimisation (``loop``, ``augment``,
``distributed``), the files a run writes (``outputs``, ``plot``), and a synthetic dataset with
the network's size and speed for tests and measurements (``synthetic``, ``measure``). It sits on
``model`` and ``policy`` (a run's periodic evaluation acts through a ``VLAPolicy``).
"""
