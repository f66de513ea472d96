"""The contracts every part of SensorWatch shares (SPEC section 2): the event."""
