"""Copy standard input to standard output, each line prefixed with the UTC time it arrived (HH:MM:SS.s)."""
import sys
import time

for line in sys.stdin:
    t = time.time()
    sys.stdout.write(time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t * 10) % 10} " + line)
    sys.stdout.flush()
