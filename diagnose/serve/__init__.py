"""``diagnose serve``: an alert from Alertmanager arrives with its diagnosis already made.

- :mod:`~diagnose.serve.webhook`: Alertmanager's webhook body (version 4), read and checked;
- :mod:`~diagnose.serve.queue`: the accepted alerts in an SQLite file (deduplicated, restart-safe);
- :mod:`~diagnose.serve.dispatcher`: the queue worked a few at a time in worker processes;
- :mod:`~diagnose.serve.diagnosis`: one alert pulled, analysed and kept (in a worker);
- :mod:`~diagnose.serve.app`: the Starlette application; :mod:`~diagnose.serve.pages` its index page;
- :mod:`~diagnose.serve.notify`: the optional notifier.
"""

from __future__ import annotations

import logging

from diagnose.serve.app import ServeConfig, make_app
from diagnose.serve.diagnosis import Settings

__all__ = ["ServeConfig", "Settings", "make_app", "serve"]


def serve(config: ServeConfig, host: str, port: int) -> None:
    """Run the service until it is stopped (SIGINT or SIGTERM): uvicorn, one process, logs on stderr."""
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    uvicorn.run(make_app(config), host=host, port=port, log_level="warning", access_log=False)
