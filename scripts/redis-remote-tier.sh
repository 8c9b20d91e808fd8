#!/usr/bin/env bash
# Starts a redis-server on loopback for kvtier's remote tier (remote/,
# docs/cluster.md): no persistence, an LRU memory cap, so that the server
# evicts blocks instead of refusing writes (an evicted block is a miss to
# kvtier, never wrong bytes).
#
#   scripts/redis-remote-tier.sh [PORT [MAXMEMORY]]   default 6379, 8gb
#
# Runs in the foreground; stop it with Ctrl-C. Debian: apt-get install redis-server.
set -euo pipefail
port=${1:-6379}
maxmemory=${2:-8gb}
if ! command -v redis-server >/dev/null; then
  echo "redis-remote-tier: redis-server is not installed (Debian: apt-get install redis-server)" >&2
  exit 1
fi
exec redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
  --maxmemory "$maxmemory" --maxmemory-policy allkeys-lru --proto-max-bulk-len 64mb
