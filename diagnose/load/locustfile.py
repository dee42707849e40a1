"""The locustfile for Locust's workers of a distributed ``diagnose load``:

    locust --worker -f $(diagnose load --locustfile) --master-host HOST

Each worker runs one dispatcher (engine.py), which takes its stages from ``diagnose load``'s master
process through Locust's own messages; nothing here is configured per run.
"""

from locust import events
from locust.env import Environment
from locust.runners import WorkerRunner

from diagnose.load.engine import Dispatcher, listen_for_stages

__all__ = ["Dispatcher"]


@events.init.add_listener
def _listen(environment: Environment, **_: object) -> None:
    if isinstance(environment.runner, WorkerRunner):
        listen_for_stages(environment)
