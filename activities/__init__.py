"""Everything with I/O: the agents' model calls and tools, run as Temporal activities."""
