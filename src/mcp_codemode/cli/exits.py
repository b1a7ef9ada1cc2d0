"""The exit statuses of the commands, apart from their bodies so that ``main.py`` names them without loading those.

They follow shell habits: 0 success, 1 the code raised (or the sandbox died under it), 124 timeout (as
``timeout(1)``), 125 the bridge itself could not run the code (bad settings, no backend).
"""

EXIT_OK, EXIT_RAISED, EXIT_TIMEOUT, EXIT_BRIDGE = 0, 1, 124, 125
