"""The sensor fleet simulator, ``python -m producer``: JSON readings (late, out of order,
duplicated and malformed on purpose) to Kafka, or over MQTT as devices would
(``--transport mqtt``); ``python -m producer replay`` sends recordings instead."""
