#!/usr/bin/env bash
# Install everything the tests need into .venv and run the whole suite (README, command 2).
# The AngelScript engine (Debian's angelscript-dev) lets the plugin tests compile our
# TMInterface plugin in a test host; without it (or without root) those tests skip and say why.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && ! dpkg -s angelscript-dev >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends angelscript-dev g++ make >/dev/null) \
    || echo "scripts/test.sh: could not install angelscript-dev; the plugin host tests will skip"
fi
python3 -m venv .venv
.venv/bin/pip install -q torch==2.13.0 -e '.[test]'
# psutil (from the tmi extra, whose pygbx the tests do not need): game supervision's process facts.
.venv/bin/pip install -q 'psutil>=5.9'
# Ray with Ray Tune (the collector_backend: ray and rulka tune tests); where it cannot be installed those tests skip and say why.
.venv/bin/pip install -q -e '.[test,ray]' || echo "scripts/test.sh: could not install Ray; the Ray collector and rulka tune tests will skip"
# scipy (the driver extra: the racing-line driver); where it cannot be installed its tests skip and say why.
.venv/bin/pip install -q -e '.[driver]' || echo "scripts/test.sh: could not install scipy; the racing-line driver tests will skip"
# matplotlib (the plots extra: training curves with axes); where it cannot be installed the curve test skips.
.venv/bin/pip install -q -e '.[plots]' || echo "scripts/test.sh: could not install matplotlib; the curve test will skip"
.venv/bin/python -m pytest -q "$@"
