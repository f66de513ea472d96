"""Python helpers behind the shell commands in scripts/ (setup, kafka-local, ...)."""
