"""What serving engines and frameworks write, known from their own sources, shared by every layer.

``oom`` reads and classifies out-of-memory messages (PyTorch's wordings across
releases, ROCm, TensorFlow and XLA); ``metrics`` maps each engine's /metrics
names onto the dump's server table; ``failures`` names the lines that say an
engine stalled or died. The importers, the recorder, ``diagnose pull`` and
``diagnose verify`` read them alike, so a fact means the same whichever path
brought it.
"""
