"""REST endpoint of usage: the summary over a date range."""
