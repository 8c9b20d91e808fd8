"""kvtier.simulate: the simulator in this process, its report as a dict."""

import json
import os

from . import _kvtier

# The overrides simulate() takes, each standing for the `kvtier sim` flag of
# the same name (an error about one names that flag).
OVERRIDE_KEYS = ("hbm", "dram", "nvme", "format", "max_requests", "time_scale", "skip_bad")


def _text(key, value):
    """An override's value as the command line would spell it."""
    if isinstance(value, bool):
        raise TypeError(f"overrides[{key!r}]: expected a str or a number, got {value!r}")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"overrides[{key!r}]: expected a str or a number, got {type(value).__name__}")


def _config_source(config):
    """(text or path, is_path, label) for the report and error messages.

    A path-like object, or a str without a newline or '=' that names a file,
    is a path; any other str is TOML text ("" is the empty config: every
    default). None is the built-in config.
    """
    if config is None:
        return None, False, ""
    if isinstance(config, os.PathLike):
        return os.fspath(config), True, os.fspath(config)
    if not isinstance(config, str):
        raise TypeError(f"config: expected a path, TOML text or None, got {type(config).__name__}")
    looks_like_path = config != "" and "\n" not in config and "=" not in config and "[" not in config
    if looks_like_path:
        return config, True, config
    return config, False, "<string>"


def simulate(config=None, trace=None, overrides=None):
    """Runs one timed simulation and returns its report as a dict.

    config: a TOML file (str or path-like), TOML text, or None for the
        built-in default (Llama-3-8B on one H200).
    trace: a trace file (str or path-like), or None for the one the config
        names (the bundled Mooncake trace unless it names another).
    overrides: {"hbm": "40GB", "max_requests": 200, ...}: the `kvtier sim`
        flags of the same names, checked as strictly as those.

    The dict is what `kvtier sim --json-out` writes for the same inputs: with
    a [cluster] table in the config, the cluster's report (replicas, router,
    remote tier, per_replica; docs/cluster.md), else the single node's. Only
    the wall-clock figures (wall_seconds, simulated_per_wall,
    messages_per_second, a cluster's speedup) differ from run to run. A
    mistake raises kvtier.Error with kvtier's located message.
    """
    overrides = dict(overrides or {})
    unknown = sorted(k for k in overrides if k not in OVERRIDE_KEYS)
    if unknown:
        raise _kvtier.Error(f"overrides: unknown key {unknown[0]!r}; known keys: {', '.join(OVERRIDE_KEYS)}")
    skip_bad = overrides.pop("skip_bad", False)
    if not isinstance(skip_bad, bool):
        raise TypeError(f"overrides['skip_bad']: expected a bool, got {skip_bad!r}")
    text_overrides = {k: _text(k, v) for k, v in overrides.items()}
    source, is_path, label = _config_source(config)
    trace_path = None if trace is None else os.fspath(trace)
    report = _kvtier.simulate(source, is_path, label, trace_path, text_overrides, skip_bad)
    return json.loads(report)
