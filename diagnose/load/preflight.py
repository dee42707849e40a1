"""Before a load run: the options made into a plan, the target asked whether it answers at all, and the
load machine checked for other work (a busy load machine measures itself, as a busy host does)."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from diagnose.errors import InputError, LoadError
from diagnose.load.plan import Api, Prompt, Settings, Target
from diagnose.load.workload import read_prompts
from diagnose.units import parse_duration

BUSY_SHARE = 0.25  # of every CPU, used by other processes in the second before the run
_REACH_TIMEOUT_S = 10.0


def plan_from(args: argparse.Namespace) -> tuple[Target, Settings, list[Prompt]]:
    """The target, settings and prompts the options ask for; every option checked, the target reached.
    The prompts are the user's (``--prompts``), or none: the built-in mix, never sending one twice."""
    url = args.target
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"{url}: expected an http:// or https:// URL of the endpoint")
    api = Api(args.api) if args.api else _api_of(parts.path)
    if args.body is not None and api is not Api.HTTP:
        raise InputError("--body is for --api http; the OpenAI APIs' bodies are written by diagnose load")
    timeout = parse_duration(args.timeout)
    target = Target(
        url=url,
        api=api,
        model=args.model,
        body=_body(args.body) if args.body is not None else None,
        headers=_headers(args.header),
        timeout_s=timeout,
    )
    if api is not Api.HTTP and target.model is None:
        target = Target(url, api, _served_model(target), None, target.headers, timeout)
    settings = Settings(
        baseline_s=parse_duration(args.baseline),
        step_s=parse_duration(args.step),
        start_rps=args.start_rate,
        growth=args.growth,
        resolution=args.resolution,
        max_steps=args.max_steps,
        soak_share=args.share,
        soak_s=0.0 if args.soak.strip() in ("0", "0s", "none") else parse_duration(args.soak),
        seed=args.seed,
        processes=args.workers,
    )
    settings.check()
    if args.workers < 1:
        raise InputError(f"--workers {args.workers}: expected 1 or more")
    # No prompts: the built-in mix, made afresh as each stage sends (workload.fresh_prompts)
    prompts = read_prompts(args.prompts) if args.prompts else []
    return target, settings, prompts


def _api_of(path: str) -> Api:
    if path.rstrip("/").endswith("/chat/completions"):
        return Api.CHAT
    if path.rstrip("/").endswith("/completions"):
        return Api.COMPLETIONS
    return Api.HTTP


def _body(path: Path) -> dict:
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise InputError(f"{path}:{error.lineno}, column {error.colno}: not JSON ({error.msg})") from None
    if not isinstance(body, dict):
        raise InputError(f'{path}: expected a JSON object such as {{"prompt": "{{{{prompt}}}}"}}')
    return body


def _headers(given: list[str]) -> dict[str, str]:
    headers = {}
    for header in given:
        name, colon, value = header.partition(":")
        if not colon or not name.strip():
            raise InputError(f"--header {header!r}: expected 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    return headers


def _served_model(target: Target) -> str | None:
    """The first model the server lists at /v1/models (vLLM, SGLang, TGI and llama.cpp's server list
    theirs); None where it lists none, since many servers then take any name."""
    models_url = target.url.split("/v1/", 1)[0] + "/v1/models" if "/v1/" in target.url else None
    if models_url is None:
        return None
    request = urllib.request.Request(models_url, headers=target.headers)
    try:
        with urllib.request.urlopen(request, timeout=_REACH_TIMEOUT_S) as response:
            listed = json.loads(response.read()).get("data") or []
    except urllib.error.HTTPError:
        return None  # it answers, but lists no models there
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise LoadError(f"{target.base}: cannot be reached ({reason})") from None
    except (ValueError, AttributeError):
        return None
    ids = [m.get("id") for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
    return ids[0] if ids else None


def machine_note() -> str:
    """A line to say where this machine was busy with other work just before the run ("" if quiet)."""
    psutil.cpu_percent(percpu=False)
    processes = list(psutil.process_iter(["pid", "name"]))
    for process in processes:
        try:
            process.cpu_percent()
        except psutil.Error:
            continue
    busy = psutil.cpu_percent(interval=1.0) / 100
    if busy < BUSY_SHARE:
        return ""
    ours = psutil.Process().pid
    readings = []
    for process in processes:
        try:
            if process.pid != ours:
                readings.append((process.cpu_percent(), process.info["name"], process.pid))
        except psutil.Error:
            continue
    top = sorted(readings, reverse=True)[:3]
    named = ", ".join(f"{name} (pid {pid}, {cpu:.0f} % of a core)" for cpu, name, pid in top if cpu >= 5)
    return (
        f"this machine was {busy:.0%} busy before the run"
        + (f", mostly {named}" if named else "")
        + ": the load engine shares its CPUs, and where it falls behind the run says so"
    )
