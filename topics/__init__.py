"""The Kafka topics the programs share: creating one and waiting until it is usable, or
checking that one exists (``admin.py``)."""
