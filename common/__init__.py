"""What every program of SensorWatch does the same way that is no part of the data
contract: wait for something with a deadline (waiting.py), say a failure in one line
(errors.py), and a stop a signal handler may ask for (stop_signal.py). The bottom layer,
beside contract/: it imports nothing of the project."""
