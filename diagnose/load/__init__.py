"""``diagnose load``: find a service's knee under realistic load, hold near it, and say what saturates.

``plan`` says what a run is (the target, the requests, the stages); ``workload`` draws the
requests and their arrivals; ``engine`` sends them with Locust (in its own process: Locust patches
the standard library with gevent when imported); ``curve`` measures each stage and finds the knee;
``soak`` judges the hold near it; ``sweep`` runs the stages one after another, choosing each from the
last; ``report`` renders the result. Everything but ``engine`` and ``locustfile`` is plain Python
that a test can drive with a simulated service.
"""
