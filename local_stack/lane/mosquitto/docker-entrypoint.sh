#!/bin/sh
# As the official image's: started as root, /mosquitto is handed to the broker's user
# (Mosquitto itself then drops to it); as any other user, the command runs as it is.
set -e
if [ "$(id -u)" = 0 ]; then
  [ -d /mosquitto ] && chown -R mosquitto:mosquitto /mosquitto || true
fi
exec "$@"
