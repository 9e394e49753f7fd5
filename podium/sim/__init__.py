"""Trace replay on a virtual clock through the same scheduling core the daemon uses.

`traces` reads job traces (Tiresias, Alibaba GPU 2023, a simple CSV), `engine`
replays them with a Policy, `metrics` summarises the outcome.
"""
