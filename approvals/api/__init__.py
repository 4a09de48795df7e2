"""REST endpoints of approvals: the queue and the decision."""
