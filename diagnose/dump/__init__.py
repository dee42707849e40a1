"""Reading dumps: the folder format every other stage consumes."""

from diagnose.dump.model import Dump, Manifest
from diagnose.dump.reader import load_dump

__all__ = ["Dump", "Manifest", "load_dump"]
