"""Embed and route fixed texts with the models of one machine: the probe `smoke_arm64.py` runs
inside the arm64 image and on x86_64, to compare what the same artifacts give on each.

    python parity_probe.py MODEL_DIR INPUT.json OUTPUT.json

INPUT holds ``{"embed": [texts], "route": [texts]}``. OUTPUT gets the int8 embedding of every
``embed`` text, the router's labels and confidence for every ``route`` text, and the median
time of one embedding (ms). Only memoryd and numpy are imported: it runs in the image's venv.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from memoryd.encoder import Encoder
from memoryd.router.head import RouterHead
from memoryd.router.router import Router

ROUTER_HEAD_FILE = "router_head.npz"


def main() -> None:
    model_dir, source, target = (Path(a) for a in sys.argv[1:4])
    texts = json.loads(source.read_text())
    encoder = Encoder(model_dir)
    router = Router(RouterHead.load(model_dir / ROUTER_HEAD_FILE))
    vectors, times = [], []
    for text in texts["embed"]:
        start = time.perf_counter()
        vectors.append(encoder.embed(text).tolist())
        times.append((time.perf_counter() - start) * 1000)
    routes = []
    for text in texts["route"]:
        _, routing = encoder.embed_routed(text)
        decision = router.route(routing, text)
        routes.append({"labels": sorted(decision.labels), "confidence": decision.confidence})
    encoder.close()
    report = {"vectors": vectors, "routes": routes, "embed_ms_p50": statistics.median(times)}
    target.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
