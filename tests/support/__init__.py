"""What the tests share beside tests/conftest.py's fixtures: the brokers, the processes and
the Docker stacks they start, what they read back (Kafka, the lake, the job's output), the
expected results, and polling with a deadline."""
