"""The node graph: its topic contract (``topics``), its options (``options``, one table; their
checks in ``rules``), its description (``nodes``), the launcher that starts it from Python
(``launcher``) and its outside view (``snapshot``). Pure: no ROS."""
