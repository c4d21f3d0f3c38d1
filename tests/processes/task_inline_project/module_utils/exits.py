import sys


def leave():
    sys.exit(3)
