#!/bin/sh
# Generated from test/rig/sshd-config.ts; do not edit (see test/compose/assets.test.ts).
set -eu
useradd -m -s /bin/bash paseotest
usermod -p '*' paseotest
mkdir -p /home/paseotest
chown paseotest: /home/paseotest
chmod 755 /home/paseotest
useradd -m -s /bin/bash paseonoisy
usermod -p '*' paseonoisy
mkdir -p /home/paseonoisy
chown paseonoisy: /home/paseonoisy
chmod 755 /home/paseonoisy
printf '%s' 'echo '\''rc-noise: hello from .bashrc'\''; printf '\''rc-noise without newline .bashrc'\''; export PASEO_RC_NOISE_BASHRC=1
' > /home/paseonoisy/.bashrc && chown paseonoisy: /home/paseonoisy/.bashrc
printf '%s' 'echo '\''rc-noise: hello from .profile'\''; printf '\''rc-noise without newline .profile'\''; export PASEO_RC_NOISE_PROFILE=1
' > /home/paseonoisy/.profile && chown paseonoisy: /home/paseonoisy/.profile
printf '%s' 'echo '\''rc-noise: hello from .zshenv'\''; printf '\''rc-noise without newline .zshenv'\''; export PASEO_RC_NOISE_ZSHENV=1
' > /home/paseonoisy/.zshenv && chown paseonoisy: /home/paseonoisy/.zshenv
printf '%s' 'echo '\''rc-noise: hello from .bash_profile'\''; printf '\''rc-noise without newline .bash_profile'\''; export PASEO_RC_NOISE_BASH_PROFILE=1
' > /home/paseonoisy/.bash_profile && chown paseonoisy: /home/paseonoisy/.bash_profile
