"""Delegation between agents: the delegated run's start (the ``delegate_to_agent`` call), its end
resuming the run that waits for it, the cancel cascade and the wait's expiry. One module each:

- :mod:`teams.services.delegate`: the call: its arguments, the delegated run's start, and the
  waiting call's result when the delegating run resumes;
- :mod:`teams.services.limits`: what a delegated run may do (tools, limits, deadline, budget
  share), decided once when it starts, and what a run and its delegated runs have cost;
- :mod:`teams.services.ending`: a run's end: the cancel cascade, and a delegated run answering
  and resuming the run that waits for it (the locks this takes, and in which order);
- :mod:`teams.services.expiry`: the wait's expiry at its deadline.
"""
