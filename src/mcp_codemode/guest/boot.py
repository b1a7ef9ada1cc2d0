"""The sandbox's entry point: a few lines, so that the worker itself is imported as a module.

Python compiles a script given on its command line every time, but loads a module from the bytecode that
staging compiled beside it (``-B`` only stops writing bytecode, not reading it). Started as
``python3 -I -S -B -u boot.py CONFIG_JSON``; ``-I`` keeps this directory off ``sys.path``, so it is added here.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

worker = __import__("worker")  # importable thanks to the line above

sys.exit(worker.main(sys.argv))
