"""The dashboard web page (``python -m ops.dashboard``): alerts, temperatures, pipeline health."""
