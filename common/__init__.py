"""What every program of SensorWatch does the same way that is no part of the data
contract: wait for something with a deadline (waiting.py) and say a failure in one line
(errors.py). The bottom layer, beside contract/: it imports nothing of the project."""
