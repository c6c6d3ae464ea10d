"""What the tests share: a free port, a server started and waited for, the command line run.

``ports.free_port`` is the one free-port helper, ``servers.running`` the one helper that starts
a server process and waits until it answers (and stops it), ``cli`` the one way to run
``thermostat`` (in-process with ``capsys``, or the installed console script).
"""
