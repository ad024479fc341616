"""The ``rulka tmi`` commands (:mod:`.cli`): ``install`` the plugin (:mod:`.install`), ``check`` a game's
link (:mod:`.check`), ``standin``, ``line`` and the other tools of the real game."""
