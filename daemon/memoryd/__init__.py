"""memoryd: an on-device memory daemon for personal LLM agents."""

import os
import sys

# memoryd's numpy work is small matrices (one embedding, the fact reader's head on one turn's
# pieces, a training round on a few thousand rows). OpenBLAS threads only contend for the cores
# the encoder and the server use: a training round took 17-24 s with OpenBLAS's default threads
# on a busy 2-core machine and 2 s with one, and batch ingest ran at 107 turns/s instead of 230.
# Set before numpy is first imported; an explicit setting wins.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_CHOSEN = [_var for _var in _BLAS_THREADS if _var in os.environ]
for _var in _BLAS_THREADS:
    os.environ.setdefault(_var, "1")
if "numpy" in sys.modules and not _CHOSEN:
    # A program that loaded numpy before memoryd: its BLAS read the variables already.
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")

# onnxruntime (1.32 on Linux) starts Microsoft's telemetry when it is loaded: it writes a device
# id and a ~1 MB event store under $XDG_CACHE_HOME or ~/.cache/Microsoft/DeveloperTools/ (in the
# container, that is the data volume). An offline, private daemon keeps it off; read when the
# library loads, so set before anything imports onnxruntime.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__version__ = "0.1.0"
