"""History checkers for the fault campaign (issue 16). Each takes the operations of one run
(`history.load` / `history.pair`) and returns a list of `Anomaly` (empty: the history passed).
"""
