"""Block keys: the 128-bit identity kvtierd stores a block under.

An engine names blocks its own way (SGLang: hex strings; vLLM: bytes, or an
int in older versions); every adapter turns those names into 16-byte keys
here, so the same name always reaches the same block. A key is 16 bytes,
little-endian (lo, hi) as the C++ client's block_key; the all-zero key is
reserved by the daemon and never produced.
"""

import hashlib

KEY_BYTES = 16


def _digest(data):
    key = hashlib.blake2b(data, digest_size=KEY_BYTES).digest()
    # The daemon refuses {0, 0}; a digest that is all zeros (p = 2^-128) is moved off it.
    return key if any(key) else b"\x01" + key[1:]


def _name_bytes(name):
    if isinstance(name, bytes):
        return b"b" + name
    if isinstance(name, str):
        return b"s" + name.encode()
    if isinstance(name, int):
        if name < 0:
            raise ValueError(f"a block name must not be negative, got {name}")
        return b"i" + name.to_bytes((name.bit_length() + 7) // 8 or 1, "little")
    hash_value = getattr(name, "hash_value", None)  # vLLM <= 0.10's BlockHash named tuple
    if isinstance(hash_value, int):
        return _name_bytes(hash_value)
    raise TypeError(f"a block name is bytes, str or int, got {type(name).__name__}")


def block_key(name, scope=b""):
    """The key of the block an engine calls `name`, within `scope`.

    A 16-byte `bytes` with an empty scope is taken as a key already; any other
    name is hashed (BLAKE2b-128) together with its scope, so that e.g. two
    tensor-parallel ranks (scope b"rank0", b"rank1") never share a block.
    """
    if isinstance(name, bytes) and len(name) == KEY_BYTES and not scope and any(name):
        return name
    return _digest(scope + b"\0" + _name_bytes(name))


def block_keys(names, scope=b""):
    return [block_key(n, scope) for n in names]
