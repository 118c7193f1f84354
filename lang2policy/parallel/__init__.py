"""Where independent jobs run: a local process pool (the default) or a Ray cluster
(``executor``)."""
