// EmberClient module.
