"""``diagnose load``: find a service's knee under realistic load, hold near it, and set it.

``plan`` says what a run is (the target, the requests, the stages) and ``preflight`` makes one from the
options; ``workload`` draws the requests and their arrivals; ``engine`` sends them with Locust (in its
own process: Locust patches the standard library with gevent when imported; ``locustfile`` is what
Locust's workers load); ``curve`` measures each stage and finds the knee; ``soak`` judges the hold
near it; ``sweep`` runs the stages one after another, choosing each from the last; ``report`` writes
and renders the result; ``history`` judges it against the last run of its name. ``results`` and
``results_knee`` read load tests already run (vLLM, SGLang, genai-perf, AIPerf, Locust, k6) into the
same curve. Everything but ``engine`` and ``locustfile`` is plain Python that a test can drive with a
simulated service.
"""
