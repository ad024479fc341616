"""The link to a game: TMInterface 2's wire protocol (:mod:`.protocol`: message ids, framing), the client
that speaks it (:mod:`.client`), the state blob it reads (:mod:`.state`) and the surface materials in it
(:mod:`.materials`). Knows nothing of launching games or of training."""
