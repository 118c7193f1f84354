"""The command-line verbs of ``lang2policy`` that do more than parse arguments: ``run``,
``exec-policy`` and ``demo``. ``lang2policy.cli`` parses, these do the work."""
