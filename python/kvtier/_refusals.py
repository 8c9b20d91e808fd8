"""How the adapters meet a daemon that refuses or has gone away.

To an engine, kvtierd is a cache: a block it cannot get is a miss, and a block
it cannot store is not stored. So an adapter turns kvtier.Error (a full
quota, a closed connection, a daemon that exited) into the engine's own
words for that (False for the block, 0 hits, a failed transfer) and logs it,
instead of raising into the engine's prefetch, write-back or worker thread.
"""

import logging

from ._kvtier import Error

log = logging.getLogger("kvtier")


def answered(call, fallback, what):
    """call(), or fallback when the daemon refused it (logged as a warning)."""
    try:
        return call()
    except Error as e:
        log.warning("kvtier: %s refused: %s", what, e)
        return fallback
