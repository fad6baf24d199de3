#!/usr/bin/env bash
# Stops the local Hardhat node started by up.sh (scripts/services.sh down calls this).
set -euo pipefail
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/up.sh" down
