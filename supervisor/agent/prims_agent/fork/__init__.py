"""The fork wing's half of the agent (the architecture guide's "Fork
templates" and "Fresh in place").

A template (`template`) imports the prewarm set once, then only forks.
Each fork becomes *python's parent* (`parent`): it talks to a jailer that
adopts it over the SOCK_SEQPACKET socket the `fork` frame carried (hello,
the jailer's plan with stdio, channel and what to apply, unshared, the
jailer's go with the init's pid namespace and python's Landlock ruleset),
confines itself, and forks python, pid 2 of the jail the jailer's init
built around it. A second socket, from the supervisor, asks it for a fresh
python in the same jail: it kills python and everything python left, and
forks again. The messages are `prims_protocol::fork`'s; the limits here
must match it (a test of the supervisor checks).
"""
