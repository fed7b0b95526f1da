"""The Redis layer: key names, Lua scripts, and the broker that runs them."""
