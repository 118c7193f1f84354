"""Helpers shared by the test modules (never tests themselves; pytest collects nothing here).

``pyproject.toml`` puts ``test/`` on ``sys.path`` (``pythonpath``), so a test imports them as
``from support.waiting import wait_for``. A test module never imports another test module:
what two of them share lives here, or as a fixture in the nearest ``conftest.py``.
"""
