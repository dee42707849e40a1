"""OOM verdicts on every real OOM sample of both sets, against the documented rule (diagnose/engines/oom.py).

The expected classes are a careful reading of each message's figures by the
rule; where a reading could go either way the note of the session that wrote
this table says so. A change to the parser or the rule that moves a verdict
shows up here, file by file.
"""

from __future__ import annotations

import pytest

from diagnose.engines.oom import (
    ANOMALOUS,
    EXHAUSTION,
    EXHAUSTION_ENGINE_PREALLOCATED,
    EXHAUSTION_LIMIT,
    EXHAUSTION_OTHER_PROCESS,
    EXHAUSTION_REQUEST_TOO_LARGE,
    FRAGMENTATION,
    OTHER_BACKEND,
    UNKNOWN,
)
from diagnose.importers import Source, recognise
from tests.conftest import SHARED_DATA

SAMPLES = SHARED_DATA / "real-samples"
FOLDERS = {"pytorch_oom": SAMPLES / "formats" / "pytorch_oom", "oom": SAMPLES / "field-2026-12" / "oom"}
FRAG, EXH, TOO_LARGE, OTHER_PROCESS = (
    FRAGMENTATION,
    EXHAUSTION,
    EXHAUSTION_REQUEST_TOO_LARGE,
    EXHAUSTION_OTHER_PROCESS,
)
ENGINE, LIMIT = EXHAUSTION_ENGINE_PREALLOCATED, EXHAUSTION_LIMIT

VERDICTS = {
    ("oom", "01.log"): {EXH},
    ("oom", "02.log"): {TOO_LARGE},
    ("oom", "03.log"): {EXH},
    ("oom", "04.log"): {EXH},
    ("oom", "05.log"): {FRAG},
    ("oom", "06.log"): {EXH},
    ("oom", "07.log"): {EXH},
    ("oom", "08.log"): {ANOMALOUS},
    ("oom", "09.log"): {EXH},
    ("oom", "10.log"): {EXH},
    ("oom", "11.log"): {EXH},
    ("oom", "12.log"): {FRAG},
    ("oom", "13.log"): {EXH},
    # the last message is cut in its figure list ("... already allocated;"): unknown, not exhaustion
    ("oom", "14.log"): {FRAG, UNKNOWN},
    ("oom", "15.log"): {EXH},
    ("oom", "16.log"): {EXH},
    ("oom", "17.log"): {EXH},
    ("oom", "18.log"): {EXH},
    ("oom", "19.log"): {EXH},
    ("oom", "20.log"): {ANOMALOUS},
    ("oom", "21.log"): {OTHER_BACKEND},
    ("oom", "22.log"): {OTHER_BACKEND},
    ("oom", "23.log"): {OTHER_BACKEND},
    ("oom", "24.log"): {OTHER_BACKEND},
    ("oom", "25.log"): {LIMIT},
    ("oom", "26.log"): {TOO_LARGE},
    ("oom", "27.log"): {EXH},
    ("oom", "28.log"): {UNKNOWN},
    ("oom", "29.log"): {UNKNOWN},
    ("oom", "30.log"): {EXH},
    ("oom", "31.log"): {FRAG},
    ("oom", "32.log"): {EXH},
    ("oom", "33.log"): {EXH},
    ("oom", "34.log"): {FRAG},
    ("oom", "35.log"): {FRAG},
    ("oom", "36.log"): {EXH},
    ("oom", "37.log"): {TOO_LARGE},
    ("oom", "38.log"): {ENGINE},
    ("oom", "39.log"): {ENGINE},
    ("oom", "40.log"): {EXH},  # "this process has 0 bytes in use" is NVML in a container, not a fact
    ("oom", "41.log"): {TOO_LARGE},
    ("oom", "42.log"): {EXH},
    ("oom", "43.log"): {EXH},
    ("oom", "44.log"): {EXH},
    ("oom", "45.log"): {FRAG},
    ("oom", "46.log"): {EXH},
    ("oom", "47.log"): {EXH},
    ("oom", "48.log"): {UNKNOWN},
    ("oom", "49.log"): {OTHER_BACKEND},
    ("pytorch_oom", "01.txt"): {ANOMALOUS},
    ("pytorch_oom", "02.txt"): {EXH},
    ("pytorch_oom", "03.txt"): {EXH},
    ("pytorch_oom", "04.txt"): {EXH},
    ("pytorch_oom", "05.txt"): {FRAG},
    ("pytorch_oom", "06.txt"): {FRAG},
    ("pytorch_oom", "07.txt"): {EXH},
    ("pytorch_oom", "08.txt"): {ANOMALOUS},
    ("pytorch_oom", "09.txt"): {EXH},
    ("pytorch_oom", "10.txt"): {EXH},
    ("pytorch_oom", "11.txt"): {TOO_LARGE},
    ("pytorch_oom", "12.txt"): {FRAG},
    ("pytorch_oom", "13.txt"): {ANOMALOUS},
    # cut before its reserve ("... is allo"); what the process holds beyond PyTorch's allocations,
    # 2.02 GiB, bounds the reserve at 5.1 % of the card: fragmentation is not excluded
    ("pytorch_oom", "14.txt"): {UNKNOWN},
    ("pytorch_oom", "15.txt"): {EXH},
    ("pytorch_oom", "16.txt"): {EXH},
    ("pytorch_oom", "17.txt"): {OTHER_PROCESS},
    ("pytorch_oom", "18.txt"): {ENGINE},
    ("pytorch_oom", "19.txt"): {ENGINE},
    ("pytorch_oom", "20.txt"): {EXH},
    ("pytorch_oom", "21.txt"): {EXH},
    ("pytorch_oom", "22.txt"): {EXH},
    ("pytorch_oom", "23.txt"): {TOO_LARGE},
    ("pytorch_oom", "24.txt"): {EXH},
    ("pytorch_oom", "25.txt"): {ENGINE},
    ("pytorch_oom", "26.txt"): {FRAG},
    ("pytorch_oom", "27.txt"): {EXH},
    ("pytorch_oom", "28.txt"): {ANOMALOUS},
    ("pytorch_oom", "29.txt"): {EXH},
    ("pytorch_oom", "30.txt"): {UNKNOWN},  # cut after "... of which 448.00 KiB is free."
}
pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/data/real-samples is not here")


@pytest.mark.parametrize("sample", sorted(VERDICTS), ids=lambda key: "/".join(key))
def test_every_oom_sample_gets_the_verdict_its_figures_call_for(sample):
    folder, name = sample
    path = FOLDERS[folder] / name
    importer = recognise(path.read_text(encoding="utf-8", errors="replace")[:65536])
    assert importer is not None, name
    events = importer.read(Source.from_path(path)).tables["events"]
    ooms = events[events["kind"] == "oom"]
    assert set(ooms["oom_class"]) == VERDICTS[sample]
    assert ooms["oom_reason"].str.len().gt(0).all()


def test_the_table_covers_every_oom_sample_there_is():
    present = {(folder, p.name) for folder, root in FOLDERS.items() for p in root.iterdir() if p.is_file()}
    assert present == set(VERDICTS)


@pytest.mark.parametrize("sample", sorted(VERDICTS), ids=lambda key: "/".join(key))
def test_the_diagnosis_follows_the_verdict(sample, run_cli):
    """A fragmentation verdict is the allocator's own proof: memory-fragmentation likely (0.7 or more).
    Any other verdict never makes it likely, so its pitfall ("the memory is free, only fragmented")
    is never the advice on a card that was full."""
    import json

    folder, name = sample
    code, out, err = run_cli("file", FOLDERS[folder] / name, "--format", "json")
    assert code == 0, err
    scores = {h["id"]: h["score"] for h in json.loads(out)["hypotheses"]}
    fragmentation = scores.get("memory-fragmentation", 0.0)
    if VERDICTS[sample] == {FRAG}:
        assert fragmentation >= 0.7
    elif FRAG not in VERDICTS[sample]:
        assert fragmentation < 0.5
