"""Alert rules as data (docs/alerting.md): the rules file's format, defined once
(``model.py``), a file read and validated into it (``parsing.py``), and what a rule set
means for a sensor's temperature (``limits.py``). A running program follows the file with
conf/rules_watch.py."""
