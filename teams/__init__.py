"""Teams of agents (issue 19): an agent hands a sub-task to another agent of its agency with the
``delegate_to_agent`` tool and waits for its result, holding no worker.

- :mod:`teams.tool`: the tool's handler and resumer (registered in tools.registry).
- :mod:`teams.services`: starting the delegated run, its end resuming the delegating run, the
  cancel cascade and the wait's expiry.
- :mod:`teams.runtime`: the runtime's hooks (the child's narrowed snapshot, its budget share,
  the parent's park).
- :mod:`teams.tasks`: ``teams.resume_parent`` (a delegated run's end resuming the run that waits
  for it) and the wait's expiry.
- :mod:`teams.selectors`: the agent-to-agent messages of a run (seed 003), for its page.
"""
