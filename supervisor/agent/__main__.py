"""The PRIMS agent's entry point. The jail's python runs this directory,
bound read-only at /prims: `python -I -u /prims` (a fork template runs
`python -s -u /prims`, see prims_agent/main.py)."""

from prims_agent.main import main

main()
