"""graphfuse's per-kernel profiler for the CPU build (`graphfuse profile`, `run --profile`).

The model is built twice from one lowering: as usual, and with timers around each kernel
call of the entry function (instrument.py, calling profile_runtime.c), so only the
profiling build carries timers and both share every kernel object. builds.py makes the
two builds, measure.py runs them, machine.py measures this machine's roofline once,
origins.py maps ops back to the user's model for `--by-op`, report.py and trace.py show
the result, command.py drives it for the CLI.
"""
