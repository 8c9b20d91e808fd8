"""kvtier: a tiered KV-cache runtime for LLM inference, from Python.

    kvtier.simulate(config, trace, overrides)   the simulator in this process; the report as a dict
    kvtier.Client(endpoint, tenant, token)      a connection to kvtierd; blocks through shared memory
    kvtier.sglang.KvtierHiCacheStorage          SGLang's HiCache storage backend over kvtierd
    kvtier.vllm.KvtierOffloadingSpec            vLLM's KV offloading spec over kvtierd

See docs/python.md.
"""

from ._kvtier import Error
from ._simulate import simulate
from .client import Client
from .keys import block_key

__all__ = ["Client", "Error", "block_key", "simulate"]
