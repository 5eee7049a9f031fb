"""A "server" that never serves: writes its pid to argv[1], then sleeps (ignoring stdin)."""

import os
import sys
import time

with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
time.sleep(3600)
