"""The verbs of ``lang2policy``: one module per command, each with ``add_parser(subparsers)``
and ``run(args)`` (or ``main(argv)`` for a forwarded command), listed in ``lang2policy.cli``'s
``COMMANDS`` table."""
