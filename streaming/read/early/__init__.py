"""Reading a shard before it is whole: opener.py decides which early reader a shard gets and when,
reader.py is the reader that moves to the whole file (and the budgets). Switched on per iteration
by ReadPolicy.framed_early / ranged_early (plan/iteration.py)."""
