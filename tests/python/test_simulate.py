"""kvtier.simulate against the `kvtier sim` command: the same inputs give the
same report, value for value (only the wall-clock figures may differ)."""

import json
import os
import pathlib
import subprocess
import tempfile
import unittest

import kvtier

KVTIER_BIN = os.environ["KVTIER_BIN"]
SOURCE = pathlib.Path(os.environ["KVTIER_SOURCE_DIR"])
# Figures measured on the wall clock: the one part of a report that varies.
WALL_CLOCK_KEYS = ("wall_seconds", "simulated_per_wall", "messages_per_second")

# A small seeded synthetic workload: two tenants, shared prompts, sessions.
SYNTHETIC = """\
[model]
preset = "llama-3-8b"
[tiers.dram]
capacity = "16GB"
[tiers.nvme]
capacity = "64GB"
[sim]
trace_format = "synthetic"
[sim.synthetic]
requests = 60
rate_per_s = 4.0
shared_prefix_tokens = 1024
prefix_groups = 2
turns_per_session = 3
think_time_s = 2.0
tenants = 2
seed = 11
input = { dist = "lognormal", mean = 900.0, sigma = 0.5 }
output = { dist = "lognormal", mean = 40.0, sigma = 0.4 }
"""


def cli_report(*args):
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "report.json"
        subprocess.run([KVTIER_BIN, "sim", *args, "--quiet", "--json-out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def without_wall_clock(report):
    for key in WALL_CLOCK_KEYS:
        assert key in report, key
    return {k: v for k, v in report.items() if k not in WALL_CLOCK_KEYS}


def without_cluster_wall_clock(report):
    """A cluster report less its wall-clock figures, its replicas' too."""
    out = {k: v for k, v in report.items() if k not in ("wall_seconds", "speedup")}
    out["per_replica"] = [dict(r, report=without_wall_clock(r["report"])) for r in report["per_replica"]]
    return out


class SimulateMatchesCli(unittest.TestCase):
    def assert_same_report(self, from_python, from_cli):
        # The CLI adds the policy's standing (a cache-only replay for the
        # Belady bound) after the run; the run itself must be the same.
        self.assertIn("policy", from_cli)
        from_cli = {k: v for k, v in from_cli.items() if k != "policy"}
        self.assertEqual(without_wall_clock(from_python), without_wall_clock(from_cli))

    def test_builtin_config_and_trace(self):
        report = kvtier.simulate(overrides={"max_requests": 40})
        self.assert_same_report(report, cli_report("--max-requests", "40"))
        self.assertEqual(report["config"], "<built-in>/configs/default.toml")
        self.assertEqual(report["trace"], "<built-in>/sim/traces/mooncake_conversation_trace.jsonl")
        self.assertEqual(report["requests_completed"] + report["requests_rejected"], 40)

    def test_config_file_trace_file_and_overrides(self):
        config = str(SOURCE / "configs/experiments/70b-tight-hbm.toml")
        trace = SOURCE / "sim/traces/azure_llm_2023_conv.csv"
        report = kvtier.simulate(config, trace,
                                 {"max_requests": 50, "dram": "8GB", "time_scale": 0.5, "format": "azure"})
        self.assert_same_report(
            report,
            cli_report(config, "--trace", str(trace), "--max-requests", "50", "--dram", "8GB", "--time-scale",
                       "0.5", "--format", "azure"))
        self.assertEqual(report["config"], config)
        self.assertEqual(report["trace"], str(trace))

    def test_toml_text_is_the_same_run_as_its_file(self):
        report = kvtier.simulate(SYNTHETIC)
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "synthetic.toml"
            path.write_text(SYNTHETIC)
            from_cli = cli_report(str(path))
            self.assertEqual(kvtier.simulate(path)["config"], str(path))
        self.assertEqual(report["config"], "<string>")
        from_cli["config"] = "<string>"
        self.assert_same_report(report, from_cli)
        self.assertEqual(report["trace"], "synthetic(seed=11)")
        self.assertEqual(report["requests_completed"], 60)

    def test_a_cluster_config_runs_the_cluster(self):
        # Two replicas behind the cache-aware router, a remote tier: the
        # package runs what `kvtier sim` runs for it, not a single node.
        config = SYNTHETIC + """
[cluster]
replicas = 2
router = "cache_aware"
remote_capacity = "1TB"
"""
        report = kvtier.simulate(config)
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "cluster.toml"
            path.write_text(config)
            from_cli = cli_report(str(path))
        from_cli["config"] = "<string>"
        for replica in from_cli["per_replica"]:
            replica["report"]["config"] = "<string>"
        self.assertEqual(without_cluster_wall_clock(report), without_cluster_wall_clock(from_cli))
        self.assertEqual(report["replicas"], 2)
        self.assertEqual(len(report["per_replica"]), 2)
        self.assertEqual(report["requests_completed"], 60)
        self.assertEqual(sum(r["routed"] for r in report["per_replica"]), 60)

    def test_same_inputs_same_report(self):
        first = kvtier.simulate(SYNTHETIC, overrides={"max_requests": 20})
        second = kvtier.simulate(SYNTHETIC, overrides={"max_requests": 20})
        self.assertEqual(without_wall_clock(first), without_wall_clock(second))


class SimulateRefusesMistakes(unittest.TestCase):
    def test_unknown_override_names_the_known_keys(self):
        with self.assertRaises(kvtier.Error) as caught:
            kvtier.simulate(overrides={"hbmm": "40GB"})
        self.assertEqual(str(caught.exception),
                         "overrides: unknown key 'hbmm'; known keys: hbm, dram, nvme, format, max_requests, "
                         "time_scale, skip_bad")

    def test_bad_override_value_names_the_flag(self):
        with self.assertRaises(kvtier.Error) as caught:
            kvtier.simulate(overrides={"hbm": "1B"})
        self.assertIn("--hbm 1B", str(caught.exception))

    def test_bad_toml_text_is_located(self):
        with self.assertRaises(kvtier.Error) as caught:
            kvtier.simulate("[cache]\nblock_tokenz = 16\n")
        self.assertTrue(str(caught.exception).startswith("<string>:2:"), str(caught.exception))
        self.assertIn("block_tokenz", str(caught.exception))

    def test_missing_config_file_names_it(self):
        with self.assertRaises(kvtier.Error) as caught:
            kvtier.simulate("/nonexistent/kvtier.toml")
        self.assertIn("/nonexistent/kvtier.toml", str(caught.exception))

    def test_oracle_policy_is_refused_for_a_timed_run(self):
        with self.assertRaises(kvtier.Error) as caught:
            kvtier.simulate('[cache]\npolicy = "oracle"\n')
        self.assertIn("cache-only", str(caught.exception))

    def test_wrong_types_are_type_errors(self):
        with self.assertRaises(TypeError):
            kvtier.simulate(42)
        with self.assertRaises(TypeError):
            kvtier.simulate(overrides={"max_requests": [1]})
        with self.assertRaises(TypeError):
            kvtier.simulate(overrides={"skip_bad": "yes"})


if __name__ == "__main__":
    unittest.main()
