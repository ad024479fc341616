#!/bin/sh
# The stand-in game under the TMI_LINUX_LAUNCH_SCRIPT contract: `launch.sh <port>` starts a game whose
# rulka_link plugin listens on 127.0.0.1:<port> (here: the AngelScript host with the simulator's car).
#   TMI_LINUX_LAUNCH_SCRIPT=environments/trackmania/tmi/standin/launch.sh TMI_ACCOUNT_NAME=standin \
#     rulka -p trackmania_iqn_uni --config presets/trackmania_iqn_uni_standin.yaml
# Python: $RULKA_STANDIN_PYTHON, else the repository's .venv, else python3.
# Another plugin: RULKA_STANDIN_PLUGIN=/path/Plugin.as. Clients that run `launch.sh <port>`, wait for it to
# return and then find the game by process name (Linesight): RULKA_STANDIN_DETACH=1 starts the game
# detached (named TmForever) and returns once its plugin listens (RULKA_STANDIN_LOG, _START_TIMEOUT_S).
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
python=${RULKA_STANDIN_PYTHON:-}
if [ -z "$python" ]; then
  if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" -m environments.trackmania.tmi.standin "$@"
