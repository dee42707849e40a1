"""diagnose: root-cause diagnosis for AI inference services.

The pipeline is visible in the sub-packages: ``dump`` reads the evidence,
``facts`` turns it into named numbers with their sources, ``judge`` runs the
YAML rules over the facts, and ``report`` renders the result.
"""

__version__ = "0.1.0"
