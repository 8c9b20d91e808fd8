#!/usr/bin/env bash
# README's first command: installs what is missing, builds, and runs kvtier's
# main job on its embedded default (a simulation of the bundled Mooncake trace).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
if [ $# -eq 0 ]; then set -- sim; fi
exec "${KVTIER_BUILD_DIR:-$root/build}/kvtier" "$@"
