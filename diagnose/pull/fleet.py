"""Sweep a fleet: one dump per host from Prometheus, each analysed, and one table of who shows what.

A platform team asks "which of my hosts show which problem last night?";
the answer is the same diagnosis ``diagnose file`` gives, run on every host's
pulled dump, summed up in ``fleet.md`` (for people) and ``fleet.json`` (for
scripts). A host that cannot be pulled or analysed is a row that says why,
not the end of the sweep.

Hosts are swept ``concurrency`` at a time, each in a worker process that
pulls it, writes its dump, analyses it and lets it go before the next (the
memory is a few hosts', whatever the fleet's size). Each finished host leaves
its result in ``.sweep/HOST.json`` as it finishes, so a sweep stopped part-way
resumes where it stopped (``resume``), and ``fleet.json`` is written from
them at the end. ``shard=(k, n)`` takes the hosts whose name hashes to k
modulo n: n sweeps (the pods of a Kubernetes Indexed Job) share a fleet,
every host in exactly one, each writing ``fleet-shard-K-of-N.json`` (and
``.md``) beside the others in a shared folder, and :func:`merge` joins them
into the ``fleet.json`` one sweep would have written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from diagnose.errors import DiagnoseError, InputError, PullError
from diagnose.processes.pool import worker_pool
from diagnose.pull.client import PrometheusClient
from diagnose.pull.pull import iso_utc as _iso, known_instances, pull
from diagnose.units import counted

RESULTS = ".sweep"  # the finished hosts' results, one file each, inside the sweep's folder

LIKELY = 0.5  # the report's own line between "likely" and not (docs/report-json.md)


@dataclass(frozen=True)
class HostResult:
    host: str
    dump: str | None
    findings: list[dict]  # {"id", "score", "confidence", "title"}, strongest first
    problem: str | None = None
    labels: dict[str, str] = field(
        default_factory=dict
    )  # what the series say of the host (pull's environment)


def sweep(
    client: PrometheusClient,
    start: float,
    end: float,
    output: Path,
    job: str | None = None,
    step_s: float | None = None,
    rules_dir: Path | None = None,
    say: Callable[[str], None] = print,
    shard: tuple[int, int] | None = None,
    concurrency: int = 4,
    resume: bool = False,
) -> list[HostResult]:
    """Every host (of ``job``, of this ``shard``) pulled and analysed; fleet.md and fleet.json written."""
    hosts = known_instances(client, end, job)
    if not hosts:
        raise PullError(f"{client.url}: no instances with an up series" + (f" in job {job!r}" if job else ""))
    if shard is not None:
        hosts = [host for host in hosts if in_shard(host, *shard)]
        say(f"diagnose: shard {shard[0]} of {shard[1]}: {counted(len(hosts), 'host')}")
    output.mkdir(parents=True, exist_ok=True)
    (output / RESULTS).mkdir(exist_ok=True)
    window = {"start": _iso(start), "end": _iso(end)}
    finished, elsewhere = _finished(output, hosts, window) if resume else ({}, set())
    if finished:
        say(f"diagnose: resuming: {len(finished)} of {counted(len(hosts), 'host')} already done")
    for start_, end_ in sorted(elsewhere):  # "--from now-5m" moves with the clock: said, not done silently
        say(
            f"diagnose: resuming: the earlier sweep into {output} was of {start_} to {end_}, not this "
            f"window ({window['start']} to {window['end']}); its hosts are pulled again (give --from and "
            "--to as times, not 'now-...', to resume a sweep)"
        )
    todo = [host for host in hosts if host not in finished]
    if resume:  # a host with no result was stopped part-way: its dump, this sweep's own, is pulled again
        for host in todo:
            shutil.rmtree(output / _folder(host), ignore_errors=True)
    progress = _Progress(len(hosts), len(finished), say)
    with worker_pool(max(1, min(concurrency, len(todo) or 1))) as pool:
        running = {
            pool.submit(_sweep_host, client, host, start, end, output, step_s, rules_dir): host
            for host in todo
        }
        for future in as_completed(running):
            result = future.result()
            _keep(output, result, window)
            finished[result.host] = result
            progress.done(result)
    results = [finished[host] for host in hosts]
    _write_summary(output, results, client.url, window["start"], window["end"], shard)
    return results


def in_shard(host: str, index: int, count: int) -> bool:
    """Whether ``host`` is in shard ``index`` of ``count``: a stable hash of its name, the same on every
    machine and every run, so the shards of one fleet never overlap and never miss a host."""
    digest = hashlib.blake2b(host.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count == index


def _sweep_host(
    client: PrometheusClient,
    host: str,
    start: float,
    end: float,
    output: Path,
    step_s: float | None,
    rules_dir: Path | None,
) -> HostResult:
    """One host, in a worker process: pulled, written, analysed, and let go. Never raises: a host that
    cannot be done is a result that says why."""
    from diagnose.dump import load_dump
    from diagnose.judge import default_rules_dir, load_rules
    from diagnose.pipeline import analyse_dump

    try:
        rules = load_rules(rules_dir or default_rules_dir())
        summary = pull(client, host, start, end, output / _folder(host), step_s, say=lambda line: None)
        dump = load_dump(str(summary.path))
        labels = dump.manifest.extra.get("environment") or {}
        report = analyse_dump(dump, rules).report
    except DiagnoseError as error:
        return HostResult(host, None, [], str(error))
    except Exception as error:  # noqa: BLE001 - one host's bug is that host's row, not the sweep's end
        return HostResult(
            host, None, [], f"not analysed: this is a bug in diagnose ({type(error).__name__}: {error})"
        )
    findings = [h.brief() for h in report.hypotheses]
    return HostResult(host, str(summary.path), findings, labels={k: str(v) for k, v in labels.items()})


def _keep(output: Path, result: HostResult, window: dict) -> None:
    """The host's result, written whole or not at all, before the sweep goes on."""
    path = output / RESULTS / f"{_folder(result.host)}.json"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"window": window, **asdict(result)}) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def _finished(
    output: Path, hosts: list[str], window: dict
) -> tuple[dict[str, HostResult], set[tuple[str, str]]]:
    """The hosts an earlier sweep of the same window finished, and the other windows earlier sweeps
    were of (their results are redone)."""
    found, elsewhere = {}, set()
    for host in hosts:
        path = output / RESULTS / f"{_folder(host)}.json"
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if kept.get("host") != host:
            continue
        if kept.get("window") == window:
            found[host] = _result(kept)
        elif isinstance(kept.get("window"), dict):
            elsewhere.add((str(kept["window"].get("start")), str(kept["window"].get("end"))))
    return found, elsewhere


class _Progress:
    """``diagnose: 37 of 200 hosts (1 failed), 1m12s, about 4m left`` after each host."""

    def __init__(self, total: int, done: int, say: Callable[[str], None]) -> None:
        self._total, self._done, self._failed, self._say = total, done, 0, say
        self._started, self._base = time.monotonic(), done

    def done(self, result: HostResult) -> None:
        self._done += 1
        self._failed += result.problem is not None
        elapsed = time.monotonic() - self._started
        rate = (self._done - self._base) / elapsed if elapsed > 0 else 0.0
        left = (
            f", about {_span((self._total - self._done) / rate)} left"
            if rate > 0 and self._done < self._total
            else ""
        )
        failed = f" ({self._failed} failed)" if self._failed else ""
        self._say(
            f"diagnose: {self._done} of {counted(self._total, 'host')}{failed}, {_span(elapsed)}{left}: "
            f"{result.host}"
        )


def _span(seconds: float) -> str:
    minutes, seconds = divmod(int(round(seconds)), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def merge(paths: list[Path], output: Path) -> list[HostResult]:
    """The shards of one sweep (the same server and window; folders holding ``fleet-shard-*.json``, or
    the files) as the one fleet.md and fleet.json in ``output`` that a single sweep would have written.
    Every shard of the count must be there: a missing one is named."""
    files = []
    for given in paths:
        if given.is_dir():
            found = sorted(given.glob("fleet-shard-*-of-*.json"))
            if not found:
                raise InputError(f"{given}: no fleet-shard-K-of-N.json here (written by pull --shard)")
            files += found
        else:
            files.append(given)
    sweeps = []
    for path in files:
        try:
            sweeps.append((path, json.loads(path.read_text(encoding="utf-8"))))
        except OSError as error:
            raise InputError(f"{path}: cannot be read: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise InputError(f"{path}: line {error.lineno}: not JSON ({error.msg})") from None
    first_path, first = sweeps[0]
    for path, other in sweeps[1:]:
        for key in ("prometheus", "window"):
            if other.get(key) != first.get(key):
                raise InputError(
                    f"{path}: another sweep ({key} {other.get(key)!r}) than {first_path} ({first.get(key)!r})"
                )
    shards = {(data.get("shard") or {}).get("index"): data.get("shard") for _, data in sweeps}
    counts = {shard.get("count") for shard in shards.values() if shard}
    if None in shards or len(counts) != 1:
        raise InputError("not the shards of one sweep: each must be a pull --shard K/N of the same N")
    (count,) = counts
    missing = sorted(set(range(count)) - set(shards))
    if missing:
        raise InputError(
            f"shard{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} of {count} missing: "
            "merge them all, or the fleet is incomplete"
        )
    results: dict[str, HostResult] = {}
    for path, data in sweeps:
        for host in data.get("hosts", []):
            if host["host"] in results:
                raise InputError(
                    f"{path}: host {host['host']} is in two of the shards: not one sweep's shards"
                )
            results[host["host"]] = _result(host)
    merged = [results[host] for host in sorted(results)]
    output.mkdir(parents=True, exist_ok=True)
    window = first.get("window", {})
    _write_summary(
        output, merged, first.get("prometheus", ""), window.get("start", ""), window.get("end", "")
    )
    return merged


def _folder(host: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in host) or "host"


def _result(kept: dict) -> HostResult:
    return HostResult(
        kept["host"],
        kept.get("dump"),
        kept.get("findings", []),
        kept.get("problem"),
        kept.get("labels") or {},
    )


_SHOWN_HOSTS = 12  # a finding's hosts named in fleet.md before "and N more"
_SHARED = 0.8  # a value held by this share of a finding's hosts is something they share


def _by_finding(results: list[HostResult]) -> list[str]:
    """A section per likely finding, the one on most hosts first: its hosts, strongest first, and what
    they share (the values of the hosts' labels that most of them hold), with how common each value is
    across the fleet, so that "every host has it" is told from "only these have it"."""
    analysed = [r for r in results if not r.problem]
    scored: dict[str, list[tuple[float, HostResult]]] = {}
    for result in analysed:
        for finding in result.findings:
            if finding["score"] >= LIKELY:
                scored.setdefault(finding["id"], []).append((finding["score"], result))
    if not scored:
        return ["No finding is likely on any host.", ""]
    lines = []
    for rule_id, hits in sorted(scored.items(), key=lambda item: (-len(item[1]), item[0])):
        hits.sort(key=lambda hit: (-hit[0], hit[1].host))
        named = ", ".join(f"{r.host} {score:.2f}" for score, r in hits[:_SHOWN_HOSTS])
        more = f", and {len(hits) - _SHOWN_HOSTS} more" if len(hits) > _SHOWN_HOSTS else ""
        lines += [f"## {rule_id}: {len(hits)} of {len(analysed)} hosts", "", named + more + ".", ""]
        shared = _shared([r for _, r in hits], analysed)
        if shared:
            lines += ["What they share (the rarest in the fleet first):", "", *shared, ""]
    return lines


def _shared(hosts: list[HostResult], analysed: list[HostResult]) -> list[str]:
    found = []
    for name in sorted({name for r in hosts for name in r.labels}):
        values = [r.labels.get(name) for r in hosts]
        for value in sorted({v for v in values if v is not None}):
            have = values.count(value)
            if have / len(hosts) < _SHARED:
                continue
            fleet = sum(r.labels.get(name) == value for r in analysed)
            line = f"- {name} = {value}: {have} of {len(hosts)} (in the fleet: {fleet} of {len(analysed)})"
            found.append((fleet / len(analysed), line))
    return [line for _, line in sorted(found, key=lambda item: item[0])]


def _write_summary(
    output: Path,
    results: list[HostResult],
    url: str,
    start: str,
    end: str,
    shard: tuple[int, int] | None = None,
) -> None:
    """fleet.json and fleet.md, the window in ISO-8601; hosts in name order, so that a sweep and its
    merged shards agree."""
    results = sorted(results, key=lambda result: result.host)
    name = "fleet" if shard is None else f"fleet-shard-{shard[0]}-of-{shard[1]}"
    (output / f"{name}.json").write_text(
        json.dumps(
            {
                "prometheus": url,
                "window": {"start": start, "end": end},
                "likely_at": LIKELY,
                **({"shard": {"index": shard[0], "count": shard[1]}} if shard else {}),
                "hosts": [asdict(result) for result in results],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    ids = sorted({f["id"] for r in results for f in r.findings if f["score"] >= LIKELY})
    failed = [r for r in results if r.problem]
    lines = [
        f"# Fleet sweep: {len(results)} host{'s' if len(results) != 1 else ''}, {start} to {end}"
        + (f" (shard {shard[0]} of {shard[1]}: `diagnose fleet merge` joins the shards)" if shard else ""),
        "",
        f"From {url}. {len(results) - len(failed)} hosts analysed"
        + (f", {len(failed)} not (said in the table at the end)" if failed else "")
        + f". A finding is likely on a host where its score is {LIKELY} or more; "
        "`diagnose file HOST/` gives the host's whole report.",
        "",
    ]
    lines += _by_finding(results)
    lines += ["## Every host", "", "A cell is the finding's score where it is likely on that host.", ""]
    header = ["host", *ids, "other findings"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for result in results:
        if result.problem:
            lines.append(
                f"| {result.host} | " + " | ".join("" for _ in ids) + f" | not analysed: {result.problem} |"
            )
            continue
        scores = {f["id"]: f["score"] for f in result.findings}
        cells = [f"{scores[i]:.2f}" if scores.get(i, 0) >= LIKELY else "" for i in ids]
        weaker = [f"{f['id']} {f['score']:.2f}" for f in result.findings if f["score"] < LIKELY]
        lines.append(f"| {result.host} | " + " | ".join([*cells, ", ".join(weaker) or "none"]) + " |")
    (output / f"{name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
