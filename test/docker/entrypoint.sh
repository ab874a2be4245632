#!/bin/sh
# Container start: authorize the client key the compose runner generated (a public key, passed in
# the environment so no host path has to be mounted), then run sshd in the foreground. The variable
# is dropped before sshd starts; sshd builds each session's environment itself anyway.
set -eu
: "${PASEO_AUTHORIZED_KEY:?set PASEO_AUTHORIZED_KEY to the public key to authorize}"
umask 022
printf '%s\n' "$PASEO_AUTHORIZED_KEY" > /etc/ssh/paseo/authorized_keys
unset PASEO_AUTHORIZED_KEY
exec /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
