"""A "server" that complains on stderr and exits before the handshake."""

import sys

sys.stderr.write("starting...\nboom: missing config file\n")
sys.exit(1)
