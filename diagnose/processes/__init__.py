"""diagnose as processes: the heap it keeps between analyses (heap.py), the environment its own
processes and the ones it starts for itself run with (environment.py), the second process it
starts to work beside it (beside.py), and the pools of workers that end with it (pool.py).

Standard library only: the CLI imports it before numpy and pandas, to set what must be set first.
"""
